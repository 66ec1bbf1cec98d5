import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";
import { describe, expect, it } from "vitest";
import { POSTGRES_ONLY } from "../support/sequencer.js";

const ROOT = join(import.meta.dirname, "../..");

function testFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return testFiles(path);
    return entry.name.endsWith(".test.ts") ? [relative(ROOT, path).split("\\").join("/")] : [];
  });
}

/** A whole file skipped without PostgreSQL: its top-level describe asks for TEST_DATABASE_URL, directly or through a constant. */
function postgresOnly(source: string): boolean {
  const constant = /const (\w+) = process\.env\.TEST_DATABASE_URL;/.exec(source)?.[1];
  const condition = constant ? `(?:process\\.env\\.TEST_DATABASE_URL|${constant})` : "process\\.env\\.TEST_DATABASE_URL";
  return new RegExp(`^describe\\.skipIf\\(!${condition}\\)`, "m").test(source);
}

describe("the test order on PostgreSQL (test/support/sequencer.ts)", () => {
  it("lists exactly the files that run only on PostgreSQL", () => {
    const found = testFiles(join(ROOT, "test")).filter((file) => postgresOnly(readFileSync(join(ROOT, file), "utf8")));
    expect(found.length).toBeGreaterThan(0);
    expect([...POSTGRES_ONLY].sort()).toEqual(found.sort());
  });
});
