import { builder } from "../builder.js";
import { camel } from "../input-names.js";
import { bool, int, num, type Obj, obj, objs, str, strs } from "../stored-json.js";

/** SPEC.md's numeric resource fields: cpu values are decimals, memory, scale and storage whole numbers. */
const FLOATS = ["cpu", "cpu_limit", "queue_cpu", "queue_cpu_limit", "cache_cpu", "cache_cpu_limit", "core_cpu", "core_cpu_limit", "db_cpu", "db_cpu_limit"];
const INTS = [
  "min_scale", "max_scale", "memory_mb", "memory_limit_mb",
  "queue_min_scale", "queue_max_scale", "queue_memory_mb", "queue_memory_limit_mb",
  "cache_memory_mb", "cache_memory_limit_mb", "core_memory_mb", "core_memory_limit_mb",
  "db_memory_mb", "db_memory_limit_mb", "db_storage_gi", "db_max_connections",
  "cpu_target_percent", "queue_cpu_target_percent",
];
const BOOLS = ["cpu_scaling_enabled", "cpu_limit_enabled", "queue_cpu_scaling_enabled", "queue_cpu_limit_enabled"];

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

export const ResourceSpecRef = builder.objectRef<Obj>("ResourceSpec").implement({
  description: "Compute resources of every component (server, queue, cache, core, database) and pod settings.",
  fields: (t) => ({
    ...Object.fromEntries(FLOATS.map((k) => [camel(k), t.float({ nullable: true, resolve: (o) => num(o, k) })])),
    ...Object.fromEntries(INTS.map((k) => [camel(k), t.int({ nullable: true, resolve: (o) => int(o, k) })])),
    ...Object.fromEntries(BOOLS.map((k) => [camel(k), t.boolean({ nullable: true, resolve: (o) => bool(o, k) })])),
    labels: t.field({ type: "JSONObject", nullable: true, resolve: (o) => obj(o, "labels") }),
    annotations: t.field({ type: "JSONObject", nullable: true, resolve: (o) => obj(o, "annotations") }),
    serviceAccountName: t.string({ nullable: true, resolve: (o) => str(o, "service_account_name") }),
    imagePullSecrets: t.field({ type: [Named], nullable: true, resolve: (o) => objs(o, "image_pull_secrets") }),
    volumes: t.field({ type: [Volume], nullable: true, resolve: (o) => objs(o, "volumes") }),
    volumeMounts: t.field({ type: [VolumeMount], nullable: true, resolve: (o) => objs(o, "volume_mounts") }),
    initContainers: t.field({ type: [Container], nullable: true, resolve: (o) => objs(o, "init_containers") }),
    sidecars: t.field({ type: [Container], nullable: true, resolve: (o) => objs(o, "sidecars") }),
    autoscalingBehavior: t.field({ type: AutoscalingBehavior, nullable: true, resolve: (o) => obj(o, "autoscaling_behavior") }),
    queueAutoscalingBehavior: t.field({ type: AutoscalingBehavior, nullable: true, resolve: (o) => obj(o, "queue_autoscaling_behavior") }),
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
