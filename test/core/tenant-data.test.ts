import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TENANT_MODELS, tenantData } from "../../src/core/tenant-data.js";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { startTestApp, type TestApp } from "../support/app.js";

let t: TestApp;
let a: NewWorkspace;
let b: NewWorkspace;

beforeAll(async () => {
  t = await startTestApp({ PIPELINE_WORKER: "off", RATE_LIMIT_PER_MINUTE: "0" });
  [a, b] = [await t.workspace(), await t.workspace()];
});
afterAll(() => t.close());

const listener = (workspace: NewWorkspace, computeId: string) => ({ workspaceId: workspace.workspaceId, computeType: "k8s", computeId, computeConfig: { k8s_namespaces: null } });

describe("the tenant door", () => {
  it("lists every model of schema.prisma that has a workspace_id, ApiKey (an organisation's, workspace optional) aside", () => {
    const schema = readFileSync(new URL("../../prisma/schema.prisma", import.meta.url), "utf8");
    const owned = [...schema.matchAll(/^model (\w+) \{([^}]*)\}/gm)]
      .filter(([, , body]) => /^\s+workspaceId\s/m.test(body!))
      .map(([, name]) => name!)
      .filter((name) => name !== "ApiKey");
    expect([...TENANT_MODELS].sort()).toEqual(owned.sort());
  });

  it("checks new rows are the tenant's and finds, counts, changes and deletes only the tenant's rows", async () => {
    const doorA = tenantData(t.app.db.prisma, a);
    const doorB = tenantData(t.app.db.prisma, b);
    const mine = await doorA.listener.create({ data: listener(a, "door-a") });
    expect(mine.workspaceId).toBe(a.workspaceId);
    const theirs = await doorB.listener.create({ data: listener(b, "door-b") });

    expect(await doorA.listener.findUnique({ where: { id: theirs.id } })).toBeNull();
    expect((await doorA.listener.findMany({})).map((l) => l.id)).toEqual([mine.id]);
    expect(await doorA.listener.count()).toBe(1);
    expect((await doorA.listener.updateMany({ where: { id: theirs.id }, data: { version: "x" } })).count).toBe(0);
    expect((await doorA.listener.deleteMany({ where: { id: theirs.id } })).count).toBe(0);
    await expect(doorA.listener.delete({ where: { id: theirs.id } })).rejects.toThrow();
    expect(await t.app.db.prisma.listener.findUnique({ where: { id: theirs.id } })).not.toBeNull();
    // Inside a transaction opened through the door too.
    const seen = await doorA.$transaction((tx) => tx.listener.findMany({ select: { id: true } }));
    expect(seen).toEqual([{ id: mine.id }]);
  });

  it("refuses a row that names another workspace rather than moving it", async () => {
    const doorA = tenantData(t.app.db.prisma, a);
    await expect(doorA.listener.create({ data: listener(b, "door-c") })).rejects.toThrow(/another|workspace/);
    expect(await t.app.db.prisma.listener.count({ where: { computeId: "door-c" } })).toBe(0);
  });
});
