import { Readable } from "node:stream";
import { createGunzip } from "node:zlib";
import { extract } from "tar-stream";

/** A tarball unpacking to more than this is refused (a gzip bomb is small until opened). */
export const MAX_UNPACKED_BYTES = 2 * 1024 * 1024 * 1024;
export const MAX_FILES = 100_000;
/** The framework configuration is read only up to this size. */
export const MAX_CONFIG_BYTES = 1024 * 1024;
/** How many file names the report keeps (the count is always exact). */
export const LISTED_FILES = 200;

export interface TarballReport {
  file_count: number;
  /** The first LISTED_FILES regular files, as named in the tarball (without a leading ./). */
  files: string[];
  unpacked_bytes: number;
  framework_config_path: string;
  /** The graphs the configuration names: graph name → where it is defined (`./agent.py:graph`). */
  graphs: Record<string, string>;
}

export type TarballInspection = { ok: true; report: TarballReport } | { ok: false; message: string; report?: Partial<TarballReport> };

/** `./a/b` and `a/b` name the same entry. */
export const normalizeEntry = (name: string) => name.replace(/^(\.\/|\/)+/, "");

/**
 * Opens a gzip tarball as it streams by: lists its files, finds the framework configuration at
 * `configPath`, and reads the graphs it names. Every failure message names the file at fault.
 */
export async function inspectTarball(body: AsyncIterable<Uint8Array>, configPath: string): Promise<TarballInspection> {
  const wanted = normalizeEntry(configPath);
  const files: string[] = [];
  let fileCount = 0;
  let unpacked = 0;
  let config: Buffer | null = null;
  const tar = extract();
  const source = Readable.from(body).pipe(createGunzip());
  source.on("error", (err) => tar.destroy(err));
  source.pipe(tar);
  try {
    for await (const entry of tar) {
      const { name, size = 0, type } = entry.header;
      unpacked += size;
      if (unpacked > MAX_UNPACKED_BYTES) return { ok: false, message: `it unpacks to more than ${MAX_UNPACKED_BYTES} bytes` };
      if (type === "file" || type === "contiguous-file") {
        fileCount++;
        if (fileCount > MAX_FILES) return { ok: false, message: `it holds more than ${MAX_FILES} files` };
        const path = normalizeEntry(name);
        if (files.length < LISTED_FILES) files.push(path);
        if (path === wanted && config === null) {
          if (size > MAX_CONFIG_BYTES) return { ok: false, message: `${configPath} is larger than ${MAX_CONFIG_BYTES} bytes` };
          config = await readAll(entry);
          continue;
        }
      }
      entry.resume();
    }
  } catch (err) {
    return { ok: false, message: `it is not a valid gzip tarball (${err instanceof Error ? err.message : String(err)})` };
  } finally {
    source.destroy();
  }
  const found = { file_count: fileCount, files, unpacked_bytes: unpacked, framework_config_path: configPath };
  if (config === null) return { ok: false, message: `${configPath} is not in it (${fileCount} files)`, report: found };
  const graphs = readGraphs(config);
  if ("error" in graphs) return { ok: false, message: `${configPath} ${graphs.error}`, report: found };
  return { ok: true, report: { ...found, graphs } };
}

async function readAll(stream: AsyncIterable<unknown>): Promise<Buffer> {
  const parts: Buffer[] = [];
  for await (const part of stream) parts.push(Buffer.from(part as Uint8Array));
  return Buffer.concat(parts);
}

/**
 * The `graphs` of a framework configuration: `{"graphs": {"agent": "./agent.py:graph"}}`, where a
 * graph may also be `{"path": "./agent.py:graph", ...}`.
 */
export function readGraphs(config: Buffer): Record<string, string> | { error: string } {
  let parsed: unknown;
  try {
    parsed = JSON.parse(config.toString("utf8"));
  } catch (err) {
    return { error: `does not parse as JSON (${err instanceof Error ? err.message : String(err)})` };
  }
  const graphs = isObject(parsed) ? parsed.graphs : undefined;
  if (!isObject(graphs) || Object.keys(graphs).length === 0) {
    return { error: `names no graphs: it needs "graphs": {"<name>": "./path/to/file.py:graph"}` };
  }
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(graphs)) {
    const target = typeof value === "string" ? value : isObject(value) && typeof value.path === "string" ? value.path : null;
    if (!target) return { error: `names graph '${name}' without saying where it is (a "./file.py:graph" string)` };
    out[name] = target;
  }
  return out;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === "object" && v !== null && !Array.isArray(v);
