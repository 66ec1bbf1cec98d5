import { expect } from "vitest";
import type { TestResponse } from "./app.js";

/**
 * The documented answers (SPEC.md's Errors, COMPAT.md's status codes, DESIGN.md's GraphQL payloads),
 * checked strictly enough that an answer of another shape, or any 5xx, fails the test that got it.
 */

/** Statuses a REST call may answer with; anything else (5xx above all) is a bug. */
const REST_STATUSES = new Set([200, 201, 204, 207, 400, 401, 403, 404, 405, 409, 413, 415, 422]);
const ISSUE_KEYS = new Set(["loc", "msg", "type", "input", "ctx"]);
const LOCATIONS = new Set(["body", "query", "path", "header"]);

const describeRes = (res: TestResponse) => `${res.status} ${res.text.slice(0, 500)}`;

/** A REST answer: a documented status, and for errors exactly `{detail: [issues]}` (422) or `{detail: string}`. */
export function expectRestAnswer(res: TestResponse): void {
  const where = describeRes(res);
  expect(res.status, where).toBeLessThan(500);
  expect(REST_STATUSES.has(res.status), `undocumented status: ${where}`).toBe(true);
  if (res.status === 204) {
    expect(res.text, where).toBe("");
    return;
  }
  expect(res.headers.get("content-type") ?? "", where).toMatch(/^application\/json/);
  expect(typeof res.body === "object" && res.body !== null, `not a JSON object or array: ${where}`).toBe(true);
  if (res.status < 400) return;
  expect(Object.keys(res.body), where).toEqual(["detail"]);
  // A hostile id can make another path of the API ("#" ends the path, "/" adds a segment): asked
  // with a method that path does not take, it is 405 with Allow (README's REST reference).
  if (res.status === 405) expect(res.headers.get("allow"), where).toMatch(/^[A-Z]+(, [A-Z]+)*$/);
  if (res.status === 422) {
    const detail = res.body.detail as unknown[];
    expect(Array.isArray(detail) && detail.length > 0, `422 detail must be a non-empty list: ${where}`).toBe(true);
    for (const issue of detail) expectIssue(issue, where);
  } else {
    expect(typeof res.body.detail, where).toBe("string");
    expect(res.body.detail.length, where).toBeGreaterThan(0);
  }
}

function expectIssue(issue: unknown, where: string) {
  expect(typeof issue === "object" && issue !== null && !Array.isArray(issue), where).toBe(true);
  const i = issue as Record<string, unknown>;
  for (const key of Object.keys(i)) expect(ISSUE_KEYS.has(key), `unexpected issue key ${key}: ${where}`).toBe(true);
  expect(Array.isArray(i.loc) && i.loc.length > 0, where).toBe(true);
  const loc = i.loc as unknown[];
  expect(LOCATIONS.has(loc[0] as string), `loc must start with body, query, path or header: ${where}`).toBe(true);
  for (const part of loc) expect(typeof part === "string" || Number.isInteger(part), where).toBe(true);
  expect(typeof i.msg === "string" && i.msg.length > 0, where).toBe(true);
  expect(typeof i.type === "string" && i.type.length > 0, where).toBe(true);
  if ("ctx" in i) expect(typeof i.ctx === "object" && i.ctx !== null && !Array.isArray(i.ctx), where).toBe(true);
}

/** Codes a GraphQL error may carry: every refusal says what kind it is; none is an unexpected error. */
const GRAPHQL_CODES = new Set([
  "BAD_USER_INPUT",
  "BAD_REQUEST",
  "GRAPHQL_PARSE_FAILED",
  "GRAPHQL_VALIDATION_FAILED",
  "QUERY_TOO_COMPLEX",
  "UNAUTHENTICATED",
  "FORBIDDEN",
  "NOT_FOUND",
  "CONFLICT",
]);
const USER_ERROR_CODES = new Set(["INVALID", "NOT_FOUND", "CONFLICT", "NOT_ALLOWED"]);

/**
 * A GraphQL answer: no 5xx; errors (if any) each with a message and a known extensions.code; each
 * named mutation payload present has a userErrors list of the documented shape, and its objects are
 * null when it has userErrors. An event stream (SSE) is checked result by result. Returns whether
 * the operation was refused (errors or userErrors).
 */
export function expectGraphQLAnswer(res: TestResponse, payloadFields: string[] = []): boolean {
  const where = describeRes(res);
  expect(res.status, where).toBeLessThan(500);
  // GraphQL over HTTP: an Accept it cannot satisfy (406) or a body type it does not read (415).
  if (res.status === 406 || res.status === 415) return true;
  const type = res.headers.get("content-type") ?? "";
  const streamed = () => [...res.text.matchAll(/^event: next\ndata: (.*)$/gm)].map((m) => JSON.parse(m[1]!) as unknown);
  // The body limit, ahead of every route (REST and /graphql alike), answers /graphql as GraphQL.
  if (res.status === 413) {
    const tooLarge = { errors: [{ message: expect.any(String), extensions: { code: "REQUEST_ENTITY_TOO_LARGE" } }] };
    expect(type.startsWith("text/event-stream") ? streamed() : [res.body], where).toEqual([tooLarge]);
    return true;
  }
  expect([200, 400, 401, 403].includes(res.status), `unexpected status: ${where}`).toBe(true);
  if (type.startsWith("text/event-stream")) {
    const results = streamed();
    expect(results.length, where).toBeGreaterThan(0);
    return results.map((r) => expectResult(r, res.status, payloadFields, where)).some(Boolean);
  }
  expect(type, where).toMatch(/^application\/(graphql-response\+)?json/);
  return expectResult(res.body, res.status, payloadFields, where);
}

function expectResult(body: unknown, status: number, payloadFields: string[], where: string): boolean {
  expect(typeof body === "object" && body !== null && !Array.isArray(body), where).toBe(true);
  const result = body as Record<string, unknown>;
  for (const key of Object.keys(result)) expect(["data", "errors", "extensions"], where).toContain(key);
  let refused = false;
  if ("errors" in result) {
    refused = true;
    const errors = result.errors as unknown[];
    expect(Array.isArray(errors) && errors.length > 0, where).toBe(true);
    for (const e of errors as Record<string, any>[]) {
      expect(typeof e.message === "string" && e.message.length > 0, where).toBe(true);
      expect(e.extensions?.unexpected, `unexpected error: ${where}`).toBeUndefined();
      expect(GRAPHQL_CODES.has(e.extensions?.code), `error code ${String(e.extensions?.code)}: ${where}`).toBe(true);
    }
  } else {
    expect(status, where).toBe(200);
  }
  const data = result.data as Record<string, any> | null | undefined;
  for (const field of payloadFields) {
    const payload = data?.[field];
    if (payload === undefined || payload === null) {
      expect(refused, `no payload and no errors: ${where}`).toBe(true);
      continue;
    }
    expect(Array.isArray(payload.userErrors), where).toBe(true);
    for (const u of payload.userErrors as Record<string, unknown>[]) {
      expect(Object.keys(u).sort(), where).toEqual(["code", "field", "message"]);
      expect(u.field === null || (Array.isArray(u.field) && u.field.every((f) => typeof f === "string")), where).toBe(true);
      expect(typeof u.message === "string" && u.message.length > 0, where).toBe(true);
      expect(USER_ERROR_CODES.has(u.code as string), where).toBe(true);
    }
    if (payload.userErrors.length > 0) {
      refused = true;
      for (const [key, value] of Object.entries(payload)) if (key !== "userErrors") expect(value, `${key} with userErrors: ${where}`).toBeNull();
    }
  }
  return refused;
}
