import { serverAudits } from "graphql-http";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";

let t: TestApp;
let ws: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off", RATE_LIMIT_PER_MINUTE: "0" });
  ws = await t.workspace();
});
afterAll(() => t.close());

/** app.fetch with the caller's key: the audits speak GraphQL over HTTP as an authenticated client. */
const fetchFn = (input: RequestInfo | URL, init?: RequestInit) => {
  const request = new Request(input, init);
  request.headers.set("x-api-key", ws.apiKey);
  return t.app.fetch(request);
};

describe("GraphQL over HTTP conformance (graphql-http server audits)", () => {
  for (const audit of serverAudits({ url: "http://test/graphql", fetchFn })) {
    it(audit.name, async () => {
      const result = await audit.fn();
      // MUST audits must pass; SHOULD and MAY audits are held to the same bar: all of them pass.
      expect(result.status, "reason" in result ? result.reason : undefined).toBe("ok");
    });
  }
});
