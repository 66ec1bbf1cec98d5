import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { GraphQLList, GraphQLNonNull, GraphQLObjectType, type GraphQLOutputType, GraphQLSchema, parse } from "graphql";
import { compileQuery, type CompiledQuery, isCompiledQuery } from "graphql-jit";
import { params } from "./lib/args.js";
import { median } from "./lib/load.js";
import { runMain } from "./lib/main.js";
import { fmt, Report } from "./lib/report.js";
import { SOURCE_CONFIG_FIELDS } from "./lib/queries.js";
import { SIZED_SPEC } from "./lib/seed.js";
import { refCommandLine, withRefSource } from "./lib/ref-source.js";
import { ROOT } from "./lib/server.js";

/**
 * views: what GraphQL's execution spends on a page's stored configs, in one process, without HTTP or
 * a database: a page of source configs (each with a resource spec, SIZED_SPEC) shown through the
 * schema's SourceConfig type, compiled by graphql-jit as the server compiles it, executed and
 * serialised, for a git ref (A) against the working tree (B), alternating. A change to how those
 * fields resolve moves a whole list page by a few per cent, less than server starts differ by in
 * bench/ab.ts; here it can be seen.
 *
 *   npx tsx bench/views.ts <git ref> [--set page=100] [--set rounds=20] [--no-record]
 *
 * The ref's src/ is taken from git (withRefSource) and imported beside the working tree's.
 */
const { sha, args } = refCommandLine("npx tsx bench/views.ts <git ref> [--set page=100] [--set rounds=20] [--no-record]");
const p = params(args, {
  full: { page: 100, rounds: 20, runs: 300 },
  small: { page: 100, rounds: 6, runs: 100 },
});

/** The source config as the list query shows it (bench/lib/queries.ts). */
const SELECTION = `{ configs { ${SOURCE_CONFIG_FIELDS} } }`;

/** A tree's schema and its view of a stored source config, as its src/graphql has them. */
interface Side {
  schema: GraphQLSchema;
  sourceConfigView: (config: never) => unknown;
}

async function sideOf(srcRoot: string): Promise<Side> {
  const load = (path: string) => import(pathToFileURL(join(srcRoot, "src", "graphql", "types", path)).href);
  const [{ schema }, { sourceConfigView }] = await Promise.all([load("index.ts"), load("source-config.ts")]);
  if (!(schema instanceof GraphQLSchema) || typeof sourceConfigView !== "function") throw new Error(`${srcRoot}: no schema or sourceConfigView`);
  return { schema, sourceConfigView };
}

/** The side's SourceConfig type as the only field of a query, over the stored configs. */
function compiled(side: Side, configs: unknown[]): CompiledQuery {
  const type = side.schema.getType("SourceConfig") as GraphQLOutputType;
  const query = new GraphQLObjectType({
    name: "Query",
    fields: { configs: { type: new GraphQLList(new GraphQLNonNull(type)), resolve: () => configs.map((c) => side.sourceConfigView(c as never)) } },
  });
  const result = compileQuery(new GraphQLSchema({ query }), parse(SELECTION));
  if (!isCompiledQuery(result)) throw new Error(`graphql-jit declined the query: ${JSON.stringify(result.errors)}`);
  return result;
}

runMain(async () => {
  const report = new Report("views", args.scale, p);
  await withRefSource(sha, "views-src-", async (tree) => {
    const configs = Array.from({ length: p.page }, (_, i) => ({
      deployment_type: "dev",
      build_on_push: false,
      resource_spec: { ...SIZED_SPEC, labels: { team: `team-${i}` } },
    }));
    const sides = [
      { name: `A (${sha})`, query: compiled(await sideOf(tree), configs) },
      { name: "B (working tree)", query: compiled(await sideOf(ROOT), configs) },
    ];
    const answers = await Promise.all(sides.map(async (s) => JSON.stringify(await s.query.query(undefined, {}, {}))));
    if (answers[0] !== answers[1]) throw new Error(`A and B answer differently; not timing them.\nA: ${answers[0]!.slice(0, 300)}\nB: ${answers[1]!.slice(0, 300)}`);

    const times = sides.map(() => [] as number[]);
    for (let round = 0; round < p.rounds; round++) {
      for (const [i, side] of sides.entries()) {
        const start = process.hrtime.bigint();
        for (let run = 0; run < p.runs; run++) JSON.stringify(await side.query.query(undefined, {}, {}));
        times[i]!.push(Number(process.hrtime.bigint() - start) / 1e6 / p.runs);
      }
    }
    // The first rounds include V8's warm-up (compiling, inlining); they are left out.
    const settled = times.map((t) => t.slice(Math.min(4, p.rounds - 1)));
    report.table(
      `a page of ${p.page} source configs with resource specs: execution and serialisation, ms a page`,
      ["side", "median", "min", "max"],
      sides.map((s, i) => [s.name, median(settled[i]!).toFixed(3), Math.min(...settled[i]!).toFixed(3), Math.max(...settled[i]!).toFixed(3)]),
    );
    report.note(`B ÷ A: ${fmt.ratio(median(settled[1]!) / median(settled[0]!))} of the time a page (medians of ${settled[0]!.length} rounds of ${p.runs} pages).`);
  });
  report.finish(args.record);
});
