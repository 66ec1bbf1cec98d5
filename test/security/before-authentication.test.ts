import { randomBytes } from "node:crypto";
import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import WebSocket from "ws";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { parseCacheOf } from "../../src/graphql/parse-cache.js";
import { type TestApp, startTestApp } from "../support/app.js";

/**
 * What a caller without credentials can make the service hold in memory: no WebSocket message
 * larger than MAX_BODY_BYTES (refused from its frame header, never buffered), and no GraphQL
 * document (refused 401 before it is parsed); and what an authenticated one can make it keep: the
 * parse cache is bounded by its estimated size in bytes, not only by its number of entries.
 */

const MAX_BODY_BYTES = 64 * 1024;
let t: TestApp;
let ws: NewWorkspace;
let url: string;

beforeAll(async () => {
  t = await startTestApp({ MAX_BODY_BYTES: String(MAX_BODY_BYTES), RATE_LIMIT_PER_MINUTE: "0", AUTH_FAILURES_PER_MINUTE: "0", PIPELINE_WORKER: "off" });
  url = await t.app.start();
  ws = await t.workspace();
});
afterAll(() => t.close());

/** A WebSocket upgrade on a raw socket, so that the test writes frames byte by byte. */
async function upgraded(): Promise<{ socket: Socket; received: () => Buffer; closed: Promise<void> }> {
  const { port } = new URL(url);
  const socket = connect(Number(port), "127.0.0.1");
  let data = Buffer.alloc(0);
  socket.on("data", (chunk) => (data = Buffer.concat([data, chunk])));
  const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
  socket.on("error", () => {});
  await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
  socket.write(
    [
      "GET /graphql HTTP/1.1",
      `Host: 127.0.0.1:${port}`,
      "Upgrade: websocket",
      "Connection: Upgrade",
      `Sec-WebSocket-Key: ${randomBytes(16).toString("base64")}`,
      "Sec-WebSocket-Version: 13",
      "Sec-WebSocket-Protocol: graphql-transport-ws",
      "",
      "",
    ].join("\r\n"),
  );
  const deadline = Date.now() + 10_000;
  while (!data.includes("\r\n\r\n")) {
    if (Date.now() > deadline) throw new Error(`no upgrade: ${data.toString()}`);
    await new Promise((r) => setTimeout(r, 10));
  }
  expect(data.toString()).toMatch(/^HTTP\/1.1 101/);
  const headerEnd = data.indexOf("\r\n\r\n") + 4;
  return { socket, received: () => data.subarray(headerEnd), closed };
}

/** A masked client text frame header announcing `length` bytes (64-bit length form). */
function frameHeader(length: number): Buffer {
  const header = Buffer.alloc(14);
  header[0] = 0x81; // FIN, text
  header[1] = 0x80 | 127; // masked, 64-bit length follows
  header.writeBigUInt64BE(BigInt(length), 2);
  randomBytes(4).copy(header, 10);
  return header;
}

describe("WebSocket messages are capped at MAX_BODY_BYTES", () => {
  it("a 60 MB connection_init is refused from its frame header (1009), without waiting for it", async () => {
    const { socket, received, closed } = await upgraded();
    socket.write(frameHeader(60 * 1024 * 1024));
    socket.write(Buffer.from('{"type":"connection_init","payload":{"x":"'));
    // The server closes the connection at once: it will not buffer 60 MB to parse them.
    await Promise.race([closed, new Promise((_, reject) => setTimeout(() => reject(new Error("the server waited for the payload")), 10_000))]);
    const close = received();
    expect(close[0]).toBe(0x88); // FIN, close
    expect(close.readUInt16BE(2)).toBe(1009); // message too big
  });

  it("a message just over the limit is refused, one under it is read (and answered: no credentials, 4401)", async () => {
    const closeCode = (payload: string) =>
      new Promise<number>((resolve, reject) => {
        const socket = new WebSocket(`${url.replace(/^http/, "ws")}/graphql`, "graphql-transport-ws");
        socket.on("open", () => socket.send(payload));
        socket.on("close", (code) => resolve(code));
        socket.on("error", () => {});
        setTimeout(() => reject(new Error("no close")), 10_000);
      });
    const init = (size: number) => JSON.stringify({ type: "connection_init", payload: { pad: "x".repeat(size) } });
    expect(await closeCode(init(MAX_BODY_BYTES + 10))).toBe(1009);
    expect(await closeCode(init(MAX_BODY_BYTES - 100))).toBe(4401);
  });
});

describe("POST /graphql authenticates before it parses", () => {
  /** A unique document of about `bytes` bytes: many distinct fields, as a flood of cache-busting queries would be. */
  const document = (n: number, bytes = 16 * 1024) => {
    let body = `query Q${n} { viewer { id } `;
    for (let i = 0; body.length < bytes; i++) body += `f${n}x${i}: viewer { id } `;
    return `${body} }`;
  };

  it("without credentials: 401 UNAUTHENTICATED for every large unique document, none of them parsed or cached", async () => {
    const cache = parseCacheOf(t.app.graphql);
    const before = { documents: cache.documents.size, errors: cache.errors.size };
    for (let n = 0; n < 150; n++) {
      const res = await t.request("POST", "/graphql", { body: { query: document(n) }, headers: { accept: "application/graphql-response+json" } });
      expect(res.status).toBe(401);
      expect(res.body.errors).toEqual([expect.objectContaining({ extensions: expect.objectContaining({ code: "UNAUTHENTICATED" }) })]);
      // A bad key alike, and a GET.
      if (n % 10 === 0) {
        const bad = await t.request("POST", "/graphql", { key: `dcp_nope-${n}`, body: { query: document(n) } });
        expect(bad.status).toBe(401);
        const get = await t.request("GET", `/graphql?query=${encodeURIComponent(document(n, 2048))}`, { headers: { accept: "application/json", "x-graphql-yoga-csrf": "1" } });
        expect(get.status).toBe(401);
      }
    }
    expect({ documents: cache.documents.size, errors: cache.errors.size }).toEqual(before);
  });

  it("with credentials: the parse cache keeps within its byte budget, however many large documents come", async () => {
    const cache = parseCacheOf(t.app.graphql);
    const { maxSize } = cache.documents;
    let cached = 0;
    // Each counts for some 1.5 MB: about 40 fill the budget.
    for (let n = 0; n < 100; n++) {
      const res = await t.request("POST", "/graphql", { key: ws.apiKey, body: { query: document(1000 + n, 12 * 1024) } });
      expect(res.status).toBeLessThan(500);
      expect(cache.documents.calculatedSize).toBeLessThanOrEqual(maxSize);
      cached = Math.max(cached, cache.documents.size);
    }
    // It did cache, and evicted by size long before its count limit.
    expect(cached).toBeGreaterThan(0);
    expect(cache.documents.size).toBeLessThan(cache.documents.max);
    expect(cache.documents.size).toBeLessThan(100);
    // A small document is cached and served from the cache.
    const small = `{ viewer { id } }`;
    expect((await t.request("POST", "/graphql", { key: ws.apiKey, body: { query: small } })).status).toBe(200);
    expect(cache.documents.has(small)).toBe(true);
  });

  it("parse errors are cached within a byte budget too", async () => {
    const cache = parseCacheOf(t.app.graphql);
    // Each counts for some 120 KB (its text): about 70 fill the budget.
    for (let n = 0; n < 100; n++) {
      const res = await t.request("POST", "/graphql", { key: ws.apiKey, body: { query: `${document(5000 + n, 60 * 1024)} {` } });
      expect(res.body.errors[0].extensions.code).toBe("GRAPHQL_PARSE_FAILED");
      expect(cache.errors.calculatedSize).toBeLessThanOrEqual(cache.errors.maxSize);
    }
    expect(cache.errors.size).toBeGreaterThan(0);
    expect(cache.errors.size).toBeLessThan(100);
  });
});
