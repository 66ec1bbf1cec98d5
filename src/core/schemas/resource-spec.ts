import { z } from "zod";

/**
 * A map (a record), but for a key named `__proto__`: zod's records skip it (a JavaScript object given
 * it takes a prototype instead of a key), so it would be dropped without a word. It is refused
 * instead, where it was sent (Kubernetes takes no such key).
 */
const map = <K extends z.ZodType<string>, V extends z.ZodType>(key: K, value: V) =>
  z.preprocess((input, ctx) => {
    if (typeof input === "object" && input !== null && Object.hasOwn(input, "__proto__")) {
      ctx.issues.push({ code: "custom", message: "a key named __proto__ cannot be stored", input, path: ["__proto__"] });
    }
    return input;
  }, z.record(key, value));

/**
 * Any JSON value, as z.json() takes, but named: the OpenAPI document shares a recursive schema as a
 * component, and one zod leaves unnamed gets a name made up per conversion (__schema0).
 */
const jsonValue: z.ZodType<z.core.util.JSONType> = z
  .lazy(() => z.union([z.string(), z.number(), z.boolean(), z.null(), z.array(jsonValue), z.record(z.string(), jsonValue)]))
  .meta({ id: "JsonValue" });

/** Opaque JSON objects of Kubernetes shapes SPEC.md does not detail (volume sources, securityContext, ...). */
const object = map(z.string(), jsonValue);

/**
 * The largest whole number any field here may take: GraphQL's Int is 32-bit, so a larger value would be
 * accepted and then fail every GraphQL read of it (Kubernetes' own fields are int32 too).
 */
export const MAX_INT32 = 2_147_483_647;

/**
 * cpu fields take decimals such as 0.1; memory and scale fields whole numbers. Bounds keep values sane
 * where the reference gives a type only (core_*, db_*, orchestrator_*, executor_*).
 */
const cpu = z.number().gt(0).max(512);
/** The reference's bounds of the server's, the queue's and the cache's cpu: its answers must validate against them. */
const cpuRequest = z.number().min(0.1).max(8);
const cpuLimit = z.number().min(0.1).max(16);
const memoryMb = z.number().int().min(1).max(4_194_304);
const scale = z.number().int().min(0).max(1000);

const volumeMountSchema = z.object({
  name: z.string().min(1).max(253),
  mountPath: z.string().min(1).max(4096),
  subPath: z.string().max(4096).nullish(),
  mountPropagation: z.string().max(64).nullish(),
  readOnly: z.boolean().nullish(),
  subPathExpr: z.string().max(4096).nullish(),
});

const volumeSchema = z.object({
  name: z.string().min(1).max(253),
  configMap: object.nullish(),
  secret: object.nullish(),
  emptyDir: object.nullish(),
  persistentVolumeClaim: object.nullish(),
  nfs: object.nullish(),
  projected: object.nullish(),
  downwardAPI: object.nullish(),
  csi: object.nullish(),
});

const envVarSchema = z.object({
  name: z.string().min(1).max(253),
  value: z.string().nullish(),
  valueFrom: object.nullish(),
});

export const containerSchema = z.object({
  name: z.string().min(1).max(63),
  image: z.string().min(1).max(1024),
  imagePullPolicy: z.string().max(32).nullish(),
  command: z.array(z.string()).nullish(),
  args: z.array(z.string()).nullish(),
  workingDir: z.string().nullish(),
  env: z.array(envVarSchema).nullish(),
  envFrom: z.array(object).nullish(),
  resources: z.object({ limits: object.nullish(), requests: object.nullish() }).nullish(),
  volumeMounts: z.array(volumeMountSchema).nullish(),
  securityContext: object.nullish(),
  restartPolicy: z.string().max(32).nullish(),
});

const scalingRulesSchema = z.object({
  stabilization_window_seconds: z.number().int().min(0).max(3600).nullish(),
  select_policy: z.string().max(32).nullish(),
  policies: z
    .array(
      z.object({
        type: z.string().min(1).max(32),
        // Pods or a percentage (which may exceed 100 when scaling up).
        value: z.number().int().min(0).max(MAX_INT32),
        period_seconds: z.number().int().min(1).max(1800),
      }),
    )
    .nullish(),
});

export const autoscalingBehaviorSchema = z.object({
  scale_up: scalingRulesSchema.nullish(),
  scale_down: scalingRulesSchema.nullish(),
});

const percent = z.number().int().min(1).max(100);

/** [request, limit] pairs: a request above its limit could never be scheduled. */
const REQUEST_LIMIT_PAIRS = [
  ["cpu", "cpu_limit"],
  ["memory_mb", "memory_limit_mb"],
  ["queue_cpu", "queue_cpu_limit"],
  ["queue_memory_mb", "queue_memory_limit_mb"],
  ["orchestrator_cpu", "orchestrator_cpu_limit"],
  ["orchestrator_memory_mb", "orchestrator_memory_limit_mb"],
  ["executor_cpu", "executor_cpu_limit"],
  ["executor_memory_mb", "executor_memory_limit_mb"],
  ["cache_cpu", "cache_cpu_limit"],
  ["cache_memory_mb", "cache_memory_limit_mb"],
  ["core_cpu", "core_cpu_limit"],
  ["core_memory_mb", "core_memory_limit_mb"],
  ["db_cpu", "db_cpu_limit"],
  ["db_memory_mb", "db_memory_limit_mb"],
  ["min_scale", "max_scale"],
  ["queue_min_scale", "queue_max_scale"],
  ["orchestrator_min_scale", "orchestrator_max_scale"],
] as const;

/**
 * SPEC.md's resource spec: every group, every field, and the reference's orchestrator and executor
 * fields (ResourceSpec-Input/-Output), which SPEC.md's groups do not list; all optional and nullable
 * (clients send nulls). A field missing here is dropped from what clients send without a word.
 */
export const resourceSpecSchema = z
  .object({
    min_scale: scale.nullish(),
    max_scale: scale.nullish(),
    cpu: cpuRequest.nullish(),
    cpu_limit: cpuLimit.nullish(),
    memory_mb: memoryMb.nullish(),
    memory_limit_mb: memoryMb.nullish(),
    queue_min_scale: scale.nullish(),
    queue_max_scale: scale.nullish(),
    queue_cpu: cpuRequest.nullish(),
    queue_cpu_limit: cpuLimit.nullish(),
    queue_memory_mb: memoryMb.nullish(),
    queue_memory_limit_mb: memoryMb.nullish(),
    orchestrator_cpu: cpu.nullish(),
    orchestrator_cpu_limit: cpu.nullish(),
    orchestrator_memory_mb: memoryMb.nullish(),
    orchestrator_memory_limit_mb: memoryMb.nullish(),
    orchestrator_min_scale: scale.nullish(),
    orchestrator_max_scale: scale.nullish(),
    executor_cpu: cpu.nullish(),
    executor_cpu_limit: cpu.nullish(),
    executor_memory_mb: memoryMb.nullish(),
    executor_memory_limit_mb: memoryMb.nullish(),
    cache_cpu: cpuRequest.nullish(),
    cache_cpu_limit: cpuLimit.nullish(),
    cache_memory_mb: memoryMb.nullish(),
    cache_memory_limit_mb: memoryMb.nullish(),
    core_cpu: cpu.nullish(),
    core_cpu_limit: cpu.nullish(),
    core_memory_mb: memoryMb.nullish(),
    core_memory_limit_mb: memoryMb.nullish(),
    db_cpu: cpu.nullish(),
    db_cpu_limit: cpu.nullish(),
    db_memory_mb: memoryMb.nullish(),
    db_memory_limit_mb: memoryMb.nullish(),
    db_storage_gi: z.number().int().min(1).max(65_536).nullish(),
    db_max_connections: z.number().int().min(1).max(100_000).nullish(),
    labels: map(z.string().min(1).max(317), z.string().max(63)).nullish(),
    annotations: map(z.string().min(1).max(317), z.string()).nullish(),
    service_account_name: z.string().min(1).max(253).nullish(),
    image_pull_secrets: z.array(z.object({ name: z.string().min(1).max(253) })).nullish(),
    volumes: z.array(volumeSchema).nullish(),
    volume_mounts: z.array(volumeMountSchema).nullish(),
    init_containers: z.array(containerSchema).nullish(),
    sidecars: z.array(containerSchema).nullish(),
    // Shown in deployment responses; accepted so that a spec read back can be sent again.
    cpu_target_percent: percent.nullish(),
    cpu_scaling_enabled: z.boolean().nullish(),
    cpu_limit_enabled: z.boolean().nullish(),
    autoscaling_behavior: autoscalingBehaviorSchema.nullish(),
    queue_cpu_target_percent: percent.nullish(),
    queue_cpu_scaling_enabled: z.boolean().nullish(),
    queue_cpu_limit_enabled: z.boolean().nullish(),
    queue_autoscaling_behavior: autoscalingBehaviorSchema.nullish(),
  })
  .superRefine((spec, ctx) => {
    for (const [low, high] of REQUEST_LIMIT_PAIRS) {
      const a = spec[low];
      const b = spec[high];
      if (a != null && b != null && a > b) {
        ctx.addIssue({ code: "custom", path: [low], input: a, message: `${low} must not exceed ${high} (${b})` });
      }
    }
  });

export type ResourceSpec = z.output<typeof resourceSpecSchema>;
