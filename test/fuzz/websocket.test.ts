import { randomBytes } from "node:crypto";
import { connect } from "node:net";
import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, it, vi } from "vitest";
import WebSocket from "ws";
import { type TestApp, startTestApp } from "../support/app.js";
import { type Fixtures, FUZZ_APP_ENV, makeFixtures } from "../support/fuzz-fixtures.js";
import { fuzzRuns, hostileJson } from "../support/fuzz.js";

/**
 * Hostile graphql-ws traffic: messages of every size around MAX_BODY_BYTES (and frames announcing
 * far more), text and binary, JSON and not, connection_init with any params, subscribe with any
 * payload, before and after the handshake. The server closes a socket only with a code of the
 * protocol (never an internal error), refuses an oversize message from its frame header, logs no
 * error, and keeps serving.
 */

const RUNS = fuzzRuns(150);
const MAX_BODY_BYTES = 8 * 1024;
/** Close codes a client may get for what it sent: ws's own (1009 too big, 1002/1007 protocol, 1006 dropped) and graphql-ws's 44xx. */
const CLIENT_CLOSE_CODES = new Set([1000, 1002, 1005, 1006, 1007, 1009, 4400, 4401, 4403, 4406, 4408, 4409, 4429]);

let t: TestApp;
let fx: Fixtures;
let url: string;

beforeAll(async () => {
  t = await startTestApp({ ...FUZZ_APP_ENV, MAX_BODY_BYTES: String(MAX_BODY_BYTES) }, undefined, {
    registerSecrets: false,
  });
  url = (await t.app.start()).replace(/^http/, "ws");
  fx = await makeFixtures(t, t.guard.secret());
});
afterAll(() => t.close());

type Frame = { kind: "text"; data: string } | { kind: "binary"; data: Buffer };

const init = (params: unknown) => JSON.stringify({ type: "connection_init", payload: params });
const subscribe = (payload: unknown) => JSON.stringify({ id: "1", type: "subscribe", payload });

/** What a client may send: the protocol's messages with hostile payloads, padded past the limit or not. */
function frames(fixtures: Fixtures): fc.Arbitrary<Frame[]> {
  const params = fc.oneof(
    fc.constant({ "X-Api-Key": fixtures.ws.apiKey }),
    fc.constant({ Authorization: "Bearer a.b.c" }),
    hostileJson(["X-Api-Key", "Authorization", "X-Tenant-Id"]),
  );
  const padded = (text: string, size: number) => text.replace(/}$/, `,"pad":"${"x".repeat(Math.max(0, size - text.length - 9))}"}`);
  const size = fc.oneof(fc.constant(0), fc.integer({ min: MAX_BODY_BYTES - 64, max: MAX_BODY_BYTES + 64 }), fc.integer({ min: MAX_BODY_BYTES, max: 4 * MAX_BODY_BYTES }));
  const message = fc.oneof(
    fc.tuple(params, size).map(([p, n]) => padded(init(p), n)),
    fc.tuple(hostileJson(["query", "variables", "operationName", "extensions"]), size).map(([p, n]) => padded(subscribe(p), n)),
    fc.constant(subscribe({ query: "{ viewer { id } }" })),
    fc.constant(subscribe({ query: `subscription { revisionStatusChanged(revisionId: "x") { status } }` })),
    hostileJson(["type", "id", "payload"]).map((v) => JSON.stringify(v) ?? "null"),
    fc.string({ maxLength: 100 }),
  );
  const frame: fc.Arbitrary<Frame> = fc.oneof(
    { weight: 5, arbitrary: message.map((data) => ({ kind: "text" as const, data })) },
    { weight: 1, arbitrary: fc.integer({ min: 1, max: 2 * MAX_BODY_BYTES }).map((n) => ({ kind: "binary" as const, data: randomBytes(n) })) },
  );
  return fc.array(frame, { minLength: 1, maxLength: 4 });
}

/** Sends the frames on a fresh socket; resolves with the close code, or "open" if the server kept it. */
function exchange(sent: Frame[]): Promise<number | "open"> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(`${url}/graphql`, "graphql-transport-ws");
    const timer = setTimeout(() => {
      socket.terminate();
      resolve("open");
    }, 1_500);
    socket.on("open", () => {
      for (const frame of sent) socket.send(frame.data, { binary: frame.kind === "binary" });
    });
    socket.on("close", (code) => {
      clearTimeout(timer);
      resolve(code);
    });
    socket.on("error", () => {});
    socket.on("unexpected-response", () => reject(new Error("the upgrade was refused")));
  });
}

/** A frame header announcing `length` bytes, with only a few of them sent: the server must not wait for the rest. */
function announce(length: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const { port } = new URL(url);
    const socket = connect(Number(port), "127.0.0.1");
    let data = Buffer.alloc(0);
    socket.on("data", (chunk) => (data = Buffer.concat([data, chunk])));
    socket.on("error", () => {});
    const timer = setTimeout(() => (socket.destroy(), reject(new Error(`the server waited for ${length} bytes`))), 10_000);
    socket.on("close", () => {
      clearTimeout(timer);
      const body = data.subarray(data.indexOf("\r\n\r\n") + 4);
      resolve(body[0] === 0x88 ? body.readUInt16BE(2) : -1);
    });
    socket.on("connect", () => {
      socket.write(
        `GET /graphql HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${randomBytes(16).toString("base64")}\r\n` +
          "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: graphql-transport-ws\r\n\r\n",
      );
      const header = Buffer.alloc(14);
      header[0] = 0x81;
      header[1] = 0x80 | 127;
      header.writeBigUInt64BE(BigInt(length), 2);
      socket.write(Buffer.concat([header, randomBytes(64)]));
    });
  });
}

describe("hostile graphql-ws traffic", () => {
  it("frames around and past MAX_BODY_BYTES, and messages of every shape: closed only with a client's code, never an error logged", async () => {
    const from = t.guard.logLines.length;
    await fc.assert(
      fc.asyncProperty(frames(fx), async (sent) => {
        const outcome = await exchange(sent);
        const text = sent.map((f) => (f.kind === "text" ? f.data.slice(0, 120) : `<${f.data.length} binary bytes>`)).join(" | ");
        if (outcome !== "open") expect(CLIENT_CLOSE_CODES.has(outcome), `closed ${outcome} after ${text}`).toBe(true);
        if (sent.some((f) => Buffer.byteLength(f.data) > MAX_BODY_BYTES)) expect(outcome, text).not.toBe("open");
      }),
      { numRuns: RUNS },
    );
    const errors = t.guard.logLines.slice(from).filter((line) => JSON.parse(line).level >= 50);
    expect(errors).toEqual([]);
  });

  it("messages only a server sends (connection_ack, next, error), before or after the handshake: 4400, nothing logged as a fault", async () => {
    const from = t.guard.logLines.length;
    const stderr = vi.spyOn(console, "error");
    try {
      const serverOnly = [
        JSON.stringify({ type: "connection_ack" }),
        JSON.stringify({ type: "next", id: "1", payload: {} }),
        JSON.stringify({ type: "error", id: "1", payload: [{ message: "x" }] }),
      ];
      for (const message of serverOnly) {
        expect(await exchange([{ kind: "text", data: message }]), message).toBe(4400);
        const afterInit = [init({ "X-Api-Key": fx.ws.apiKey }), message].map((data) => ({ kind: "text" as const, data }));
        expect(await exchange(afterInit), `${message} after connection_init`).toBe(4400);
      }
      expect(stderr).not.toHaveBeenCalled();
    } finally {
      stderr.mockRestore();
    }
    expect(t.guard.logLines.slice(from).filter((line) => JSON.parse(line).level >= 50)).toEqual([]);
  });

  it("frame headers announcing up to 8 EB: refused (1009) at once, without waiting for the payload", async () => {
    await fc.assert(
      fc.asyncProperty(fc.bigInt({ min: BigInt(MAX_BODY_BYTES + 1), max: 2n ** 63n - 1n }), async (length) => {
        expect([1009, 1002]).toContain(await announce(Number(length > 2n ** 53n ? 2n ** 53n : length)));
      }),
      { numRuns: 20 },
    );
  });

  it("still serves a good connection afterwards", async () => {
    const code = await new Promise<string>((resolve) => {
      const socket = new WebSocket(`${url}/graphql`, "graphql-transport-ws");
      socket.on("open", () => socket.send(init({ "X-Api-Key": fx.ws.apiKey })));
      socket.on("message", (data) => {
        const message = JSON.parse(String(data));
        if (message.type === "connection_ack") socket.send(subscribe({ query: "{ viewer { id } }" }));
        if (message.type === "next") {
          socket.close();
          resolve(message.payload.data.viewer.id ? "served" : "no data");
        }
      });
    });
    expect(code).toBe("served");
  });
});
