import { describe, expect, it } from "vitest";
import { z } from "zod";
import { agentSchema } from "../../src/core/schemas/agent.js";
import {
  deploymentCreateSchema,
  deploymentListQuerySchema,
  deploymentUpdateSchema,
  revisionCreateSchema,
  revisionListQuerySchema,
} from "../../src/core/schemas/deployment.js";
import { MAX_INT32, resourceSpecSchema } from "../../src/core/schemas/resource-spec.js";
import { secretReferencesSchema, secretsSchema } from "../../src/core/schemas/secrets.js";
import { emptySourceConfig, emptySourceRevisionConfig, overlay, sameJson, servingUrl } from "../../src/core/schemas/source-config.js";
import { fixedFieldIssues, listenerRequired, sourceRuleIssues } from "../../src/core/schemas/source-rules.js";
import { SOURCES, type Source } from "../../src/core/schemas/source.js";

const paths = (result: { success: boolean; error?: { issues: { path: PropertyKey[] }[] } }) =>
  result.error?.issues.map((i) => i.path.join(".")) ?? [];

const FULL_SPEC = {
  min_scale: 0, max_scale: 3, cpu: 0.5, cpu_limit: 1, memory_mb: 512, memory_limit_mb: 1024,
  queue_min_scale: 1, queue_max_scale: 2, queue_cpu: 0.25, queue_cpu_limit: 0.5, queue_memory_mb: 256, queue_memory_limit_mb: 512,
  cache_cpu: 0.1, cache_cpu_limit: 0.2, cache_memory_mb: 128, cache_memory_limit_mb: 256,
  core_cpu: 1, core_cpu_limit: 2, core_memory_mb: 1024, core_memory_limit_mb: 2048,
  db_cpu: 1, db_cpu_limit: 2, db_memory_mb: 1024, db_memory_limit_mb: 2048, db_storage_gi: 20, db_max_connections: 200,
  orchestrator_cpu: 0.5, orchestrator_cpu_limit: 1, orchestrator_memory_mb: 512, orchestrator_memory_limit_mb: 1024,
  orchestrator_min_scale: 1, orchestrator_max_scale: 4,
  executor_cpu: 1, executor_cpu_limit: 2, executor_memory_mb: 2048, executor_memory_limit_mb: 4096,
  labels: { team: "agents", "simulate/failure": "build" },
  annotations: { "example.com/note": "a longer annotation value that may exceed sixty-three characters, unlike a label value" },
  service_account_name: "agent-sa",
  image_pull_secrets: [{ name: "regcred" }],
  volumes: [{ name: "data", persistentVolumeClaim: { claimName: "pvc" } }, { name: "cfg", configMap: { name: "cm", items: [{ key: "a", path: "a" }] } }],
  volume_mounts: [{ name: "data", mountPath: "/data", readOnly: true, subPath: "x", mountPropagation: "None", subPathExpr: "$(POD)" }],
  init_containers: [{ name: "migrate", image: "r/migrate:1", command: ["sh"], args: ["-c", "true"], env: [{ name: "A", value: "1" }, { name: "B", valueFrom: { secretKeyRef: { name: "s", key: "k" } } }] }],
  sidecars: [
    {
      name: "proxy", image: "r/proxy:1", imagePullPolicy: "IfNotPresent", workingDir: "/", envFrom: [{ configMapRef: { name: "cm" } }],
      resources: { limits: { cpu: "500m" }, requests: { memory: "64Mi" } }, volumeMounts: [{ name: "data", mountPath: "/d" }],
      securityContext: { runAsNonRoot: true }, restartPolicy: "Always",
    },
  ],
  cpu_target_percent: 70, cpu_scaling_enabled: true, cpu_limit_enabled: false,
  autoscaling_behavior: {
    scale_up: { stabilization_window_seconds: 0, select_policy: "Max", policies: [{ type: "Pods", value: 4, period_seconds: 15 }] },
    scale_down: { stabilization_window_seconds: 300, select_policy: "Max", policies: [{ type: "Pods", value: 1, period_seconds: 60 }] },
  },
  queue_cpu_target_percent: 80, queue_cpu_scaling_enabled: false, queue_cpu_limit_enabled: true, queue_autoscaling_behavior: null,
};

describe("resourceSpecSchema", () => {
  it("accepts every field of SPEC.md's resource spec and keeps them", () => {
    const parsed = resourceSpecSchema.parse(FULL_SPEC);
    expect(parsed).toEqual(FULL_SPEC);
  });

  it("drops unknown fields and accepts explicit nulls", () => {
    expect(resourceSpecSchema.parse({ cpu: null, surprise: 1 })).toEqual({ cpu: null });
  });

  it("takes decimals for cpu fields, whole numbers for memory and scale, all above zero (scale from zero)", () => {
    expect(resourceSpecSchema.safeParse({ cpu: 0.1, db_cpu: 0.05, min_scale: 0 }).success).toBe(true);
    const bad = resourceSpecSchema.safeParse({ cpu: 0, queue_cpu: -1, memory_mb: 1.5, max_scale: 2.5, db_storage_gi: 0, min_scale: -1, cache_memory_mb: "1" });
    expect(paths(bad).sort()).toEqual(["cache_memory_mb", "cpu", "db_storage_gi", "max_scale", "memory_mb", "min_scale", "queue_cpu"]);
  });

  // The reference bounds these three groups' cpu (its other groups', and SPEC's core_*, it leaves open).
  it("holds the server's, queue's and cache's cpu to the reference's bounds: requests 0.1 to 8, limits 0.1 to 16", () => {
    const edges = { cpu: 0.1, cpu_limit: 16, queue_cpu: 8, queue_cpu_limit: 8, cache_cpu: 0.1, cache_cpu_limit: 0.1 };
    expect(resourceSpecSchema.safeParse(edges).success).toBe(true);
    const bad = resourceSpecSchema.safeParse({ cpu: 0.05, cpu_limit: 100, queue_cpu: 8.5, queue_cpu_limit: 17, cache_cpu: 9, cache_cpu_limit: 40 });
    expect(paths(bad).sort()).toEqual(["cache_cpu", "cache_cpu_limit", "cpu", "cpu_limit", "queue_cpu", "queue_cpu_limit"]);
    expect(bad.error!.issues.find((i) => i.path[0] === "cpu_limit")).toMatchObject({ code: "too_big", maximum: 16, inclusive: true });
    expect(bad.error!.issues.find((i) => i.path[0] === "cpu")).toMatchObject({ code: "too_small", minimum: 0.1, inclusive: true });
    // Groups the reference leaves open keep this service's own sanity bounds.
    expect(resourceSpecSchema.safeParse({ core_cpu: 0.05, core_cpu_limit: 64, db_cpu: 32, db_cpu_limit: 64 }).success).toBe(true);
  });

  // The reference gives the orchestrator's and executor's fields types only (number, integer): like core_*
  // and db_*, they keep this service's own sanity bounds, cpu above 0 and up to 512 included.
  it("takes the orchestrator's and executor's fields with the types the reference gives them and this service's sanity bounds", () => {
    const edges = {
      orchestrator_cpu: 0.05, orchestrator_cpu_limit: 512, orchestrator_memory_mb: 1, orchestrator_memory_limit_mb: 4_194_304,
      orchestrator_min_scale: 0, orchestrator_max_scale: 1000,
      executor_cpu: 12, executor_cpu_limit: 32, executor_memory_mb: 4_194_304, executor_memory_limit_mb: 4_194_304,
    };
    expect(resourceSpecSchema.parse(edges)).toEqual(edges);
    const bad = resourceSpecSchema.safeParse({
      orchestrator_cpu: 0, orchestrator_cpu_limit: 513, orchestrator_memory_mb: 1.5, orchestrator_memory_limit_mb: 4_194_305,
      orchestrator_min_scale: -1, orchestrator_max_scale: 1001,
      executor_cpu: "1", executor_cpu_limit: -2, executor_memory_mb: 0, executor_memory_limit_mb: true,
    });
    expect(paths(bad).sort()).toEqual([
      "executor_cpu", "executor_cpu_limit", "executor_memory_limit_mb", "executor_memory_mb",
      "orchestrator_cpu", "orchestrator_cpu_limit", "orchestrator_max_scale", "orchestrator_memory_limit_mb", "orchestrator_memory_mb", "orchestrator_min_scale",
    ]);
    expect(bad.error!.issues.find((i) => i.path[0] === "orchestrator_cpu")).toMatchObject({ code: "too_small", minimum: 0, inclusive: false });
    expect(bad.error!.issues.find((i) => i.path[0] === "orchestrator_cpu_limit")).toMatchObject({ code: "too_big", maximum: 512, inclusive: true });
    expect(resourceSpecSchema.parse({ orchestrator_cpu: null, executor_memory_mb: null })).toEqual({ orchestrator_cpu: null, executor_memory_mb: null });
  });

  it("keeps minimums at or below maximums and requests at or below limits", () => {
    const bad = resourceSpecSchema.safeParse({ min_scale: 5, max_scale: 2, queue_min_scale: 3, queue_max_scale: 1, cpu: 2, cpu_limit: 1, db_memory_mb: 4096, db_memory_limit_mb: 1024 });
    expect(paths(bad).sort()).toEqual(["cpu", "db_memory_mb", "min_scale", "queue_min_scale"]);
    expect(resourceSpecSchema.safeParse({ min_scale: 2, max_scale: 2, cpu: 1, cpu_limit: 1 }).success).toBe(true);
    const workloads = resourceSpecSchema.safeParse({
      orchestrator_cpu: 2, orchestrator_cpu_limit: 1, orchestrator_memory_mb: 2048, orchestrator_memory_limit_mb: 1024,
      orchestrator_min_scale: 3, orchestrator_max_scale: 2,
      executor_cpu: 4, executor_cpu_limit: 2, executor_memory_mb: 512, executor_memory_limit_mb: 256,
    });
    expect(paths(workloads).sort()).toEqual(["executor_cpu", "executor_memory_mb", "orchestrator_cpu", "orchestrator_memory_mb", "orchestrator_min_scale"]);
    expect(workloads.error!.issues.find((i) => i.path[0] === "executor_cpu")!.message).toBe("executor_cpu must not exceed executor_cpu_limit (2)");
    const equal = { orchestrator_cpu: 1, orchestrator_cpu_limit: 1, orchestrator_min_scale: 2, orchestrator_max_scale: 2, executor_memory_mb: 512, executor_memory_limit_mb: 512 };
    expect(resourceSpecSchema.safeParse(equal).success).toBe(true);
  });

  it("wants labels and annotations as maps of strings, and named volumes and containers", () => {
    const bad = resourceSpecSchema.safeParse({
      labels: { a: 1 },
      annotations: ["x"],
      volumes: [{ configMap: {} }],
      volume_mounts: [{ name: "v" }],
      init_containers: [{ image: "r/i" }],
      sidecars: [{ name: "s", image: "r/s", env: [{ value: "v" }], command: "run" }],
      image_pull_secrets: [{}],
      autoscaling_behavior: { scale_up: { policies: [{ type: "Pods", value: 1, period_seconds: 0 }] } },
    });
    expect(paths(bad).sort()).toEqual([
      "annotations",
      "autoscaling_behavior.scale_up.policies.0.period_seconds",
      "image_pull_secrets.0.name",
      "init_containers.0.name",
      "labels.a",
      "sidecars.0.command",
      "sidecars.0.env.0.name",
      "volume_mounts.0.mountPath",
      "volumes.0.name",
    ]);
  });

  it("bounds every whole number a deployment body takes to GraphQL's Int (32-bit), which shows it back", () => {
    const unbounded: string[] = [];
    const walk = (node: unknown, path: string): void => {
      if (Array.isArray(node)) return node.forEach((item, i) => walk(item, `${path}[${i}]`));
      if (typeof node !== "object" || node === null) return;
      const o = node as Record<string, unknown>;
      if (o.type === "integer" && !(Number(o.minimum) >= -MAX_INT32 - 1 && Number(o.maximum) <= MAX_INT32)) unbounded.push(`${path} [${o.minimum}, ${o.maximum}]`);
      for (const [key, value] of Object.entries(o)) walk(value, `${path}.${key}`);
    };
    for (const [name, schema] of Object.entries({ deploymentCreateSchema, deploymentUpdateSchema, revisionCreateSchema })) {
      walk(z.toJSONSchema(schema, { io: "input", unrepresentable: "any", reused: "inline" }), name);
    }
    expect(unbounded).toEqual([]);
    const policy = (value: number) => ({ autoscaling_behavior: { scale_down: { policies: [{ type: "Percent", value, period_seconds: 60 }] } } });
    expect(resourceSpecSchema.safeParse(policy(MAX_INT32)).success).toBe(true);
    expect(paths(resourceSpecSchema.safeParse(policy(MAX_INT32 + 1)))).toEqual(["autoscaling_behavior.scale_down.policies.0.value"]);
  });
});

describe("secrets and agent", () => {
  it("needs environment-variable names, unique within the set", () => {
    expect(secretsSchema.safeParse([{ name: "A_1", value: "" }]).success).toBe(true);
    expect(paths(secretsSchema.safeParse([{ name: "1A", value: "x" }, { name: "B", value: "x" }, { name: "B", value: "y" }]))).toEqual(["0.name", "2.name"]);
    expect(paths(secretReferencesSchema.safeParse([{ name: "A", secret_name: "", secret_key: "k" }]))).toEqual(["0.secret_name"]);
  });

  it("checks agent ids against their pattern and length, and environments against the enum", () => {
    expect(agentSchema.safeParse({ agent_id: "a", environment: "local" }).success).toBe(true);
    expect(agentSchema.safeParse({ agent_id: `a${"b".repeat(61)}c`, environment: "production" }).success).toBe(true);
    for (const agentId of ["", "1abc", "abc-", "ab_c", "Abc", `a${"b".repeat(63)}`]) {
      expect(agentSchema.safeParse({ agent_id: agentId, environment: "local" }).success, agentId).toBe(false);
    }
    expect(paths(agentSchema.safeParse({ agent_id: "a", environment: "prod" }))).toEqual(["environment"]);
  });
});

describe("query schemas", () => {
  it("reads comma separated and repeated lists, booleans as pydantic does, and defaults paging", () => {
    const a = "6f1e1c2a-1b2c-4d3e-8f40-123456789abc";
    const b = "7f1e1c2a-1b2c-4d3e-8f40-123456789abc";
    expect(deploymentListQuerySchema.parse({ deployment_ids: [`${a}, ${b}`, a], remote_reconciled: "Yes" })).toMatchObject({
      deployment_ids: [a, b, a],
      remote_reconciled: true,
      limit: 20,
      offset: 0,
    });
    expect(deploymentListQuerySchema.parse({ remote_reconciled: "off" }).remote_reconciled).toBe(false);
    // A list with no items is no filter.
    expect(deploymentListQuerySchema.parse({ tag_value_ids: "," }).tag_value_ids).toBeUndefined();
    expect(revisionListQuerySchema.parse({ status: "DEPLOYED,SKIPPED" }).status).toEqual(["DEPLOYED", "SKIPPED"]);
    // Statuses are plain strings: one no revision has matches nothing; an empty filter is none.
    expect(revisionListQuerySchema.parse({ status: "DEPLOYED,DONE" }).status).toEqual(["DEPLOYED"]);
    expect(revisionListQuerySchema.parse({ status: "DONE" }).status).toEqual([]);
    expect(revisionListQuerySchema.parse({ status: "" }).status).toBeUndefined();
  });
});

describe("source rules", () => {
  const subject = (source: Source, sc: object = {}, src: object = {}) => ({
    source,
    sourceConfig: { ...emptySourceConfig(), ...sc },
    sourceRevisionConfig: { ...emptySourceRevisionConfig(), ...src },
  });
  const locs = (s: ReturnType<typeof subject>) => sourceRuleIssues(s).map((i) => i.loc.slice(1).join("."));

  it("requires framework_config_path for codehost, and for internal_source with its tarball; refuses it for the others", () => {
    for (const source of SOURCES) {
      const takes = source === "codehost" || source === "internal_source";
      const without = locs(subject(source));
      const withIt = locs(subject(source, {}, { framework_config_path: "a.json" }));
      expect(without.includes("source_revision_config.framework_config_path"), source).toBe(source === "codehost");
      expect(withIt.includes("source_revision_config.framework_config_path"), source).toBe(!takes);
    }
    // The command-line tool creates an internal_source deployment with nothing, then PATCHes both in.
    const tarballOnly = locs(subject("internal_source", {}, { source_tarball_path: "uploads/a.tar.gz" }));
    expect(tarballOnly).toEqual(["source_revision_config.framework_config_path"]);
  });

  it("codehost needs integration and repository; external_container an image and a listener; managed sources no listener", () => {
    expect(locs(subject("codehost", {}, { framework_config_path: "a" }))).toEqual(["source_config.integration_id", "source_config.repo_url"]);
    expect(locs(subject("external_container", { listener_id: "l" }))).toEqual(["source_revision_config.image_uri"]);
    expect(listenerRequired(subject("external_container"))).toBe(true);
    expect(listenerRequired(subject("external_container", { listener_id: "l" }))).toBe(false);
    expect(listenerRequired(subject("internal_container"))).toBe(false);
    expect(locs(subject("internal_template", { listener_id: "l" }))).toEqual(["source_config.listener_id"]);
  });

  it("names each fixed field an update would change, ignoring nulls and current values", () => {
    const current = { name: "n", source: "codehost", sourceConfig: { ...emptySourceConfig(), integration_id: "ABC", repo_url: "u", deployment_type: "dev" as const } };
    expect(fixedFieldIssues(current, { name: "n", source: null, source_config: { integration_id: "abc", repo_url: "u", listener_id: null } })).toEqual([]);
    expect(fixedFieldIssues(current, { name: "m", source_config: { deployment_type: "prod", listener_id: "6f1e1c2a-1b2c-4d3e-8f40-123456789abc" } }).map((i) => i.loc)).toEqual([
      ["body", "name"],
      ["body", "source_config", "deployment_type"],
      ["body", "source_config", "listener_id"],
    ]);
  });
});

describe("source config helpers", () => {
  it("overlays only non-null fields and compares JSON whatever the key order", () => {
    const base = { ...emptySourceConfig(), custom_url: "https://a", install_command: "x" };
    expect(overlay(base, { custom_url: null, install_command: "y" })).toMatchObject({ custom_url: "https://a", install_command: "y" });
    expect(sameJson({ a: 1, b: [1, { c: 2, d: 3 }] }, { b: [1, { d: 3, c: 2 }], a: 1 })).toBe(true);
    expect(sameJson({ a: [1, 2] }, { a: [2, 1] })).toBe(false);
    expect(sameJson(null, undefined)).toBe(true);
  });

  it("makes serving URLs valid DNS labels", () => {
    const id = "6f1e1c2a-1b2c-4d3e-8f40-123456789abc";
    expect(servingUrl("my-app", id, null, "d.test")).toBe("https://my-app-6f1e1c2a.d.test");
    expect(servingUrl("My App_2!", id, null, "d.test")).toBe("https://my-app-2-6f1e1c2a.d.test");
    expect(servingUrl("x".repeat(100), id, null, "d.test")).toBe(`https://${"x".repeat(54)}-6f1e1c2a.d.test`);
    expect(servingUrl("!!!", id, null, "d.test")).toBe("https://deployment-6f1e1c2a.d.test");
    expect(servingUrl("my-app", id, "https://custom.example", "d.test")).toBe("https://custom.example");
  });
});
