import { connect, type Socket } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type TestApp, startTestApp } from "../support/app.js";

let t: TestApp;
let port: number;

beforeAll(async () => {
  t = await startTestApp({ REQUEST_TIMEOUT_MS: "400" });
  port = Number(new URL(await t.app.start()).port);
});
afterAll(async () => {
  await t.close();
});

interface Trickle {
  /** Everything the server sent. */
  received: string;
  /** When the server closed the connection, in ms after it opened; null if it never did. */
  closedAfter: number | null;
  /** How many chunks were written before the server cut the client off. */
  written: number;
}

/**
 * Opens a raw socket and writes `chunks` one every `everyMs`, as a slowloris client does, until the
 * server closes the connection or the chunks run out.
 */
async function trickle(chunks: string[], everyMs: number): Promise<Trickle> {
  const started = Date.now();
  const socket: Socket = connect(port, "127.0.0.1");
  const result: Trickle = { received: "", closedAfter: null, written: 0 };
  socket.setEncoding("utf8");
  socket.on("data", (d: string) => (result.received += d));
  socket.on("error", () => {}); // a write after the server's close: expected
  const closed = new Promise<void>((resolve) => socket.on("close", () => resolve()));
  socket.on("close", () => (result.closedAfter = Date.now() - started));
  await new Promise<void>((resolve) => socket.once("connect", () => resolve()));
  for (const chunk of chunks) {
    if (result.closedAfter !== null) break;
    socket.write(chunk);
    result.written++;
    await sleep(everyMs);
  }
  await Promise.race([closed, sleep(1000)]);
  socket.destroy();
  return result;
}

describe("slow clients", () => {
  it("cuts off a client that sends its headers too slowly, with 408", async () => {
    const headers = ["GET /healthz HTTP/1.1\r\n", "Host: test\r\n", ...Array.from({ length: 80 }, (_, i) => `X-Slow-${i}: 1\r\n`), "\r\n"];
    const slow = await trickle(headers, 100);
    expect(slow.closedAfter).not.toBeNull();
    // Cut off at about the timeout (0.4 s; generous for loaded machines), long before the 8 s the headers would take.
    expect(slow.closedAfter!).toBeLessThan(4000);
    expect(slow.written).toBeLessThan(headers.length);
    expect(slow.received).toMatch(/^HTTP\/1\.1 408 /);
  });

  it("cuts off a client that sends its body too slowly", async () => {
    const ws = await t.workspace();
    const body = "x".repeat(80);
    const chunks = [
      `POST /v2/listeners HTTP/1.1\r\nHost: test\r\nX-Api-Key: ${ws.apiKey}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n`,
      ...body.split(""),
    ];
    const slow = await trickle(chunks, 100);
    expect(slow.closedAfter).not.toBeNull();
    expect(slow.closedAfter!).toBeLessThan(4000);
    expect(slow.written).toBeLessThan(chunks.length);
    expect(slow.received).toMatch(/^HTTP\/1\.1 408 /);
    const list = await t.request("GET", "/v2/listeners", { key: ws.apiKey });
    expect(list.body.resources).toEqual([]);
  });

  it("serves a client that sends at a normal pace", async () => {
    const fast = await trickle(["GET /healthz HTTP/1.1\r\nHost: test\r\n", "Connection: close\r\n\r\n"], 50);
    expect(fast.received).toMatch(/^HTTP\/1\.1 200 /);
    expect(fast.received).toContain('{"status":"ok"}');
  });
});
