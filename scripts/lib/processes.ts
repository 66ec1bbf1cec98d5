import type { ChildProcess } from "node:child_process";
import { createServer } from "node:net";

/**
 * What the tests' and the benchmarks' server child processes share: a free port to give one, and the
 * promise that none outlives the process that started it.
 */

/**
 * The flags `npm start` gives node (package.json's start script names them too; a test holds the two
 * together). A young generation of 64 MB semi-spaces rather than node's 16: a page of 100 deployments
 * allocates some 1–4 MB, ten in flight at once outgrew the young generation between scavenges, and
 * what was in flight was copied and promoted to the old generation, to be collected again there.
 * Measured with bench/ab.ts (bench/README.md, "The young generation"): 17–26 % less server CPU a
 * request on the REST list, the GraphQL list and the dashboard page.
 */
export const SERVER_NODE_FLAGS = ["--max-semi-space-size=64"] as const;

/**
 * A free TCP port on 127.0.0.1, picked by the kernel. Free when asked, not reserved: another process
 * may take it before the one it is given to listens. Where the server is this service, give it
 * PORT=0 and read its port from its "ready" line (readyUrl) instead.
 */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer();
    probe.once("error", reject);
    probe.listen(0, "127.0.0.1", () => {
      const address = probe.address();
      const port = typeof address === "object" && address ? address.port : 0;
      probe.close(() => resolve(port));
    });
  });
}

/** The URL a line of the service's log says it serves at, if the line is its "ready" line (src/main.ts). */
export function readyUrl(line: string): string | null {
  if (!line.includes('"msg":"ready"')) return null;
  try {
    const { msg, url } = JSON.parse(line) as { msg?: unknown; url?: unknown };
    return msg === "ready" && typeof url === "string" ? url : null;
  } catch {
    return null;
  }
}

const children = new Set<ChildProcess>();
// A failing test or benchmark must not leave servers behind: the ones this process started go with it.
process.on("exit", () => {
  for (const child of children) child.kill("SIGKILL");
});

/** Kills the child with this process, should it still run then; returns it. */
export function reaped(child: ChildProcess): ChildProcess {
  children.add(child);
  child.once("exit", () => children.delete(child));
  return child;
}
