import { type ChildProcess, execFile, spawn, spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { gzipSync } from "node:zlib";
import { pack } from "tar-stream";
import { TOKEN_ISSUER } from "../../src/core/registry/index.js";
import { reaped } from "../../scripts/lib/processes.js";

/**
 * A real container registry (Debian's docker-registry: CNCF Distribution 2.8) and real pushes
 * (skopeo) for the end-to-end tests, with this service as the registry's token server.
 */

const run = promisify(execFile);

/** Which of the tools the end-to-end tests need are missing (Debian: apt-get install docker-registry skopeo). */
export function missingTools(): string[] {
  return ["docker-registry", "skopeo"].filter((tool) => spawnSync("sh", ["-c", `command -v ${tool}`]).status !== 0);
}

export interface RegistryProcess {
  /** http://127.0.0.1:<port> */
  url: string;
  host: string;
  stop(): Promise<void>;
  logTail(): string;
}

/** docker-registry could not listen: another process holds the port (chosen before it started). */
export class PortTaken extends Error {}

/**
 * Starts docker-registry on `port` with a configuration written into a temp folder: token
 * authentication with `realm` (this service's /registry/token), service `127.0.0.1:<port>`, and
 * the certificate of the service's signing key as the root bundle. Waits until /v2/ answers.
 * Throws PortTaken when another process holds the port.
 */
export async function startRegistry(port: number, realm: string, certificate: string): Promise<RegistryProcess> {
  const dir = mkdtempSync(join(tmpdir(), "dcp-registry-"));
  const host = `127.0.0.1:${port}`;
  const config = join(dir, "config.yml");
  writeFileSync(
    config,
    [
      "version: 0.1",
      "log:",
      "  level: info",
      "storage:",
      "  filesystem:",
      `    rootdirectory: ${join(dir, "data")}`,
      "  delete:",
      "    enabled: true",
      "http:",
      `  addr: ${host}`,
      "auth:",
      "  token:",
      `    realm: ${realm}`,
      `    service: ${host}`,
      `    issuer: ${TOKEN_ISSUER}`,
      `    rootcertbundle: ${certificate}`,
      "",
    ].join("\n"),
  );
  const child: ChildProcess = reaped(spawn("docker-registry", ["serve", config], { stdio: ["ignore", "pipe", "pipe"] }));
  const lines: string[] = [];
  const keep = (chunk: Buffer) => {
    lines.push(...chunk.toString("utf8").split("\n").filter(Boolean));
    if (lines.length > 200) lines.splice(0, lines.length - 200);
  };
  child.stdout!.on("data", keep);
  child.stderr!.on("data", keep);
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  const url = `http://${host}`;
  const deadline = Date.now() + 30_000;
  for (;;) {
    if (child.exitCode !== null) {
      const output = lines.join("\n");
      throw new (/address already in use/.test(output) ? PortTaken : Error)(`docker-registry exited:\n${output}`);
    }
    try {
      const res = await fetch(`${url}/v2/`);
      // Token authentication: /v2/ answers 401 with the challenge once the registry is up.
      if (res.status === 401) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`docker-registry did not answer:\n${lines.join("\n")}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  return {
    url,
    host,
    logTail: () => lines.slice(-40).join("\n"),
    async stop() {
      if (child.exitCode === null) child.kill("SIGTERM");
      await exited;
    },
  };
}

const sha256 = (data: Buffer) => `sha256:${createHash("sha256").update(data).digest("hex")}`;

/**
 * A small OCI image in an `oci:` layout folder: one layer holding `/hello.txt` (its text makes
 * the image unique), a config and a manifest. Returns the folder.
 */
export async function makeOciImage(text: string): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), "dcp-oci-"));
  const blobs = join(dir, "blobs", "sha256");
  mkdirSync(blobs, { recursive: true });
  const put = (data: Buffer) => {
    const digest = sha256(data);
    writeFileSync(join(blobs, digest.slice(7)), data);
    return { digest, size: data.length };
  };
  const tarball = await tarOf({ "hello.txt": text });
  const layer = put(gzipSync(tarball));
  const config = put(
    Buffer.from(
      JSON.stringify({
        architecture: "amd64",
        os: "linux",
        config: { Cmd: ["/bin/sh"] },
        rootfs: { type: "layers", diff_ids: [sha256(tarball)] },
      }),
    ),
  );
  const manifest = put(
    Buffer.from(
      JSON.stringify({
        schemaVersion: 2,
        mediaType: "application/vnd.oci.image.manifest.v1+json",
        config: { mediaType: "application/vnd.oci.image.config.v1+json", ...config },
        layers: [{ mediaType: "application/vnd.oci.image.layer.v1.tar+gzip", ...layer }],
      }),
    ),
  );
  writeFileSync(join(dir, "oci-layout"), JSON.stringify({ imageLayoutVersion: "1.0.0" }));
  writeFileSync(
    join(dir, "index.json"),
    JSON.stringify({ schemaVersion: 2, manifests: [{ mediaType: "application/vnd.oci.image.manifest.v1+json", ...manifest, annotations: { "org.opencontainers.image.ref.name": "latest" } }] }),
  );
  return dir;
}

/** A tar archive of these files (name → text). */
export async function tarOf(files: Record<string, string | Buffer>): Promise<Buffer> {
  const archive = pack();
  const chunks: Buffer[] = [];
  const done = new Promise<Buffer>((resolve, reject) => {
    archive.on("data", (c: unknown) => void chunks.push(c as Buffer));
    archive.on("end", () => resolve(Buffer.concat(chunks)));
    archive.on("error", reject);
  });
  for (const [name, content] of Object.entries(files)) archive.entry({ name }, content);
  archive.finalize();
  return done;
}

/** `skopeo copy oci:<dir>:latest docker://<target>` with the push token as the password. */
export async function skopeoPush(dir: string, target: string, token: string): Promise<{ ok: boolean; output: string }> {
  try {
    const { stdout, stderr } = await run(
      "skopeo",
      ["copy", "--dest-tls-verify=false", "--dest-creds", `oauth2accesstoken:${token}`, `oci:${dir}:latest`, `docker://${target}`],
      { timeout: 120_000 },
    );
    return { ok: true, output: stdout + stderr };
  } catch (err) {
    const e = err as { stdout?: string; stderr?: string; message: string };
    return { ok: false, output: `${e.stdout ?? ""}${e.stderr ?? ""}${e.message}` };
  }
}
