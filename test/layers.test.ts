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

/** The modules a source names: imports and re-exports (types too), bare and dynamic imports. */
function moduleNames(text: string): string[] {
  const from = [...text.matchAll(/^(?:import|export)\s[^;]*?\sfrom\s+"([^"]+)";/gms)].map((m) => m[1]!);
  const bare = [...text.matchAll(/^import\s+"([^"]+)";/gm)].map((m) => m[1]!);
  const dynamic = [...text.matchAll(/\bimport\(\s*"([^"]+)"\s*\)/g)].map((m) => m[1]!);
  return [...from, ...bare, ...dynamic];
}

/** What a source may not reach: the database modules, core's dependencies, a transaction, Prisma's client and calls. */
function reachesBelowCore(text: string): string[] {
  const found = moduleNames(text).filter((from) => /\/db\//.test(from));
  // The generated models' types are the data's shape; the client's values (Prisma.sql, the client) are not.
  found.push(...[...text.matchAll(/^import\s+(?!type\s)[^;]*?from\s+"([^"]*generated\/prisma[^"]*)";/gms)].map((m) => m[1]!));
  for (const [name, pattern] of [
    ["CoreDeps", /\bCoreDeps\b/],
    ["PrismaClient", /\bPrismaClient\b/],
    ["a transaction (Tx)", /\bTx\b/],
    ["a Prisma call", /\.prisma\b|\$queryRaw|\$executeRaw|\$transaction/],
  ] as const) {
    if (pattern.test(text)) found.push(name);
  }
  return found;
}

const source = (file: string) => readFileSync(join(SRC, file), "utf8");

describe("layers", () => {
  it.each(["graphql", "rest", "middleware", "pipeline"])("src/%s reaches the database only through core", (layer) => {
    const offenders = filesUnder(layer)
      .map((file) => [relative(".", file), reachesBelowCore(source(file))] as const)
      .filter(([, found]) => found.length > 0);
    expect(offenders).toEqual([]);
  });

  it("finds what it looks for", () => {
    // Core itself reaches the database.
    expect(reachesBelowCore(source("core/revision-steps.ts"))).toEqual(expect.arrayContaining(["CoreDeps", "a Prisma call", "a transaction (Tx)"]));
    expect(reachesBelowCore(source("core/revision-leases.ts"))).toEqual(expect.arrayContaining(["../db/client.js", "PrismaClient"]));
    // Every way of naming a module.
    const names = [
      `import type { X } from "../db/a.js";`,
      `export { Y } from "../db/b.js";`,
      `import "../db/c.js";`,
      `const m = await import("../db/d.js");`,
      `import { Prisma } from "../generated/prisma/client.js";`,
    ].map((line) => reachesBelowCore(line));
    expect(names).toEqual([["../db/a.js"], ["../db/b.js"], ["../db/c.js"], ["../db/d.js"], ["../generated/prisma/client.js"]]);
    expect(reachesBelowCore(`import type { Revision } from "../generated/prisma/client.js";`)).toEqual([]);
  });
});
