/** Runs a benchmark's body; a failure prints its message and exits 1 (servers are killed on exit). */
export function runMain(body: () => Promise<void>): void {
  body().then(
    () => process.exit(0),
    (err: unknown) => {
      process.stderr.write(`benchmark failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
      process.exit(1);
    },
  );
}
