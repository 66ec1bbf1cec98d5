import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import { createGunzip } from "node:zlib";
import { extract } from "tar-stream";
import { isStorable, jsonFault } from "../../core/validation.js";
import { isObj } from "../../core/stored-json.js";
import { storableText } from "../../core/text.js";

/** A tarball unpacking to more than this is refused (a gzip bomb is small until opened). */
export const MAX_UNPACKED_BYTES = 2 * 1024 * 1024 * 1024;
export const MAX_FILES = 100_000;
/** Entries of any kind (directories, links…): each costs a header to read, and a gzip of empty ones is tiny. */
export const MAX_ENTRIES = 2 * MAX_FILES;
/** The framework configuration is read only up to this size. */
export const MAX_CONFIG_BYTES = 1024 * 1024;
/** How many file names the report keeps (the count is always exact), and how many bytes of names in all. */
export const LISTED_FILES = 200;
export const LISTED_NAME_BYTES = 64 * 1024;
/** The longest entry name taken: Linux's PATH_MAX. A tar header may carry megabytes of name; no file system can unpack one. */
export const MAX_NAME_BYTES = 4096;

export interface TarballReport {
  file_count: number;
  /** The first regular files, as named in the tarball (without a leading ./): LISTED_FILES, or fewer once their names reach LISTED_NAME_BYTES. */
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
 * `configPath`, and reads the graphs it names. Every failure message names the file at fault, and
 * what it keeps of the tarball (names, messages) is text PostgreSQL can store.
 *
 * A tarball that is not one fails (`ok: false`); reading `body` failing (a lost database connection
 * between two chunks) is no fault of the tarball: that error is thrown, as is the signal's reason
 * once `signal` aborts (the read stops then, and the body is closed once its pending read answers).
 */
export async function inspectTarball(body: AsyncIterable<Uint8Array>, configPath: string, signal: AbortSignal): Promise<TarballInspection> {
  const wanted = normalizeEntry(configPath);
  const files: string[] = [];
  let listedBytes = 0;
  let listing = true;
  let entryCount = 0;
  let fileCount = 0;
  let unpacked = 0;
  let config: Buffer | null = null;
  /** Set when reading `body` failed: the error to throw. */
  const read: { failure?: { err: unknown } } = {};
  const tar = extract();
  // Every stream's error, and the abort (already aborted: at once), destroys them all, so that
  // `for await (tar)` below ends, and the body is closed.
  const unpacking = pipeline(
    Readable.from(
      reading(body, (err) => {
        read.failure ??= { err };
      }),
    ),
    createGunzip(),
    tar,
    { signal },
  );
  // Its failure is seen as `tar`'s, below; its rejection is not left unhandled.
  unpacking.catch(() => {});
  try {
    for await (const entry of tar) {
      const { name, size = 0, type, linkname } = entry.header;
      if (++entryCount > MAX_ENTRIES) return { ok: false, message: `it holds more than ${MAX_ENTRIES} entries` };
      const nameBytes = Buffer.byteLength(name);
      if (nameBytes > MAX_NAME_BYTES) return { ok: false, message: `it holds an entry whose name is longer than ${MAX_NAME_BYTES} bytes` };
      // GNU tar skips such entries: what the build reads would not be there once unpacked.
      if (name.split("/").includes("..")) return { ok: false, message: `it holds an entry outside its own folder, which tar does not unpack: ${storableText(name, 256)}` };
      unpacked += size;
      if (unpacked > MAX_UNPACKED_BYTES) return { ok: false, message: `it unpacks to more than ${MAX_UNPACKED_BYTES} bytes` };
      if (type === "file" || type === "contiguous-file") {
        fileCount++;
        if (fileCount > MAX_FILES) return { ok: false, message: `it holds more than ${MAX_FILES} files` };
        const path = normalizeEntry(name);
        const bad = notText(path);
        if (bad) return { ok: false, message: `it holds a file whose name is not valid text: ${bad}` };
        // The first files, in order: the list ends at the first name that does not fit.
        listing &&= files.length < LISTED_FILES && listedBytes + nameBytes <= LISTED_NAME_BYTES;
        if (listing) {
          files.push(path);
          listedBytes += nameBytes;
        }
        // Unpacking leaves the last entry of a name: that one is read.
        if (path === wanted) {
          if (size > MAX_CONFIG_BYTES) return { ok: false, message: `${configPath} is larger than ${MAX_CONFIG_BYTES} bytes` };
          config = await readAll(entry);
          continue;
        }
      } else if ((type === "link" || type === "symlink") && normalizeEntry(name) === wanted) {
        const kind = type === "link" ? "hard" : "symbolic";
        return { ok: false, message: `${configPath} is a ${kind} link in it (to ${storableText(linkname ?? "", 256)}): the build reads a file there` };
      }
      entry.resume();
    }
  } catch (err) {
    signal.throwIfAborted();
    if (read.failure) throw read.failure.err;
    return { ok: false, message: `it is not a valid gzip tarball (${storableText(err instanceof Error ? err.message : String(err), 1024)})` };
  } finally {
    // Returning early (or failing) ends the reading too: the pipeline destroys every stream.
    tar.destroy();
  }
  // Should an abort or a failed read ever end `for await` without its error, the tarball was not read whole.
  signal.throwIfAborted();
  if (read.failure) throw read.failure.err;
  const found = { file_count: fileCount, files, unpacked_bytes: unpacked, framework_config_path: configPath };
  if (config === null) return { ok: false, message: `${configPath} is not in it (${fileCount} files)`, report: found };
  const graphs = readGraphs(config);
  if ("error" in graphs) return { ok: false, message: `${configPath} ${graphs.error}`, report: found };
  return { ok: true, report: { ...found, graphs } };
}

/**
 * `body`, telling `failed` when reading it fails (not when its reader stops), and closed as soon as
 * its reader stops (a read still pending then ends first), even before the first read.
 */
function reading(body: AsyncIterable<Uint8Array>, failed: (err: unknown) => void): AsyncIterableIterator<Uint8Array> {
  const chunks = body[Symbol.asyncIterator]();
  let finished = false;
  const close = async () => {
    if (finished) return;
    finished = true;
    await chunks.return?.();
  };
  return {
    [Symbol.asyncIterator]() {
      return this;
    },
    async next() {
      if (finished) return { done: true, value: undefined };
      try {
        const next = await chunks.next();
        if (next.done) finished = true;
        return next;
      } catch (err) {
        finished = true;
        failed(err);
        throw err;
      }
    },
    async return() {
      await close();
      return { done: true, value: undefined };
    },
    async throw(err: unknown) {
      await close();
      throw err;
    },
  };
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
    // Without the text the parser quotes around an unexpected token: a value left unquoted there may
    // be a secret (the secret mask only knows whole values), or hold a NUL.
    return { error: `does not parse as JSON (${storableText(jsonFault(err).error, 1024)})` };
  }
  const graphs = isObj(parsed) ? parsed.graphs : undefined;
  if (!isObj(graphs) || Object.keys(graphs).length === 0) {
    return { error: `names no graphs: it needs "graphs": {"<name>": "./path/to/file.py:graph"}` };
  }
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(graphs)) {
    // Kept on the revision (jsonb) and quoted in messages (text): neither stores a NUL, nor jsonb an unpaired surrogate.
    const badName = notText(name);
    if (badName) return { error: `names a graph whose name is not valid text: ${badName}` };
    const target = typeof value === "string" ? value : isObj(value) && typeof value.path === "string" ? value.path : null;
    if (!target) return { error: `names graph '${name}' without saying where it is (a "./file.py:graph" string)` };
    const badTarget = notText(target);
    if (badTarget) return { error: `says where graph '${name}' is in text that is not valid: ${badTarget}` };
    out[name] = target;
  }
  return out;
}

/** Why PostgreSQL could not store a string read from a tarball (text refuses NUL, jsonb unpaired surrogates too), or null. */
function notText(s: string): string | null {
  if (isStorable(s)) return null;
  return s.includes("\u0000") ? "it holds a NUL (\\u0000) character" : "it holds an unpaired surrogate (\\ud800-\\udfff)";
}


