import { builder } from "../builder.js";
import { camel } from "../input-names.js";
import { bool, int, num, type Obj, obj, objs, str, strs } from "../../core/stored-json.js";

/** SPEC.md's numeric resource fields and the reference's orchestrator and executor ones: cpu values are decimals, memory, scale and storage whole numbers. */
const FLOATS = [
  "cpu", "cpu_limit", "queue_cpu", "queue_cpu_limit", "orchestrator_cpu", "orchestrator_cpu_limit", "executor_cpu", "executor_cpu_limit",
  "cache_cpu", "cache_cpu_limit", "core_cpu", "core_cpu_limit", "db_cpu", "db_cpu_limit",
] as const;
const INTS = [
  "min_scale", "max_scale", "memory_mb", "memory_limit_mb",
  "queue_min_scale", "queue_max_scale", "queue_memory_mb", "queue_memory_limit_mb",
  "orchestrator_min_scale", "orchestrator_max_scale", "orchestrator_memory_mb", "orchestrator_memory_limit_mb",
  "executor_memory_mb", "executor_memory_limit_mb",
  "cache_memory_mb", "cache_memory_limit_mb", "core_memory_mb", "core_memory_limit_mb",
  "db_memory_mb", "db_memory_limit_mb", "db_storage_gi", "db_max_connections",
  "cpu_target_percent", "queue_cpu_target_percent",
] as const;
const BOOLS = ["cpu_scaling_enabled", "cpu_limit_enabled", "queue_cpu_scaling_enabled", "queue_cpu_limit_enabled"] as const;

/** A stored (snake_case) name as its GraphQL field name, as input-names.ts's camel spells it. */
type Camel<S extends string> = S extends `${infer Head}_${infer Tail}` ? `${Head}${Capitalize<Camel<Tail>>}` : S;

const fieldName = <K extends string>(stored: K) => camel(stored) as Camel<K>;

const Named = builder.objectRef<Obj>("ImagePullSecret").implement({
  fields: (t) => ({ name: t.string({ resolve: (o) => str(o, "name") ?? "" }) }),
});

const VolumeMount = builder.objectRef<Obj>("VolumeMount").implement({
  fields: (t) => ({
    name: t.string({ resolve: (o) => str(o, "name") ?? "" }),
    mountPath: t.string({ resolve: (o) => str(o, "mountPath") ?? "" }),
    subPath: t.string({ nullable: true, resolve: (o) => str(o, "subPath") }),
    mountPropagation: t.string({ nullable: true, resolve: (o) => str(o, "mountPropagation") }),
    readOnly: t.boolean({ nullable: true, resolve: (o) => bool(o, "readOnly") }),
    subPathExpr: t.string({ nullable: true, resolve: (o) => str(o, "subPathExpr") }),
  }),
});

const VOLUME_SOURCES = ["configMap", "secret", "emptyDir", "persistentVolumeClaim", "nfs", "projected", "downwardAPI", "csi"];

const Volume = builder.objectRef<Obj>("Volume").implement({
  description: "A pod volume; its source objects are passed to Kubernetes as given.",
  fields: (t) => ({
    name: t.string({ resolve: (o) => str(o, "name") ?? "" }),
    ...Object.fromEntries(VOLUME_SOURCES.map((k) => [k, t.field({ type: "JSONObject", nullable: true, resolve: (o) => obj(o, k) })])),
  }),
});

const EnvVar = builder.objectRef<Obj>("EnvVar").implement({
  fields: (t) => ({
    name: t.string({ resolve: (o) => str(o, "name") ?? "" }),
    value: t.string({ nullable: true, resolve: (o) => str(o, "value") }),
    valueFrom: t.field({ type: "JSONObject", nullable: true, resolve: (o) => obj(o, "valueFrom") }),
  }),
});

const ContainerResources = builder.objectRef<Obj>("ContainerResources").implement({
  fields: (t) => ({
    limits: t.field({ type: "JSONObject", nullable: true, resolve: (o) => obj(o, "limits") }),
    requests: t.field({ type: "JSONObject", nullable: true, resolve: (o) => obj(o, "requests") }),
  }),
});

const Container = builder.objectRef<Obj>("Container").implement({
  description: "An init container or sidecar, in Kubernetes' own field names.",
  fields: (t) => ({
    name: t.string({ resolve: (o) => str(o, "name") ?? "" }),
    image: t.string({ resolve: (o) => str(o, "image") ?? "" }),
    imagePullPolicy: t.string({ nullable: true, resolve: (o) => str(o, "imagePullPolicy") }),
    command: t.stringList({ nullable: true, resolve: (o) => strs(o, "command") }),
    args: t.stringList({ nullable: true, resolve: (o) => strs(o, "args") }),
    workingDir: t.string({ nullable: true, resolve: (o) => str(o, "workingDir") }),
    env: t.field({ type: [EnvVar], nullable: true, resolve: (o) => objs(o, "env") }),
    envFrom: t.field({ type: ["JSONObject"], nullable: true, resolve: (o) => objs(o, "envFrom") }),
    resources: t.field({ type: ContainerResources, nullable: true, resolve: (o) => obj(o, "resources") }),
    volumeMounts: t.field({ type: [VolumeMount], nullable: true, resolve: (o) => objs(o, "volumeMounts") }),
    securityContext: t.field({ type: "JSONObject", nullable: true, resolve: (o) => obj(o, "securityContext") }),
    restartPolicy: t.string({ nullable: true, resolve: (o) => str(o, "restartPolicy") }),
  }),
});

const ScalingPolicy = builder.objectRef<Obj>("ScalingPolicy").implement({
  fields: (t) => ({
    type: t.string({ resolve: (o) => str(o, "type") ?? "" }),
    value: t.int({ resolve: (o) => int(o, "value") ?? 0 }),
    periodSeconds: t.int({ resolve: (o) => int(o, "period_seconds") ?? 0 }),
  }),
});

const ScalingRules = builder.objectRef<Obj>("ScalingRules").implement({
  fields: (t) => ({
    stabilizationWindowSeconds: t.int({ nullable: true, resolve: (o) => int(o, "stabilization_window_seconds") }),
    selectPolicy: t.string({ nullable: true, resolve: (o) => str(o, "select_policy") }),
    policies: t.field({ type: [ScalingPolicy], nullable: true, resolve: (o) => objs(o, "policies") }),
  }),
});

const AutoscalingBehavior = builder.objectRef<Obj>("AutoscalingBehavior").implement({
  fields: (t) => ({
    scaleUp: t.field({ type: ScalingRules, nullable: true, resolve: (o) => obj(o, "scale_up") }),
    scaleDown: t.field({ type: ScalingRules, nullable: true, resolve: (o) => obj(o, "scale_down") }),
  }),
});

/**
 * A resource spec as GraphQL shows it (like SourceConfigView): each field under its GraphQL name, read
 * once with stored-json's rules (a value of the wrong shape is null), so that answering a field is a
 * property read. A page of 100 deployments that shows their specs asks for some 4,000 of these
 * fields; resolving them one by one cost a resolver call each.
 */
export type ResourceSpecView = { [K in (typeof FLOATS)[number] | (typeof INTS)[number] as Camel<K>]: number | null } & {
  [K in (typeof BOOLS)[number] as Camel<K>]: boolean | null;
} & {
  labels: Obj | null;
  annotations: Obj | null;
  serviceAccountName: string | null;
  imagePullSecrets: Obj[] | null;
  volumes: Obj[] | null;
  volumeMounts: Obj[] | null;
  initContainers: Obj[] | null;
  sidecars: Obj[] | null;
  autoscalingBehavior: Obj | null;
  queueAutoscalingBehavior: Obj | null;
};

/**
 * The view of a stored resource spec (core's snake_case object), written out as one literal; its type
 * makes the list complete. Built a computed key at a time instead (V8 keeps such an object as a
 * dictionary) and then copied, the view took five times as long a page as the resolvers it replaces
 * (100 source configs with specs executed and serialised in one process, as bench/views.ts does).
 */
export function resourceSpecView(o: Obj): ResourceSpecView {
  return {
    minScale: int(o, "min_scale"),
    maxScale: int(o, "max_scale"),
    cpu: num(o, "cpu"),
    cpuLimit: num(o, "cpu_limit"),
    memoryMb: int(o, "memory_mb"),
    memoryLimitMb: int(o, "memory_limit_mb"),
    queueMinScale: int(o, "queue_min_scale"),
    queueMaxScale: int(o, "queue_max_scale"),
    queueCpu: num(o, "queue_cpu"),
    queueCpuLimit: num(o, "queue_cpu_limit"),
    queueMemoryMb: int(o, "queue_memory_mb"),
    queueMemoryLimitMb: int(o, "queue_memory_limit_mb"),
    orchestratorMinScale: int(o, "orchestrator_min_scale"),
    orchestratorMaxScale: int(o, "orchestrator_max_scale"),
    orchestratorCpu: num(o, "orchestrator_cpu"),
    orchestratorCpuLimit: num(o, "orchestrator_cpu_limit"),
    orchestratorMemoryMb: int(o, "orchestrator_memory_mb"),
    orchestratorMemoryLimitMb: int(o, "orchestrator_memory_limit_mb"),
    executorCpu: num(o, "executor_cpu"),
    executorCpuLimit: num(o, "executor_cpu_limit"),
    executorMemoryMb: int(o, "executor_memory_mb"),
    executorMemoryLimitMb: int(o, "executor_memory_limit_mb"),
    cacheCpu: num(o, "cache_cpu"),
    cacheCpuLimit: num(o, "cache_cpu_limit"),
    cacheMemoryMb: int(o, "cache_memory_mb"),
    cacheMemoryLimitMb: int(o, "cache_memory_limit_mb"),
    coreCpu: num(o, "core_cpu"),
    coreCpuLimit: num(o, "core_cpu_limit"),
    coreMemoryMb: int(o, "core_memory_mb"),
    coreMemoryLimitMb: int(o, "core_memory_limit_mb"),
    dbCpu: num(o, "db_cpu"),
    dbCpuLimit: num(o, "db_cpu_limit"),
    dbMemoryMb: int(o, "db_memory_mb"),
    dbMemoryLimitMb: int(o, "db_memory_limit_mb"),
    dbStorageGi: int(o, "db_storage_gi"),
    dbMaxConnections: int(o, "db_max_connections"),
    cpuTargetPercent: int(o, "cpu_target_percent"),
    queueCpuTargetPercent: int(o, "queue_cpu_target_percent"),
    cpuScalingEnabled: bool(o, "cpu_scaling_enabled"),
    cpuLimitEnabled: bool(o, "cpu_limit_enabled"),
    queueCpuScalingEnabled: bool(o, "queue_cpu_scaling_enabled"),
    queueCpuLimitEnabled: bool(o, "queue_cpu_limit_enabled"),
    labels: obj(o, "labels"),
    annotations: obj(o, "annotations"),
    serviceAccountName: str(o, "service_account_name"),
    imagePullSecrets: objs(o, "image_pull_secrets"),
    volumes: objs(o, "volumes"),
    volumeMounts: objs(o, "volume_mounts"),
    initContainers: objs(o, "init_containers"),
    sidecars: objs(o, "sidecars"),
    autoscalingBehavior: obj(o, "autoscaling_behavior"),
    queueAutoscalingBehavior: obj(o, "queue_autoscaling_behavior"),
  };
}

export const ResourceSpecRef = builder.objectRef<ResourceSpecView>("ResourceSpec").implement({
  description: "Compute resources of every component (server, queue, orchestrator, executor, cache, core, database) and pod settings.",
  fields: (t) => ({
    ...Object.fromEntries(FLOATS.map((k) => [camel(k), t.exposeFloat(fieldName(k), { nullable: true })])),
    ...Object.fromEntries(INTS.map((k) => [camel(k), t.exposeInt(fieldName(k), { nullable: true })])),
    ...Object.fromEntries(BOOLS.map((k) => [camel(k), t.exposeBoolean(fieldName(k), { nullable: true })])),
    labels: t.expose("labels", { type: "JSONObject", nullable: true }),
    annotations: t.expose("annotations", { type: "JSONObject", nullable: true }),
    serviceAccountName: t.exposeString("serviceAccountName", { nullable: true }),
    imagePullSecrets: t.expose("imagePullSecrets", { type: [Named], nullable: true }),
    volumes: t.expose("volumes", { type: [Volume], nullable: true }),
    volumeMounts: t.expose("volumeMounts", { type: [VolumeMount], nullable: true }),
    initContainers: t.expose("initContainers", { type: [Container], nullable: true }),
    sidecars: t.expose("sidecars", { type: [Container], nullable: true }),
    autoscalingBehavior: t.expose("autoscalingBehavior", { type: AutoscalingBehavior, nullable: true }),
    queueAutoscalingBehavior: t.expose("queueAutoscalingBehavior", { type: AutoscalingBehavior, nullable: true }),
  }),
});

// Inputs mirror the outputs; names convert to core's (input-names.ts), values are validated by core.

const NamedInput = builder.inputType("ImagePullSecretInput", { fields: (t) => ({ name: t.string({ required: true }) }) });

const VolumeMountInput = builder.inputType("VolumeMountInput", {
  fields: (t) => ({
    name: t.string({ required: true }),
    mountPath: t.string({ required: true }),
    subPath: t.string(),
    mountPropagation: t.string(),
    readOnly: t.boolean(),
    subPathExpr: t.string(),
  }),
});

const VolumeInput = builder.inputType("VolumeInput", {
  fields: (t) => ({
    name: t.string({ required: true }),
    ...Object.fromEntries(VOLUME_SOURCES.map((k) => [k, t.field({ type: "JSONObject" })])),
  }),
});

const EnvVarInput = builder.inputType("EnvVarInput", {
  fields: (t) => ({ name: t.string({ required: true }), value: t.string(), valueFrom: t.field({ type: "JSONObject" }) }),
});

const ContainerResourcesInput = builder.inputType("ContainerResourcesInput", {
  fields: (t) => ({ limits: t.field({ type: "JSONObject" }), requests: t.field({ type: "JSONObject" }) }),
});

const ContainerInput = builder.inputType("ContainerInput", {
  fields: (t) => ({
    name: t.string({ required: true }),
    image: t.string({ required: true }),
    imagePullPolicy: t.string(),
    command: t.stringList(),
    args: t.stringList(),
    workingDir: t.string(),
    env: t.field({ type: [EnvVarInput] }),
    envFrom: t.field({ type: ["JSONObject"] }),
    resources: t.field({ type: ContainerResourcesInput }),
    volumeMounts: t.field({ type: [VolumeMountInput] }),
    securityContext: t.field({ type: "JSONObject" }),
    restartPolicy: t.string(),
  }),
});

const ScalingPolicyInput = builder.inputType("ScalingPolicyInput", {
  fields: (t) => ({ type: t.string({ required: true }), value: t.int({ required: true }), periodSeconds: t.int({ required: true }) }),
});

const ScalingRulesInput = builder.inputType("ScalingRulesInput", {
  fields: (t) => ({ stabilizationWindowSeconds: t.int(), selectPolicy: t.string(), policies: t.field({ type: [ScalingPolicyInput] }) }),
});

const AutoscalingBehaviorInput = builder.inputType("AutoscalingBehaviorInput", {
  fields: (t) => ({ scaleUp: t.field({ type: ScalingRulesInput }), scaleDown: t.field({ type: ScalingRulesInput }) }),
});

export const ResourceSpecInput = builder.inputType("ResourceSpecInput", {
  fields: (t) => ({
    ...Object.fromEntries(FLOATS.map((k) => [camel(k), t.float()])),
    ...Object.fromEntries(INTS.map((k) => [camel(k), t.int()])),
    ...Object.fromEntries(BOOLS.map((k) => [camel(k), t.boolean()])),
    labels: t.field({ type: "JSONObject" }),
    annotations: t.field({ type: "JSONObject" }),
    serviceAccountName: t.string(),
    imagePullSecrets: t.field({ type: [NamedInput] }),
    volumes: t.field({ type: [VolumeInput] }),
    volumeMounts: t.field({ type: [VolumeMountInput] }),
    initContainers: t.field({ type: [ContainerInput] }),
    sidecars: t.field({ type: [ContainerInput] }),
    autoscalingBehavior: t.field({ type: AutoscalingBehaviorInput }),
    queueAutoscalingBehavior: t.field({ type: AutoscalingBehaviorInput }),
  }),
});
