import { relative } from "node:path";
import { BaseSequencer, type TestSpecification } from "vitest/node";

/**
 * The test files that run only against PostgreSQL (they skip themselves without TEST_DATABASE_URL),
 * longest first. Add a file here when it joins them.
 */
export const POSTGRES_ONLY = [
  "test/reliability/connection-cuts.test.ts",
  "test/pipeline/replicas.test.ts",
  "test/perf/explain.test.ts",
  "test/reliability/db-faults.test.ts",
  "test/events/bus.test.ts",
  "test/oauth/replicas.test.ts",
];

/**
 * vitest starts the longest files first, as the last run in the checkout timed them. In CI that run
 * is the PGlite one (.ci/run runs the suite on PGlite, then on PostgreSQL), where the files above
 * skip in milliseconds: on PostgreSQL they would start last, and connection-cuts.test.ts would spend
 * its minute alone at the end (the PostgreSQL run took 225 s where its files' work, shared by its
 * workers, came to about 170). On a PostgreSQL run they go first.
 */
export default class PostgresOnlyFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    if (!process.env.TEST_DATABASE_URL) return sorted;
    const rank = (file: TestSpecification) => {
      const at = POSTGRES_ONLY.indexOf(relative(this.ctx.config.root, file.moduleId).split("\\").join("/"));
      return at === -1 ? POSTGRES_ONLY.length : at;
    };
    // Array.prototype.sort is stable: the other files keep vitest's order.
    return sorted.sort((a, b) => rank(a) - rank(b));
  }
}
