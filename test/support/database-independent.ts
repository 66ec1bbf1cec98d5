/**
 * CI (.ci/run) runs the same suite twice: on embedded PGlite, then on PostgreSQL (TEST_DATABASE_URL).
 * A few costly test files cannot come out differently in the second run, because what they test never
 * reaches TEST_DATABASE_URL: processes started with an embedded database of their own (npm start, the
 * start-up and DATA_DIR lock tests), PGlite itself (snapshots, PGlite's migrations), or a subject that
 * is not the database (GraphiQL in a browser, whose server side runs on both in
 * test/graphql/subscriptions.test.ts). They would only repeat what the first run showed, so .ci/run
 * sets TEST_SKIP_DATABASE_INDEPENDENT=1 for the PostgreSQL run and they skip themselves there with
 * `describe.skipIf(skipDatabaseIndependent)`.
 *
 * Only ever in a PostgreSQL run: a PGlite run (`npm test` without TEST_DATABASE_URL) runs everything,
 * whatever the flag says. Cheap test files that do not touch the database (pure parsing, the state
 * machine) are not marked: they cost nothing to run twice.
 */
export const skipDatabaseIndependent = Boolean(process.env.TEST_DATABASE_URL) && process.env.TEST_SKIP_DATABASE_INDEPENDENT === "1";
