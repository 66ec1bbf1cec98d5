import { parseArgs } from "node:util";

export type DbKind = "pglite" | "postgres";

export interface BenchArgs {
  /** Databases to run on, in order: the embedded default first. */
  dbs: DbKind[];
  /** "full" (the sizes of bench/README.md's "full scale" column, the default) or "small" (quick runs on a busy machine). */
  scale: "full" | "small";
  /** Append the table to bench/RESULTS.md. */
  record: boolean;
  /** Numeric overrides: --set deployments=200 --set duration=5 … */
  overrides: Record<string, number>;
}

const USAGE = `options:
  --db pglite|postgres|both   databases to run on (default both)
  --scale full|small          full (default): the sizes of bench/README.md's "full scale" column;
                              small: its "small scale" column, a quick run
  --set name=value            override one parameter (repeatable), e.g. --set duration=5
  --no-record                 print the table only; do not append it to bench/RESULTS.md`;

/** Parses the benchmark command line; exits with the usage on a bad option. */
export function parseBenchArgs(argv = process.argv.slice(2)): BenchArgs {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      options: {
        db: { type: "string", default: "both" },
        scale: { type: "string", default: "full" },
        set: { type: "string", multiple: true, default: [] },
        "no-record": { type: "boolean", default: false },
        help: { type: "boolean", default: false },
      },
    }));
  } catch (err) {
    fail(err instanceof Error ? err.message : String(err));
  }
  if (values.help) {
    process.stdout.write(`${USAGE}\n`);
    process.exit(0);
  }
  const dbs: DbKind[] =
    values.db === "both" ? ["pglite", "postgres"] : values.db === "pglite" || values.db === "postgres" ? [values.db] : fail(`--db ${values.db}`);
  if (values.scale !== "full" && values.scale !== "small") fail(`--scale ${values.scale}`);
  const overrides: Record<string, number> = {};
  for (const pair of values.set) {
    const m = /^([a-zA-Z]+)=(\d+(?:\.\d+)?)$/.exec(pair);
    if (!m) fail(`--set ${pair}: expected name=number`);
    overrides[m[1]!] = Number(m[2]);
  }
  return { dbs, scale: values.scale, record: !values["no-record"], overrides };
}

/** The benchmark's parameters: full or small defaults, then --set overrides (unknown names refused). */
export function params<T extends Record<string, number>>(args: BenchArgs, sizes: { full: T; small: T }): T {
  const chosen = { ...sizes[args.scale] };
  for (const [name, value] of Object.entries(args.overrides)) {
    if (!(name in chosen)) fail(`--set ${name}: known parameters are ${Object.keys(chosen).join(", ")}`);
    (chosen as Record<string, number>)[name] = value;
  }
  return chosen;
}

function fail(problem: string): never {
  process.stderr.write(`bad option: ${problem}\n${USAGE}\n`);
  process.exit(2);
}
