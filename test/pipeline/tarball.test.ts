import { randomBytes } from "node:crypto";
import { gzipSync } from "node:zlib";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { isStorable } from "../../src/core/validation.js";
import { buffer } from "node:stream/consumers";
import { pack } from "tar-stream";
import { inspectTarball, LISTED_NAME_BYTES, MAX_ENTRIES, MAX_NAME_BYTES, readGraphs } from "../../src/pipeline/checks/tarball.js";
import { tarOf } from "../support/registry.js";
import { waitFor } from "../support/wait.js";

/**
 * The tarball check on its own: a body that fails while it is read is an internal error (the step is
 * retried), not a bad tarball, and never an uncaught error; an aborted step stops reading at once;
 * what it keeps from the tarball (file and graph names, messages) is text PostgreSQL can store.
 */

/** Errors no one handled while a test ran (the process would exit on one). */
let uncaught: unknown[] = [];
const onUncaught = (err: unknown) => void uncaught.push(err);
beforeEach(() => {
  uncaught = [];
  process.on("uncaughtException", onUncaught);
  process.on("unhandledRejection", onUncaught);
});
afterEach(() => {
  process.off("uncaughtException", onUncaught);
  process.off("unhandledRejection", onUncaught);
});

const never = new AbortController().signal;

/** A gzip tarball large enough (about 1.5 MB, incompressible) to come in several chunks. */
async function bigTarball(): Promise<Buffer> {
  return gzipSync(await tarOf({ "langgraph.json": '{"graphs": {"agent": "./agent.py:graph"}}', "data.bin": randomBytes(1_500_000) }));
}

/** The body as a blob store hands it out, in chunks of `size` bytes. */
function chunksOf(bytes: Buffer, size = 1024 * 1024): Buffer[] {
  const out: Buffer[] = [];
  for (let i = 0; i < bytes.length; i += size) out.push(bytes.subarray(i, i + size));
  return out;
}

/** A body whose read fails after its first chunk, as a chunk query whose connection dropped. */
async function* failingAfterFirst(bytes: Buffer, err: Error): AsyncGenerator<Uint8Array> {
  yield chunksOf(bytes)[0]!;
  throw err;
}

/** A body whose second chunk does not come until `gate` is let go (a query that takes long); records how far it was read. */
function stalledAfterFirst(bytes: Buffer) {
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const state = { pulls: 0, ended: false, gateReached: false };
  async function* body(): AsyncGenerator<Uint8Array> {
    try {
      for (const chunk of chunksOf(bytes)) {
        state.pulls++;
        if (state.pulls > 1) {
          state.gateReached = true;
          await gate;
        }
        yield chunk;
      }
    } finally {
      state.ended = true;
    }
  }
  return { body: body(), state, open };
}

describe("inspectTarball, when reading the upload fails", () => {
  it("rejects with the read's error (an internal error, retried), with nothing uncaught", async () => {
    const fault = new Error("Connection terminated unexpectedly");
    await expect(inspectTarball(failingAfterFirst(await bigTarball(), fault), "langgraph.json", never)).rejects.toBe(fault);
    expect(uncaught).toEqual([]);
  });

  it("rejects when the first read fails too", async () => {
    const fault = new Error("Connection terminated unexpectedly");
    const body = (async function* (): AsyncGenerator<Uint8Array> {
      throw fault;
    })();
    await expect(inspectTarball(body, "langgraph.json", never)).rejects.toBe(fault);
    expect(uncaught).toEqual([]);
  });

  it("still reads a whole body that does not fail", async () => {
    const found = await inspectTarball((async function* () { yield* chunksOf(await bigTarball()); })(), "langgraph.json", never);
    expect(found).toMatchObject({ ok: true, report: { file_count: 2, files: ["langgraph.json", "data.bin"], graphs: { agent: "./agent.py:graph" } } });
  });

  it("closes the body when it fails the tarball before its end (a configuration too large)", async () => {
    const tarball = gzipSync(await tarOf({ "langgraph.json": Buffer.alloc(1_100_000, 32), "data.bin": randomBytes(1_500_000) }));
    let ended = false;
    const body = (async function* () {
      try {
        yield* chunksOf(tarball, 64 * 1024);
      } finally {
        ended = true;
      }
    })();
    expect(await inspectTarball(body, "langgraph.json", never)).toEqual({ ok: false, message: "langgraph.json is larger than 1048576 bytes" });
    await waitFor(() => ended, Boolean, { what: "the body to be closed" });
    expect(uncaught).toEqual([]);
  });

  it("fails a corrupt tarball as a bad tarball (not an internal error)", async () => {
    const found = await inspectTarball((async function* () { yield Buffer.concat([Buffer.from([0x1f, 0x8b]), Buffer.from("garbage that is not deflate")]); })(), "langgraph.json", never);
    expect(found).toMatchObject({ ok: false, message: expect.stringMatching(/^it is not a valid gzip tarball/) });
    expect(uncaught).toEqual([]);
  });
});

describe("inspectTarball, when its step is aborted", () => {
  it("rejects at once with an aborted signal, reading nothing more", async () => {
    const { body, state } = stalledAfterFirst(await bigTarball());
    const abort = new AbortController();
    abort.abort(new Error("worker stopping"));
    await expect(inspectTarball(body, "langgraph.json", abort.signal)).rejects.toThrow("worker stopping");
    expect(state.gateReached).toBe(false);
    // Closed (a file stream's descriptor with it), though never read.
    expect(await body.next()).toEqual({ done: true, value: undefined });
    expect(uncaught).toEqual([]);
  });

  it("rejects promptly when aborted while a read is pending, and the body is not read on after it", async () => {
    const { body, state, open } = stalledAfterFirst(await bigTarball());
    const abort = new AbortController();
    const inspecting = inspectTarball(body, "langgraph.json", abort.signal);
    const settled = inspecting.then(
      () => "resolved",
      (err: unknown) => err,
    );
    await waitFor(() => state.gateReached, Boolean, { what: "the second chunk's read" });
    abort.abort(new Error("worker stopping"));
    // The pending read is still pending (a query is not cancelled), yet the inspection has ended.
    expect(await settled).toMatchObject({ message: "worker stopping" });
    expect(state.ended).toBe(false);
    // Once the pending read answers, the body is closed: no third chunk is asked for.
    open();
    await waitFor(() => state.ended, Boolean, { what: "the body to be closed" });
    expect(state.pulls).toBe(2);
    expect(uncaught).toEqual([]);
  });
});

describe("what inspectTarball keeps is storable text", () => {
  const inspect = async (files: Record<string, string | Buffer>) =>
    inspectTarball((async function* () { yield gzipSync(await tarOf(files)); })(), "langgraph.json", never);
  /** Every string in a value (keys too). */
  const strings = (v: unknown): string[] =>
    typeof v === "string" ? [v] : Array.isArray(v) ? v.flatMap(strings) : typeof v === "object" && v !== null ? Object.entries(v).flatMap(([k, x]) => [k, ...strings(x)]) : [];

  for (const [what, config, says] of [
    ["a graph name with a NUL", '{"graphs": {"agent\\u0000": "./agent.py:graph"}}', "langgraph.json names a graph whose name is not valid text: it holds a NUL (\\u0000) character"],
    ["a graph name with an unpaired surrogate", '{"graphs": {"agent\\ud800": "./agent.py:graph"}}', "langgraph.json names a graph whose name is not valid text: it holds an unpaired surrogate (\\ud800-\\udfff)"],
    ["a graph's place with a NUL", '{"graphs": {"agent": "./agent.py:graph\\u0000"}}', "langgraph.json says where graph 'agent' is in text that is not valid: it holds a NUL (\\u0000) character"],
    ["a graph's path with an unpaired surrogate", '{"graphs": {"agent": {"path": "./agent\\udc00.py:graph"}}}', "langgraph.json says where graph 'agent' is in text that is not valid: it holds an unpaired surrogate"],
    ["a graph with no place and a NUL in its name", '{"graphs": {"a\\u0000": 1}}', "langgraph.json names a graph whose name is not valid text: it holds a NUL (\\u0000) character"],
  ] as const) {
    it(`fails the build, naming the file and the problem: ${what}`, async () => {
      const found = await inspect({ "langgraph.json": config, "agent.py": "graph = None\n" });
      expect(found.ok).toBe(false);
      if (found.ok) return;
      expect(found.message.startsWith(says), found.message).toBe(true);
      expect(strings(found).every(isStorable)).toBe(true);
    });
  }

  it("quotes no unstorable text from a configuration that does not parse", async () => {
    const found = await inspect({ "langgraph.json": '{"graphs": \u0000 \ud800}' });
    expect(found).toMatchObject({ ok: false, message: expect.stringMatching(/^langgraph\.json does not parse as JSON/) });
    expect(strings(found).every(isStorable)).toBe(true);
  });

  it("quotes nothing of a configuration that does not parse: a value left unquoted may be a secret", async () => {
    const secret = "sk-live-0123456789abcdef";
    for (const config of [
      `{"graphs": {"agent": "./agent.py:graph"}, "env": {"OPENAI_API_KEY": ${secret}}}`,
      `{"graphs": {"agent": "./agent.py:graph"}, "env": {"OPENAI_API_KEY": "${secret}"`,
    ]) {
      const found = await inspect({ "langgraph.json": config, "agent.py": "graph = None\n" });
      expect(found).toMatchObject({ ok: false, message: expect.stringMatching(/^langgraph\.json does not parse as JSON/) });
      for (const text of strings(found)) for (let i = 0; i + 4 <= secret.length; i++) expect(text, text).not.toContain(secret.slice(i, i + 4));
    }
  });

  it("fails a tarball with a file whose name holds a NUL, naming neither it nor the NUL", async () => {
    // A name that is not ASCII goes in a PAX header, which can carry a NUL.
    const found = await inspect({ "é\u0000.py": "x = 1\n", "langgraph.json": '{"graphs": {"a": "./a.py:g"}}' });
    expect(found).toMatchObject({ ok: false, message: "it holds a file whose name is not valid text: it holds a NUL (\\u0000) character" });
    expect(strings(found).every(isStorable)).toBe(true);
  });

  it("fails a tarball with an entry name longer than a file system takes (a header may carry megabytes)", async () => {
    for (const name of [`d/${"n".repeat(MAX_NAME_BYTES)}`, `${"é".repeat(MAX_NAME_BYTES / 2)}/`]) {
      const found = await inspect({ "langgraph.json": '{"graphs": {"a": "./a.py:g"}}', [name]: "" });
      expect(found).toEqual({ ok: false, message: `it holds an entry whose name is longer than ${MAX_NAME_BYTES} bytes` });
    }
  });

  it("fails a tarball with more entries than MAX_ENTRIES, whatever their kind", async () => {
    // One directory's header block, over and over: a tarball of nothing but entries, a few hundred KB gzipped.
    const archive = pack();
    const packed = buffer(archive);
    archive.entry({ name: "d/", type: "directory" });
    archive.finalize();
    const header = (await packed).subarray(0, 512);
    const tarball = gzipSync(Buffer.concat(Array.from({ length: MAX_ENTRIES + 1 }, () => header)));
    const found = await inspectTarball((async function* () { yield tarball; })(), "langgraph.json", never);
    expect(found).toEqual({ ok: false, message: `it holds more than ${MAX_ENTRIES} entries` });
  });

  it("lists the first files up to LISTED_NAME_BYTES of names, counting them all", async () => {
    const files: Record<string, string> = { "langgraph.json": '{"graphs": {"a": "./a.py:g"}}' };
    const long = (i: number) => `${String(i).padStart(3, "0")}/${"n".repeat(MAX_NAME_BYTES - 4)}`;
    for (let i = 0; i < 30; i++) files[long(i)] = "";
    files["short.py"] = "";
    const found = await inspect(files);
    expect(found.ok).toBe(true);
    if (!found.ok) return;
    expect(found.report.file_count).toBe(32);
    const listed = Math.floor((LISTED_NAME_BYTES - "langgraph.json".length) / MAX_NAME_BYTES);
    expect(found.report.files).toEqual(["langgraph.json", ...Array.from({ length: listed }, (_, i) => long(i))]);
  });

  it("readGraphs keeps storable names as they are", () => {
    expect(readGraphs(Buffer.from('{"graphs": {"ägent 🤖": "./a.py:g"}}'))).toEqual({ "ägent 🤖": "./a.py:g" });
  });
});

describe("inspectTarball, where unpacking would not give the tarball's listing", () => {
  const CONFIG = '{"graphs": {"agent": "./agent.py:graph"}}';
  /** A gzip tarball of these entries, in this order (names repeated, links and all). */
  async function tarballOf(entries: { name: string; content?: string; type?: "file" | "link" | "symlink"; linkname?: string }[]): Promise<Buffer> {
    const archive = pack();
    for (const { name, content = "", type = "file", linkname } of entries) {
      if (type === "file") archive.entry({ name }, content);
      else archive.entry({ name, type, linkname });
    }
    archive.finalize();
    return gzipSync(await buffer(archive));
  }
  const inspect = (tarball: Buffer) => inspectTarball((async function* () { yield tarball; })(), "langgraph.json", never);

  it("refuses an entry outside the tarball's folder (..), which tar will not unpack", async () => {
    for (const name of ["../langgraph.json", "src/../../agent.py", "a/.."]) {
      const found = await inspect(await tarballOf([{ name: "langgraph.json", content: CONFIG }, { name }]));
      expect(found, name).toMatchObject({ ok: false, message: `it holds an entry outside its own folder, which tar does not unpack: ${name}` });
    }
  });

  it("reads the configuration as unpacking leaves it: the last of several entries of that name", async () => {
    const found = await inspect(await tarballOf([{ name: "langgraph.json", content: "{not json" }, { name: "./langgraph.json", content: CONFIG }]));
    expect(found).toMatchObject({ ok: true, report: { graphs: { agent: "./agent.py:graph" } } });
    const broken = await inspect(await tarballOf([{ name: "langgraph.json", content: CONFIG }, { name: "langgraph.json", content: "{not json" }]));
    expect(broken).toMatchObject({ ok: false, message: expect.stringMatching(/^langgraph\.json does not parse as JSON/) });
  });

  it("says so when the configuration is a link, rather than that it is missing", async () => {
    for (const type of ["link", "symlink"] as const) {
      const found = await inspect(await tarballOf([{ name: "real.json", content: CONFIG }, { name: "langgraph.json", type, linkname: "real.json" }]));
      expect(found, type).toMatchObject({ ok: false, message: `langgraph.json is a ${type === "link" ? "hard" : "symbolic"} link in it (to real.json): the build reads a file there` });
    }
  });
});
