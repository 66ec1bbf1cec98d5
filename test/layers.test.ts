import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

/**
 * The service's layers: data flows face → core → db; only core touches Prisma, and the pipeline
 * changes revisions through core. Read from the sources: an import is where a layer reaches below
 * itself. (Types of the generated models may be named anywhere: they are the data's shape.)
 */
const SRC = fileURLToPath(new URL("../src", import.meta.url));

const filesUnder = (dir: string): string[] =>
  readdirSync(join(SRC, dir), { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? filesUnder(join(dir, e.name)) : e.name.endsWith(".ts") ? [join(dir, e.name)] : [],
  );

/** The value imports (not `import type`) of a file, by module path as written. */
function valueImports(file: string): string[] {
  const text = readFileSync(join(SRC, file), "utf8");
  return [...text.matchAll(/^import\s+(?!type\s)[^;]*?from\s+"([^"]+)";/gms)].map((m) => m[1]!);
}

/** What a file may not reach: the database client, core's dependencies, the Prisma client's values. */
function reachesBelowCore(file: string): string[] {
  const text = readFileSync(join(SRC, file), "utf8");
  const found = valueImports(file).filter((from) => /\/db\/|generated\/prisma/.test(from));
  if (/\bCoreDeps\b/.test(text)) found.push("CoreDeps");
  if (/\.prisma\b|\$queryRaw|\$executeRaw/.test(text)) found.push("a Prisma call");
  return found;
}

describe("layers", () => {
  it.each(["graphql", "rest", "pipeline"])("src/%s reaches the database only through core", (layer) => {
    const offenders = filesUnder(layer)
      .map((file) => [relative(".", file), reachesBelowCore(file)] as const)
      .filter(([, found]) => found.length > 0);
    expect(offenders).toEqual([]);
  });

  it("finds what it looks for (core itself reaches the database)", () => {
    expect(reachesBelowCore("core/revision-steps.ts")).toEqual(expect.arrayContaining(["CoreDeps", "a Prisma call"]));
  });
});
