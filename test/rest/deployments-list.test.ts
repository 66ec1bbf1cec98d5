import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";
import { ANY_UUID, listenerBody } from "../support/fixtures.js";

let t: TestApp;
let ws: NewWorkspace;
const ids: Record<string, string> = {};

const names = (res: { body: { resources: { name: string }[] } }) => res.body.resources.map((d) => d.name);
const list = (query: string, key = ws.apiKey) => t.request("GET", `/v2/deployments?${query}`, { key });

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off" });
  ws = await t.workspace();
  const listener = await t.request("POST", "/v2/listeners", {
    key: ws.apiKey,
    body: listenerBody({ compute_id: "cluster" }),
  });
  const bodies = [
    { name: "alpha", source: "internal_container", source_config: { deployment_type: "prod" } },
    { name: "Beta_one", source: "internal_container", source_config: { custom_url: "https://beta.example.com" } },
    { name: "beta-two", source: "internal_container", agent: { agent_id: "helper", environment: "production" } },
    { source: "internal_container", agent: { agent_id: "helper", environment: "staging" } },
    { source: "internal_container", agent: { agent_id: "other", environment: "production" } },
    {
      name: "self-hosted",
      source: "external_container",
      source_config: { listener_id: listener.body.id, deployment_type: "dev_zero" },
      source_revision_config: { image_uri: "r/i:1" },
    },
    { name: "50%_off", source: "internal_container" },
  ];
  for (const body of bodies) {
    const res = await t.request("POST", "/v2/deployments", { key: ws.apiKey, body });
    expect(res.status).toBe(201);
    ids[res.body.name] = res.body.id;
  }
});
afterAll(() => t.close());

const ALL = ["50%_off", "self-hosted", "other-production", "helper-staging", "beta-two", "Beta_one", "alpha"];

describe("GET /v2/deployments filters", () => {
  it("lists newest first with offset = request offset + items returned", async () => {
    const res = await list("");
    expect(res.status).toBe(200);
    expect(names(res)).toEqual(ALL);
    expect(res.body.offset).toBe(ALL.length);
  });

  it("name is an exact match; name_contains a case-insensitive substring with wildcards taken literally", async () => {
    expect(names(await list("name=beta-two"))).toEqual(["beta-two"]);
    expect(names(await list("name=beta"))).toEqual([]);
    expect(names(await list("name_contains=BETA&limit=100"))).toEqual(["beta-two", "Beta_one"]);
    expect(names(await list("name_contains=_"))).toEqual(["50%_off", "Beta_one"]);
    expect(names(await list("name_contains=%25"))).toEqual(["50%_off"]);
    expect(names(await list("name_contains=beta&name=Beta_one"))).toEqual(["Beta_one"]);
  });

  it("status", async () => {
    await t.app.db.prisma.deployment.update({ where: { id: ids.alpha! }, data: { status: "READY" } });
    expect(names(await list("status=READY"))).toEqual(["alpha"]);
    expect(names(await list("status=AWAITING_DATABASE"))).toEqual(ALL.filter((n) => n !== "alpha"));
    await t.app.db.prisma.deployment.update({ where: { id: ids.alpha! }, data: { status: "AWAITING_DATABASE" } });
  });

  it("remote_reconciled: self-hosted deployments are reconciled by their listener", async () => {
    expect(names(await list("remote_reconciled=true"))).toEqual(["self-hosted"]);
    expect(names(await list("remote_reconciled=false"))).toEqual(ALL.filter((n) => n !== "self-hosted"));
    expect(names(await list("remote_reconciled=1"))).toEqual(["self-hosted"]);
  });

  it("tag_value_ids: deployments carrying every given tag value", async () => {
    const [red, blue] = [randomUUID(), randomUUID()];
    await t.app.db.prisma.deployment.update({ where: { id: ids.alpha! }, data: { tagValueIds: [red, blue] } });
    await t.app.db.prisma.deployment.update({ where: { id: ids["beta-two"]! }, data: { tagValueIds: [red] } });
    expect(names(await list(`tag_value_ids=${red}`))).toEqual(["beta-two", "alpha"]);
    expect(names(await list(`tag_value_ids=${red},${blue}`))).toEqual(["alpha"]);
    expect(names(await list(`tag_value_ids=${randomUUID()}`))).toEqual([]);
  });

  it("image_version", async () => {
    await t.app.db.prisma.deployment.update({ where: { id: ids["Beta_one"]! }, data: { imageVersion: "9.9.9" } });
    expect(names(await list("image_version=9.9.9"))).toEqual(["Beta_one"]);
    const current = (await list("name=alpha")).body.resources[0].image_version;
    expect(names(await list(`image_version=${current}`))).toEqual(ALL.filter((n) => n !== "Beta_one"));
  });

  it("deployment_type", async () => {
    expect(names(await list("deployment_type=prod"))).toEqual(["alpha"]);
    expect(names(await list("deployment_type=dev_zero"))).toEqual(["self-hosted"]);
    expect(names(await list("deployment_type=dev_free"))).toEqual([]);
  });

  it("deployment_ids, comma separated or repeated", async () => {
    expect(names(await list(`deployment_ids=${ids.alpha},${ids["beta-two"]}`))).toEqual(["beta-two", "alpha"]);
    expect(names(await list(`deployment_ids=${ids.alpha}&deployment_ids=${ids["self-hosted"]}`))).toEqual(["self-hosted", "alpha"]);
    expect(names(await list(`deployment_ids=${randomUUID()}`))).toEqual([]);
    expect(names(await list(`deployment_ids=${ANY_UUID}`))).toEqual([]);
  });

  it("url", async () => {
    expect(names(await list("url=https%3A%2F%2Fbeta.example.com"))).toEqual(["Beta_one"]);
    const alpha = (await list("name=alpha")).body.resources[0];
    expect(names(await list(`url=${encodeURIComponent(alpha.url)}`))).toEqual(["alpha"]);
  });

  it("agent_id and agent_environment match only deployments made for an agent", async () => {
    expect(names(await list("agent_id=helper"))).toEqual(["helper-staging", "beta-two"]);
    expect(names(await list("agent_environment=production"))).toEqual(["other-production", "beta-two"]);
    expect(names(await list("agent_id=helper&agent_environment=staging"))).toEqual(["helper-staging"]);
    expect(names(await list("agent_id=nobody"))).toEqual([]);
  });

  it("refuses bad query values with 422, each at its query loc", async () => {
    const cases: [string, (string | number)[], string | undefined][] = [
      ["limit=0", ["query", "limit"], "greater_than_equal"],
      ["limit=101", ["query", "limit"], "less_than_equal"],
      ["limit=abc", ["query", "limit"], undefined],
      ["offset=-1", ["query", "offset"], "greater_than_equal"],
      ["deployment_type=huge", ["query", "deployment_type"], "enum"],
      ["agent_environment=qa", ["query", "agent_environment"], "enum"],
      ["agent_id=Bad_Agent", ["query", "agent_id"], "string_pattern_mismatch"],
      [`agent_id=${"a".repeat(64)}`, ["query", "agent_id"], "string_too_long"],
      ["remote_reconciled=maybe", ["query", "remote_reconciled"], "bool_parsing"],
      [`deployment_ids=${randomUUID()},abc`, ["query", "deployment_ids", 1], "uuid_parsing"],
      ["tag_value_ids=nope", ["query", "tag_value_ids", 0], "uuid_parsing"],
    ];
    for (const [query, loc, type] of cases) {
      const res = await list(query);
      expect(res.status, query).toBe(422);
      expect(res.body.detail, query).toEqual([expect.objectContaining({ loc, ...(type && { type }) })]);
    }
    // Far beyond its bound, a limit is still told its own bound (100), not the safe-integer range's;
    // an offset beyond that range is refused with the bound the reference documents for it.
    for (const [query, le] of [["limit=9007199254740993", 100], ["limit=99999999999999999999999", 100], ["offset=99999999999999999999", Number.MAX_SAFE_INTEGER]] as const) {
      const res = await list(query);
      expect(res.status, query).toBe(422);
      expect(res.body.detail, query).toEqual([expect.objectContaining({ type: "less_than_equal", msg: `Input should be less than or equal to ${le}`, ctx: { le } })]);
    }
    const many = Array.from({ length: 101 }, () => randomUUID()).join(",");
    const tooMany = await list(`deployment_ids=${many}`);
    expect(tooMany.status).toBe(422);
    expect(tooMany.body.detail[0]).toMatchObject({ loc: ["query", "deployment_ids"], type: "too_long" });
  });
});

describe("GET /v2/deployments paging", () => {
  it("defaults to 20, pages with limit and offset, and is empty past the end", async () => {
    const mine = await t.workspace();
    for (let n = 1; n <= 23; n++) {
      const res = await t.request("POST", "/v2/deployments", { key: mine.apiKey, body: { name: `d${n}`, source: "internal_container" } });
      expect(res.status).toBe(201);
    }
    const first = await list("", mine.apiKey);
    expect(first.body.resources).toHaveLength(20);
    expect(first.body.offset).toBe(20);
    expect(names(first)[0]).toBe("d23");
    const rest = await list("offset=20", mine.apiKey);
    expect(names(rest)).toEqual(["d3", "d2", "d1"]);
    expect(rest.body.offset).toBe(23);
    expect(await list("offset=23", mine.apiKey).then((r) => r.body)).toEqual({ resources: [], offset: 23 });
    expect(await list("offset=50&limit=1", mine.apiKey).then((r) => r.body)).toEqual({ resources: [], offset: 50 });
    expect(names(await list("limit=1&offset=22", mine.apiKey))).toEqual(["d1"]);
    expect((await list("limit=100", mine.apiKey)).body.resources).toHaveLength(23);

    // Paging by offset visits every deployment exactly once, in order.
    const seen: string[] = [];
    for (let offset = 0; ; ) {
      const page = await list(`limit=4&offset=${offset}`, mine.apiKey);
      if (page.body.resources.length === 0) break;
      seen.push(...names(page));
      offset = page.body.offset;
    }
    expect(seen).toEqual(Array.from({ length: 23 }, (_, i) => `d${23 - i}`));
  });

  it("orders deployments created in the same millisecond by id, descending", async () => {
    const mine = await t.workspace();
    const created: string[] = [];
    for (const name of ["same-1", "same-2", "same-3"]) {
      created.push((await t.request("POST", "/v2/deployments", { key: mine.apiKey, body: { name, source: "internal_container" } })).body.id);
    }
    const at = new Date("2030-01-01T00:00:00.000Z");
    await t.app.db.prisma.deployment.updateMany({ where: { id: { in: created } }, data: { createdAt: at } });
    const res = await list("", mine.apiKey);
    expect(res.body.resources.map((d: { id: string }) => d.id)).toEqual([...created].sort().reverse());
    expect(res.body.resources.every((d: { created_at: string }) => d.created_at === at.toISOString())).toBe(true);
  });

  it("shows nothing of another workspace", async () => {
    const stranger = await t.workspace();
    expect(await list("limit=100", stranger.apiKey).then((r) => r.body)).toEqual({ resources: [], offset: 0 });
    expect(names(await list(`deployment_ids=${ids.alpha}`, stranger.apiKey))).toEqual([]);
    expect(names(await list("name=alpha", stranger.apiKey))).toEqual([]);
  });
});
