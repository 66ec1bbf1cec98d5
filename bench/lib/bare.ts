import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { captureTail, freePort, ROOT, waitReady } from "./server.js";
import { SERVER_NODE_FLAGS } from "../../scripts/lib/processes.js";

export interface BareServer {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

/** Starts bench/bare-server.ts in its own process, answering every request with `json`. */
export async function startBareServer(json: unknown): Promise<BareServer> {
  const dir = mkdtempSync(join(tmpdir(), "dcp-bare-"));
  const file = join(dir, "body.json");
  writeFileSync(file, JSON.stringify(json));
  const port = await freePort();
  // Under the service's node flags, as the peers of bench:peers are.
  const child = spawn(process.execPath, [...SERVER_NODE_FLAGS, "--import", "tsx", "bench/bare-server.ts"], {
    cwd: ROOT,
    env: { ...process.env, PORT: String(port), BARE_JSON_FILE: file },
    stdio: ["ignore", "pipe", "pipe"],
  });
  const tail = captureTail(child);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const url = `http://127.0.0.1:${port}`;
  const stop = async () => {
    if (child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const killer = setTimeout(() => child.kill("SIGKILL"), 5_000);
      await exited;
      clearTimeout(killer);
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    // Any path answers 200 once it listens.
    await waitReady(url, exited, 30_000);
  } catch (err) {
    await stop();
    throw new Error(`bare server: ${err instanceof Error ? err.message : String(err)}\n${tail()}`);
  }
  return { url, pid: child.pid!, stop };
}
