import { afterAll, beforeAll, describe, expect, inject, it, vi } from "vitest";
import { BatchReads } from "../../src/core/batch-reads.js";
import type { NewWorkspace } from "../../src/core/workspaces.js";
import { createTestDatabase, startTestApp, type TestApp } from "../support/app.js";
import { endOf, subscribeSse, subscribeWs, wsClient } from "./live.js";
import { createDeployment, gqlOk, restId } from "./support.js";
import { waitFor } from "../support/wait.js";

const FULL_RUN = ["CREATING", "QUEUED", "AWAITING_BUILD", "BUILDING", "AWAITING_DEPLOY", "DEPLOYING", "DEPLOYED"];

const REVISION_STATUS = /* GraphQL */ `
  subscription($id: ID!) { revisionStatusChanged(revisionId: $id) { status previousStatus message at revision { id status events { to } } } }`;
const DEPLOYMENT_STATUS = /* GraphQL */ `
  subscription($id: ID!) { deploymentStatusChanged(deploymentId: $id) { deploymentId status deployment { id status activeRevision { id } } } }`;
const DEPLOYMENT_REVISIONS = /* GraphQL */ `
  subscription($id: ID!) { deploymentRevisionsChanged(deploymentId: $id) { kind revision { id status } deployment { id } } }`;

let t: TestApp;
let url: string;
let ws: NewWorkspace;

// The real pipeline drives the statuses: it is paused while a test subscribes, then let go.
beforeAll(async () => {
  t = await startTestApp({ PIPELINE_STEP_MS: "25", RATE_LIMIT_PER_MINUTE: "0" });
  url = await t.app.start();
  ws = await t.workspace();
});
afterAll(() => t.close());

/** graphql-ws subscriptions open on the server (counted once their stream is in place). */
const openOverWs = async () => (await t.app.metrics.subscriptionsOpen.get()).values.find((v) => v.labels.transport === "websocket")?.value ?? 0;
/** Once those of earlier tests have all closed (their sockets close after the test): none open. */
const noneOpenOverWs = () => waitFor(openOverWs, (n) => n === 0, { what: "earlier tests' subscriptions closed" });

const statuses = (messages: { data?: any }[]) => messages.map((m) => m.data?.revisionStatusChanged?.status);

describe("revisionStatusChanged", () => {
  it("over graphql-ws: the current status, then every status to DEPLOYED, then completes", async () => {
    await t.app.worker!.stop();
    const d = await createDeployment(t, ws.apiKey);
    const client = wsClient(url, ws.apiKey);
    try {
      const revision = subscribeWs(client, REVISION_STATUS, { id: d.revisionId });
      const deployment = subscribeWs(client, DEPLOYMENT_STATUS, { id: d.id });
      await waitFor(() => revision.messages.length === 1 && deployment.messages.length === 1, Boolean, { what: "the current statuses" });
      expect(revision.messages[0]!.data.revisionStatusChanged).toMatchObject({ status: "CREATING", previousStatus: null, revision: { id: d.revisionId } });
      expect(deployment.messages[0]!.data.deploymentStatusChanged).toEqual({
        deploymentId: d.id,
        status: "AWAITING_DATABASE",
        deployment: { id: d.id, status: "AWAITING_DATABASE", activeRevision: null },
      });

      t.app.worker!.start();
      await revision.done;
      expect(statuses(revision.messages)).toEqual(FULL_RUN);
      const last = revision.messages.at(-1)!.data.revisionStatusChanged;
      expect(last).toMatchObject({ status: "DEPLOYED", previousStatus: "DEPLOYING", revision: { status: "DEPLOYED" } });
      // Each message shows the revision as it was read for that message, not a stale copy.
      expect(last.revision.events.map((e: { to: string }) => e.to)).toEqual(FULL_RUN);
      for (const [i, m] of revision.messages.entries()) {
        if (i > 0) expect(m.data.revisionStatusChanged.previousStatus).toBe(FULL_RUN[i - 1]);
      }

      await waitFor(() => deployment.messages.length === 2, Boolean, { what: "the deployment becoming READY" });
      expect(deployment.messages[1]!.data.deploymentStatusChanged).toEqual({
        deploymentId: d.id,
        status: "READY",
        deployment: { id: d.id, status: "READY", activeRevision: { id: d.revisionId } },
      });
      deployment.dispose();
    } finally {
      await client.dispose();
    }
  });

  it("over SSE: the same statuses in the same order", async () => {
    await t.app.worker!.stop();
    const d = await createDeployment(t, ws.apiKey);
    const sse = subscribeSse(t, ws.apiKey, REVISION_STATUS, { id: d.revisionId });
    await waitFor(() => sse.messages.length === 1, Boolean, { what: "the current status over SSE" });
    t.app.worker!.start();
    await sse.done;
    expect(sse.status()).toBe(200);
    expect(statuses(sse.messages)).toEqual(FULL_RUN);
  });

  it("executes a later subscriber's first message for it: what changed since the first subscriber joined shows", async () => {
    await t.app.worker!.stop();
    const d = await createDeployment(t, ws.apiKey);
    const query = /* GraphQL */ `subscription($id: ID!) { revisionStatusChanged(revisionId: $id) { status revision { deployment { shareable } } } }`;
    const shareable = (m: { data?: any }) => m.data.revisionStatusChanged.revision.deployment.shareable;
    const client = wsClient(url, ws.apiKey);
    try {
      const first = subscribeWs(client, query, { id: d.revisionId });
      await waitFor(() => first.messages.length, (n) => n === 1, { what: "the first subscriber's current status" });
      expect(shareable(first.messages[0]!)).toBe(false);
      // A change the revision's feed is not told of (no status changes).
      await gqlOk(t, ws.apiKey, `mutation($id: ID!) { deploymentUpdate(id: $id, input: { shareable: true }) { userErrors { message } } }`, { id: d.id });
      const later = subscribeWs(client, query, { id: d.revisionId });
      await waitFor(() => later.messages.length, (n) => n === 1, { what: "the later subscriber's current status" });
      expect(later.messages[0]!.data.revisionStatusChanged.status).toBe("CREATING");
      expect(shareable(later.messages[0]!)).toBe(true);
      first.dispose();
      later.dispose();
    } finally {
      await client.dispose();
      t.app.worker!.start();
    }
  });

  it("starts from the current status of a revision already under way, and completes at once on a finished one", async () => {
    await t.app.worker!.stop();
    const d = await createDeployment(t, ws.apiKey);
    t.app.worker!.start();
    const client = wsClient(url, ws.apiKey);
    try {
      const sub = subscribeWs(client, REVISION_STATUS, { id: d.revisionId });
      await sub.done;
      const seen = statuses(sub.messages);
      expect(seen.at(-1)).toBe("DEPLOYED");
      // A suffix of the run, in order, with nothing repeated.
      expect(FULL_RUN.slice(FULL_RUN.indexOf(seen[0]!))).toEqual(seen);

      const again = subscribeWs(client, REVISION_STATUS, { id: d.revisionId });
      await again.done;
      expect(statuses(again.messages)).toEqual(["DEPLOYED"]);
    } finally {
      await client.dispose();
    }
  });
});

describe("deploymentRevisionsChanged", () => {
  it("tells of each new revision and each status change of the deployment's revisions", async () => {
    await t.app.worker!.stop();
    const d = await createDeployment(t, ws.apiKey);
    const client = wsClient(url, ws.apiKey);
    try {
      await noneOpenOverWs();
      const sub = subscribeWs(client, DEPLOYMENT_REVISIONS, { id: d.id });
      // Nothing is sent until something changes: wait for the subscription to be in place.
      await waitFor(openOverWs, (n) => n === 1, { what: "the subscription in place" });
      const created = await gqlOk(t, ws.apiKey, `mutation($d: ID!) { revisionCreate(deploymentId: $d, input: {}) { revision { id } } }`, { d: d.id });
      const second = created.revisionCreate.revision.id as string;
      t.app.worker!.start();
      const changes = () => sub.messages.map((m) => m.data.deploymentRevisionsChanged);
      await waitFor(() => changes().some((c) => c.revision.id === second && c.revision.status === "DEPLOYED"), Boolean, { what: "the second revision deployed" });
      sub.dispose();
      const all = changes();
      expect(all[0]).toEqual({ kind: "CREATED", revision: { id: second, status: expect.any(String) }, deployment: { id: d.id } });
      // The first revision was superseded before it started: it is SKIPPED, and that is told too.
      expect(all).toContainEqual({ kind: "STATUS_CHANGED", revision: { id: d.revisionId, status: "SKIPPED" }, deployment: { id: d.id } });
      expect(all.filter((c) => c.revision.id === second && c.kind === "STATUS_CHANGED").length).toBeGreaterThanOrEqual(FULL_RUN.length - 2);
    } finally {
      await client.dispose();
    }
  });
});

describe("deploymentRevisionsChanged, a subscriber joining while the feed reads", () => {
  it("is told what that read finds: a change made after it joined is never missed", { timeout: 90_000 }, async () => {
    await t.app.worker!.stop();
    const d = await createDeployment(t, ws.apiKey);
    const client = wsClient(url, ws.apiKey);
    // The feed's read of the deployment's new entries is held until released (once).
    let arrived = false;
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const original = BatchReads.prototype.deploymentEntriesSince;
    const read = vi.spyOn(BatchReads.prototype, "deploymentEntriesSince").mockImplementationOnce(async function (this: BatchReads, ...args) {
      arrived = true;
      await released;
      return original.apply(this, args);
    });
    try {
      await noneOpenOverWs();
      const first = subscribeWs(client, DEPLOYMENT_REVISIONS, { id: d.id });
      await waitFor(openOverWs, (n) => n === 1, { what: "the first subscriber in place" });
      // A change: the feed steps, and its read is held.
      expect((await t.request("POST", `/v2/deployments/${restId(d.id)}/revisions/${restId(d.revisionId)}/interrupt`, { key: ws.apiKey })).status).toBe(200);
      await waitFor(() => arrived, Boolean, { what: "the feed's read" });
      const later = subscribeWs(client, DEPLOYMENT_REVISIONS, { id: d.id });
      await waitFor(openOverWs, (n) => n === 2, { what: "the later subscriber in place" });
      // Made after the later subscriber joined, and found by the read under way.
      const created = await gqlOk(t, ws.apiKey, `mutation($d: ID!) { revisionCreate(deploymentId: $d, input: {}) { revision { id } } }`, { d: d.id });
      const second = created.revisionCreate.revision.id as string;
      release();
      const createdSecond = (sub: { messages: { data?: any }[] }) =>
        sub.messages.some((m) => m.data.deploymentRevisionsChanged.kind === "CREATED" && m.data.deploymentRevisionsChanged.revision.id === second);
      await waitFor(() => createdSecond(first), Boolean, { what: "the first subscriber told of the new revision" });
      await waitFor(() => createdSecond(later), Boolean, { what: "the later subscriber told of the new revision" });
      first.dispose();
      later.dispose();
    } finally {
      read.mockRestore();
      release();
      await client.dispose();
      t.app.worker!.start();
    }
  });
});

describe("a deployment being deleted", () => {
  const DELETE = /* GraphQL */ `mutation($id: ID!) { deploymentDelete(id: $id) { deletedDeploymentId userErrors { code } } }`;
  const CREATE_REVISION = /* GraphQL */ `mutation($d: ID!) { revisionCreate(deploymentId: $d, input: {}) { revision { id } } }`;

  it("ends revisionStatusChanged and deploymentRevisionsChanged, over graphql-ws and SSE: its revisions change no more", async () => {
    // No pipeline: the revision would stay CREATING for ever, and no terminal status can end its stream.
    await t.app.worker!.stop();
    const d = await createDeployment(t, ws.apiKey);
    const client = wsClient(url, ws.apiKey);
    try {
      const revisions = subscribeWs(client, DEPLOYMENT_REVISIONS, { id: d.id });
      const revisionsSse = subscribeSse(t, ws.apiKey, DEPLOYMENT_REVISIONS, { id: d.id });
      // They send nothing on joining: a new revision they tell of shows both are in place (one made
      // before they were is not told; another is made then).
      let latest = d.revisionId;
      const told = () => [revisions, revisionsSse].every((s) => s.messages.some((m) => m.data?.deploymentRevisionsChanged?.kind === "CREATED"));
      await waitFor(
        async () => {
          if (told()) return true;
          latest = (await gqlOk(t, ws.apiKey, CREATE_REVISION, { d: d.id })).revisionCreate.revision.id;
          return false;
        },
        Boolean,
        { intervalMs: 200, what: "deploymentRevisionsChanged in place over graphql-ws and SSE" },
      );
      const revision = subscribeWs(client, REVISION_STATUS, { id: latest });
      const revisionSse = subscribeSse(t, ws.apiKey, REVISION_STATUS, { id: latest });
      const deployment = subscribeWs(client, DEPLOYMENT_STATUS, { id: d.id });
      await waitFor(() => [revision, revisionSse, deployment].every((s) => s.messages.length === 1), Boolean, { what: "the current statuses" });

      const deleted = await gqlOk(t, ws.apiKey, DELETE, { id: d.id });
      expect(deleted.deploymentDelete).toEqual({ deletedDeploymentId: d.id, userErrors: [] });
      // Every stream completes, none with an error.
      await Promise.all([revision.done, revisionSse.done, revisions.done, revisionsSse.done, deployment.done]);
      expect(statuses(revision.messages)).toEqual(["CREATING"]);
      expect(statuses(revisionSse.messages)).toEqual(["CREATING"]);
      for (const m of [...revisions.messages, ...revisionsSse.messages]) expect(m.errors).toBeUndefined();
      expect(deployment.messages.at(-1)!.data.deploymentStatusChanged).toMatchObject({ deploymentId: d.id, status: "AWAITING_DELETE" });
    } finally {
      await client.dispose();
      t.app.worker!.start();
    }
  });

  it("a subscriber that comes while the deletion is under way gets the current status, then the end", async () => {
    await t.app.worker!.stop();
    const d = await createDeployment(t, ws.apiKey);
    // As markDeleting leaves it, before the rows go.
    await t.app.db.prisma.deployment.update({ where: { id: restId(d.id) }, data: { status: "AWAITING_DELETE" } });
    const client = wsClient(url, ws.apiKey);
    try {
      const revision = subscribeWs(client, REVISION_STATUS, { id: d.revisionId });
      const revisionSse = subscribeSse(t, ws.apiKey, REVISION_STATUS, { id: d.revisionId });
      const revisions = subscribeWs(client, DEPLOYMENT_REVISIONS, { id: d.id });
      await Promise.all([revision.done, revisionSse.done, revisions.done]);
      expect(statuses(revision.messages)).toEqual(["CREATING"]);
      expect(statuses(revisionSse.messages)).toEqual(["CREATING"]);
      expect(revisions.messages).toEqual([]);
    } finally {
      await client.dispose();
      t.app.worker!.start();
    }
  });
});

describe("a subscription whose root field is under @skip or @include", () => {
  const HEALTHY = `subscription($id: ID!) { deploymentStatusChanged(deploymentId: $id) { status } }`;
  const SKIPPED = `subscription($id: ID!) { deploymentStatusChanged(deploymentId: $id) @skip(if: true) { status } }`;
  const VARIABLE = `subscription($id: ID!, $on: Boolean!) { deploymentStatusChanged(deploymentId: $id) @include(if: $on) { status } }`;
  const IN_FRAGMENT = `subscription S($id: ID!) { ...F } fragment F on Subscription { deploymentStatusChanged(deploymentId: $id) @include(if: true) { status } }`;
  const refusal = (name: string) =>
    expect.objectContaining({ message: `Subscription "${name}" must not use @skip or @include directives in the top level selection.` });

  it("is refused as invalid, that operation only: over graphql-ws the socket and its other subscriptions go on; over SSE an error answer; no fault logged", async () => {
    const d = await createDeployment(t, ws.apiKey);
    const faults = () => t.guard.logLines.filter((line) => /"level":(50|60)/.test(line)).length;
    const before = faults();
    const client = wsClient(url, ws.apiKey);
    try {
      const healthy = subscribeWs(client, HEALTHY, { id: d.id });
      await waitFor(() => healthy.messages.length, (n) => n >= 1, { what: "the healthy subscription's current status" });
      for (const [query, variables, name] of [
        [SKIPPED, { id: d.id }, "(anonymous)"],
        [VARIABLE, { id: d.id, on: true }, "(anonymous)"],
        [IN_FRAGMENT, { id: d.id }, "S"],
      ] as const) {
        const refused = subscribeWs(client, query, variables);
        expect(await endOf(refused.done, "the refusal")).toEqual({ errors: [refusal(name)] });
      }
      // The socket is open: another operation on it runs, and the healthy subscription is still live:
      // it is told of the deployment's deletion, then ends.
      const after = subscribeWs(client, `{ viewer { uuid } }`, {});
      expect(await endOf(after.done, "a query after the refusals")).toBe("completed");
      await gqlOk(t, ws.apiKey, `mutation($id: ID!) { deploymentDelete(id: $id) { deletedDeploymentId } }`, { id: d.id });
      expect(await endOf(healthy.done, "the healthy subscription telling of the deletion")).toBe("completed");
      expect(healthy.messages.at(-1)).toEqual({ data: { deploymentStatusChanged: { status: "AWAITING_DELETE" } } });
    } finally {
      await client.dispose();
    }
    for (const [query, variables] of [[SKIPPED, { id: d.id }], [VARIABLE, { id: d.id, on: true }]] as const) {
      const sse = subscribeSse(t, ws.apiKey, query, variables);
      await sse.done;
      expect(sse.status()).toBeLessThan(500);
      expect(sse.messages.at(-1)).toEqual({ errors: [refusal("(anonymous)")] });
    }
    expect(faults()).toBe(before);
  });
});

describe("authentication and tenancy", () => {
  it("closes a graphql-ws connection without valid credentials (4401) or with another workspace's tenant id (4403)", async () => {
    for (const [key, params, code] of [
      [null, {}, 4401],
      ["dcp_wrong-key", {}, 4401],
      [ws.apiKey, { "X-Tenant-Id": "00000000-0000-4000-8000-000000000000" }, 4403],
    ] as const) {
      const client = wsClient(url, key, params);
      try {
        const sub = subscribeWs(client, `subscription { revisionStatusChanged(revisionId: "x") { status } }`, {});
        const error = await sub.done.then(
          () => null,
          (e: unknown) => e,
        );
        expect((error as { code?: number }).code, JSON.stringify(params)).toBe(code);
      } finally {
        await client.dispose();
      }
    }
  });

  it("does not let a workspace subscribe to another's revision or deployment, over graphql-ws or SSE", async () => {
    await t.app.worker!.stop();
    const d = await createDeployment(t, ws.apiKey);
    t.app.worker!.start();
    const intruder = await t.workspace();
    const client = wsClient(url, intruder.apiKey);
    try {
      for (const [query, id] of [
        [REVISION_STATUS, d.revisionId],
        [DEPLOYMENT_STATUS, d.id],
        [DEPLOYMENT_REVISIONS, d.id],
      ] as const) {
        const sub = subscribeWs(client, query, { id });
        await sub.done;
        // The subscription ends with one result carrying the error: nothing of the object is shown.
        expect(sub.messages).toEqual([
          { errors: [expect.objectContaining({ message: expect.stringContaining("not found"), extensions: { code: "NOT_FOUND" } })] },
        ]);
      }
    } finally {
      await client.dispose();
    }
    const sse = subscribeSse(t, intruder.apiKey, REVISION_STATUS, { id: d.revisionId });
    await sse.done;
    expect(sse.messages).toEqual([expect.objectContaining({ errors: [expect.objectContaining({ extensions: { code: "NOT_FOUND" } })] })]);
  });
});

describe("across replicas", () => {
  const postgres = inject("pgTemplate") !== null;

  it.skipIf(!postgres)("sees every status of a revision that another instance's pipeline carries out", async () => {
    const database = await createTestDatabase();
    // Instance A serves the subscription and runs no pipeline; instance B runs the pipeline.
    const a = await startTestApp({ PIPELINE_WORKER: "off", RATE_LIMIT_PER_MINUTE: "0" }, database);
    const b = await startTestApp({ PIPELINE_WORKER: "off", PIPELINE_STEP_MS: "25" }, database);
    try {
      const tenant = await a.workspace();
      const d = await createDeployment(a, tenant.apiKey);
      const aUrl = await a.app.start();
      const client = wsClient(aUrl, tenant.apiKey);
      const sse = subscribeSse(a, tenant.apiKey, REVISION_STATUS, { id: d.revisionId });
      try {
        const sub = subscribeWs(client, REVISION_STATUS, { id: d.revisionId });
        await waitFor(() => sub.messages.length === 1 && sse.messages.length === 1, Boolean, { what: "the current status on instance A" });
        // B's worker is the only one: every change is made on B and reaches A through LISTEN/NOTIFY.
        const worker = new (await import("../../src/pipeline/worker.js")).PipelineWorker(
          b.app.core.revisionWork,
          new (await import("../../src/pipeline/runtimes/simulator.js")).SimulatorRuntime(25),
          b.app.logger,
        );
        worker.start();
        try {
          await Promise.all([sub.done, sse.done]);
        } finally {
          await worker.stop();
        }
        expect(statuses(sub.messages)).toEqual(FULL_RUN);
        expect(statuses(sse.messages)).toEqual(FULL_RUN);
      } finally {
        await client.dispose();
      }
    } finally {
      await a.close();
      await b.close();
    }
  });
});

