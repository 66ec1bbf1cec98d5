import { describe, expect, it } from "vitest";
import { readyUrl } from "../../scripts/lib/processes.js";

/**
 * Tests start servers on a port the kernel gives them (PORT=0) and learn it from the "ready" line
 * (test/support/server-process.ts): a port picked free beforehand could be taken by another test's
 * server before this one listened.
 */
describe("readyUrl", () => {
  it("reads the URL of the service's ready line", () => {
    const line = JSON.stringify({ level: 30, time: 1, pid: 7, url: "http://127.0.0.1:43117", database: "pglite", msg: "ready" });
    expect(readyUrl(line)).toBe("http://127.0.0.1:43117");
  });

  it("finds nothing in other lines, lines that only mention it, and lines that are not JSON", () => {
    expect(readyUrl(JSON.stringify({ level: 30, url: "http://127.0.0.1:1", msg: "listening on http://127.0.0.1:1" }))).toBeNull();
    expect(readyUrl(JSON.stringify({ level: 30, msg: "ready" }))).toBeNull();
    expect(readyUrl(JSON.stringify({ level: 30, path: '"msg":"ready"', msg: "request" }))).toBeNull();
    expect(readyUrl('{"msg":"ready", "url": "http://127.0.0.1:1"')).toBeNull();
    expect(readyUrl("failed to start: PORT 8080 is in use")).toBeNull();
  });
});
