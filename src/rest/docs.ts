import type { Context, Hono } from "hono";
import { matchedRoutes } from "hono/route";
import { z } from "zod";
import { objectOf } from "../core/schemas/query.js";
import { queryDecoders } from "../core/validation.js";
import { isPostRead } from "../middleware/idempotency.js";

/**
 * The OpenAPI 3.1 document of the REST face, made from the same zod schemas the routes validate
 * with: each route handler is wrapped in describe() with its summary, parameters, body and answers,
 * and openApiDocument() walks the app's routes, so a route without a description is an error, not a
 * gap in the reference (test/rest/openapi.test.ts).
 */

type Schema = z.ZodType;

export interface Answer {
  description: string;
  /** The JSON body; none: the answer has no body (204). */
  schema?: Schema;
  headers?: Record<string, string>;
}

export interface RouteDoc {
  /**
   * The operation's name, which generated clients make their method names of. An operation the
   * reference contract has takes the reference's (test/contract/openapi.test.ts); the others, one
   * made of the method and path (postV2DeploymentsDeploymentIdPushToken).
   */
  operationId?: string;
  summary: string;
  description?: string;
  tag: string;
  /** How the caller authenticates: an API key or bearer token (default), nothing, the registry's Basic push token, or a signed URL. */
  auth?: "api" | "none" | "push-token" | "signed-url";
  params?: Schema;
  query?: Schema;
  body?: Schema;
  /** The body's media type when it is not JSON (an upload). */
  bodyMedia?: string;
  /** Honours Idempotency-Key (POSTs under /v1 and /v2 do). */
  idempotent?: boolean;
  responses: Record<number, Answer>;
}

const docs = new WeakMap<object, RouteDoc>();

/** The documentation of the route that answers `c`'s request, if it has one. */
export function routeDocOf(c: Context): RouteDoc | undefined {
  for (const route of matchedRoutes(c).toReversed()) {
    const doc = docs.get(route.handler);
    if (doc) return doc;
  }
  return undefined;
}

/** Attaches a route's documentation to its handler; returns the handler unchanged. */
export function describe<H extends object>(doc: RouteDoc, handler: H): H {
  // Two routes sharing one handler would share the last description given.
  if (docs.has(handler)) throw new Error(`describe(): this handler is described already (${docs.get(handler)!.summary}): give each route a handler of its own`);
  docs.set(handler, doc);
  return handler;
}

/** SPEC.md's error shape: `{detail: "message"}`, or for 422 `{detail: [issues]}`. */
export const validationIssue = z.object({
  loc: z.array(z.union([z.string(), z.number()])),
  msg: z.string(),
  type: z.string(),
  input: z.unknown().optional(),
  ctx: z.record(z.string(), z.unknown()).optional(),
});
export const errorSchema = z.object({ detail: z.union([z.string(), z.array(validationIssue)]) });

/**
 * The schemas named with `.meta({ id })` (Deployment, SourceConfig, ...), gathered while the
 * operations are made: the document shares each as components/schemas/<id> rather than repeat it in
 * every operation that answers one.
 */
type Components = Map<string, unknown>;

/** `json` with its references to `$defs` (where zod puts named schemas) made references to the components. */
function toComponents(json: unknown): unknown {
  if (Array.isArray(json)) return json.map(toComponents);
  if (typeof json !== "object" || json === null) return json;
  return Object.fromEntries(
    Object.entries(json).map(([key, value]) => [key, key === "$ref" && typeof value === "string" ? value.replace(/^#\/\$defs\//, "#/components/schemas/") : toComponents(value)]),
  );
}

const jsonSchema = (schema: Schema, io: "input" | "output", components: Components) => {
  const { $schema: _, $defs, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: "any", target: "draft-2020-12", reused: "inline" }) as Record<string, unknown>;
  for (const [id, definition] of Object.entries(($defs ?? {}) as Record<string, unknown>)) {
    const shared = toComponents(definition);
    const other = components.get(id);
    // One name, one shape: a schema named for answers and also read as a request (input) would differ.
    if (other !== undefined && JSON.stringify(other) !== JSON.stringify(shared)) throw new Error(`the schema named ${id} has two shapes in the document: name only one of them`);
    components.set(id, shared);
  }
  return toComponents(rest);
};

const ERROR_REF = { $ref: "#/components/schemas/Error" };
const errorAnswer = (description: string) => ({ description, content: { "application/json": { schema: ERROR_REF } } });

/** `/v2/deployments/:deployment_id` as OpenAPI writes it: `/v2/deployments/{deployment_id}`. */
export const openApiPath = (path: string) => path.replace(/:([A-Za-z0-9_]+)/g, "{$1}");

/** Whether `schema` reads query text with one of queryDecoders, maybe through wrappers that keep what it reads. */
function decodes(schema: z.ZodType): boolean {
  if (queryDecoders.has(schema)) return true;
  if (schema instanceof z.ZodPipe) return decodes(schema.in as z.ZodType);
  if (schema instanceof z.ZodDefault || schema instanceof z.ZodOptional || schema instanceof z.ZodNullable) return decodes(schema.unwrap() as z.ZodType);
  // .describe() and .meta() make a copy whose parent is the original.
  const parent = schema._zod.parent as z.ZodType | undefined;
  return parent ? decodes(parent) : false;
}

type Json = Record<string, unknown>;
const isJsonObject = (v: unknown): v is Json => typeof v === "object" && v !== null && !Array.isArray(v);

/** Adds to `target` what `extra` says and it does not (both hold: an intersection of checks); `target` wins on a conflict. */
function mergeUnder(target: Json, extra: Json) {
  for (const [key, value] of Object.entries(extra)) {
    const own = target[key];
    if (own === undefined) target[key] = value;
    else if (isJsonObject(own) && isJsonObject(value)) mergeUnder(own, value);
  }
}

/**
 * A parameter as the value it is read as, not the text it arrives as: a queryDecoders schema is its
 * type (`limit`: integer); the checks piped after it add their bounds (minimum, maxItems); its
 * default, which zod leaves out of an input schema that transforms, is kept. A transform after the
 * checks (a clamp, a filter) documents nothing more.
 */
function documentDecoded({ zodSchema, jsonSchema: json }: { zodSchema: z.core.$ZodType; jsonSchema: Json }) {
  const schema = zodSchema as z.ZodType;
  const as = queryDecoders.get(schema);
  if (as) {
    for (const key of Object.keys(json)) delete json[key];
    Object.assign(json, as);
  } else if (schema instanceof z.ZodPipe && decodes(schema.in as z.ZodType)) {
    mergeUnder(json, parameterSchema(schema.out as z.ZodType, "output"));
  } else if (schema instanceof z.ZodDefault && decodes(schema.unwrap() as z.ZodType)) {
    json.default = (schema._zod.def as { defaultValue: unknown }).defaultValue;
  }
}

const parameterSchema = (schema: Schema, io: "input" | "output"): Json => {
  const { $schema: _, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: "any", target: "draft-2020-12", reused: "inline", override: documentDecoded }) as Json;
  return rest;
};

function parameters(schema: Schema | undefined, where: "path" | "query") {
  if (!schema) return [];
  const json = parameterSchema(schema, "input") as { properties?: Record<string, Record<string, unknown>>; required?: string[] };
  const shape = objectOf(schema)?.shape as Record<string, z.ZodType> | undefined;
  return Object.entries(json.properties ?? {}).map(([name, property]) => {
    const { description, ...rest } = property;
    const field = shape?.[name];
    return {
      name,
      in: where,
      // Required when leaving it out is refused (as a JSON body, bodyRequired): the input schema of a
      // list that must have items (commaList piped into .min(1)) reads as optional.
      required: where === "path" || (field ? !field.safeParse(undefined).success : (json.required ?? []).includes(name)),
      ...(typeof description === "string" ? { description } : {}),
      schema: rest,
    };
  });
}

const IDEMPOTENCY_KEY = {
  name: "Idempotency-Key",
  in: "header",
  required: false,
  description:
    "Makes a retry safe: the first request with a key runs and its answer is kept; a retry with the same key and body gets that answer again, with `Idempotent-Replayed: true`, and runs nothing. Reusing a key with another body, or from another caller, is a 422. Answers of 5xx, and answers that carry a credential, are not kept.",
  schema: { type: "string", minLength: 1, maxLength: 255 },
};

const SECURITY: Record<NonNullable<RouteDoc["auth"]>, object[]> = {
  api: [{ ApiKey: [] }, { ApiKey: [], TenantId: [] }, { Bearer: [] }],
  none: [],
  "push-token": [{ PushToken: [] }],
  "signed-url": [],
};

function operation(method: string, path: string, doc: RouteDoc, components: Components) {
  const auth = doc.auth ?? "api";
  const params = [
    ...parameters(doc.params, "path"),
    ...parameters(doc.query, "query"),
    // The idempotency middleware takes every authenticated POST under /v1 and /v2 that changes something.
    ...(doc.idempotent || (method === "post" && auth === "api" && /^\/v[12]\//.test(path) && !isPostRead(path)) ? [IDEMPOTENCY_KEY] : []),
  ];
  const responses: Record<string, unknown> = {};
  for (const [status, answer] of Object.entries(doc.responses)) {
    responses[status] = {
      description: answer.description,
      ...(answer.headers ? { headers: Object.fromEntries(Object.entries(answer.headers).map(([h, d]) => [h, { description: d, schema: { type: "string" } }])) } : {}),
      // The error shape is one component, however many answers use it.
      ...(answer.schema ? { content: { "application/json": { schema: answer.schema === errorSchema ? ERROR_REF : jsonSchema(answer.schema, "output", components) } } } : {}),
    };
  }
  const errors: Record<string, string> = {};
  if (doc.params || doc.query || doc.body) errors["422"] = "Invalid input: `detail` lists each problem (loc, msg, type).";
  if (auth === "api") {
    errors["401"] = "No valid API key or bearer token.";
    errors["403"] = "The key or token has no access to the requested workspace.";
  }
  if (doc.body) errors["413"] = "The body is larger than the limit.";
  errors["429"] = "Too many requests (or failed authentications): retry after `Retry-After` seconds.";
  errors["503"] = "The database is unavailable: retry after `Retry-After` seconds.";
  if (params.includes(IDEMPOTENCY_KEY)) {
    const stillRunning = "A request with the same Idempotency-Key is still being processed: retry it later.";
    const own = responses["409"] as { description: string } | undefined;
    responses["409"] = own ? { ...own, description: `${own.description}; or: ${stillRunning}` } : errorAnswer(stillRunning);
  }
  for (const [status, description] of Object.entries(errors)) if (!(status in responses)) responses[status] = errorAnswer(description);
  responses.default = errorAnswer("Any other error, in the same shape.");
  return {
    operationId: doc.operationId ?? `${method}${path.replace(/[{}]/g, "").replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ? c.toUpperCase() : ""))}`,
    summary: doc.summary,
    ...(doc.description ? { description: doc.description } : {}),
    tags: [doc.tag],
    security: SECURITY[auth],
    ...(params.length > 0 ? { parameters: params } : {}),
    ...(doc.body
      ? { requestBody: { required: bodyRequired(doc), content: { [doc.bodyMedia ?? "application/json"]: { schema: doc.bodyMedia ? { type: "string", contentMediaType: doc.bodyMedia } : jsonSchema(doc.body, "input", components) } } } }
      : {}),
    responses,
  };
}

/**
 * Whether the operation refuses a request without a body: a raw body (an upload) always; a JSON body
 * when its schema refuses what a missing one reads as (readJson: undefined), as FastAPI's 422
 * `missing` does.
 */
const bodyRequired = (doc: RouteDoc): boolean => Boolean(doc.bodyMedia) || !doc.body!.safeParse(undefined).success;

export interface Route {
  method: string;
  path: string;
  handler: object;
}

/** The routes of an app: every method-specific route (middleware excluded). */
export const routesOf = (app: Hono<any>): Route[] => app.routes.filter((r) => r.method !== "ALL").map((r) => ({ method: r.method, path: r.path, handler: r.handler }));

/**
 * The methods the routes take at a concrete path (for a 405's Allow), sorted; none where no route
 * has that path. Hono tells only "no handler": a known path asked with a method it does not take
 * would be a 404, which reads as a wrong path.
 */
export function methodsAt(routes: Route[]): (path: string) => string[] {
  const segment = (part: string) => (part.startsWith(":") ? "[^/]+" : part.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  const patterns = routes.map((r) => ({ method: r.method, path: new RegExp(`^${r.path.split("/").map(segment).join("/")}$`) }));
  return (path) => [...new Set(patterns.filter((p) => p.path.test(path)).map((p) => p.method))].sort();
}

/** Routes that have no description: the document would not show them. */
export const undescribed = (routes: Route[]) => routes.filter((r) => !docs.has(r.handler)).map((r) => `${r.method} ${r.path}`);

/** The OpenAPI 3.1 document of these routes; throws when one is undescribed. */
export function openApiDocument(routes: Route[], version: string): Record<string, unknown> {
  const missing = undescribed(routes);
  if (missing.length > 0) throw new Error(`routes without describe(): ${missing.join(", ")}`);
  const paths: Record<string, Record<string, unknown>> = {};
  const seen = new Set<string>();
  const components: Components = new Map();
  for (const route of routes) {
    const path = openApiPath(route.path);
    const key = `${route.method} ${path}`;
    if (seen.has(key)) continue;
    seen.add(key);
    (paths[path] ??= {})[route.method.toLowerCase()] = operation(route.method.toLowerCase(), path, docs.get(route.handler)!, components);
  }
  const sorted = Object.fromEntries(Object.entries(paths).sort(([a], [b]) => a.localeCompare(b)));
  return {
    openapi: "3.1.0",
    info: {
      title: "Deployment control plane",
      version,
      description:
        "The REST face of the deployment control plane. Authenticate with `X-Api-Key` (an organisation-wide key also needs `X-Tenant-Id`) or `Authorization: Bearer <HS256 token>`. Errors are `{\"detail\": \"message\"}`, or for 422 `{\"detail\": [issues]}`. POSTs under /v1 and /v2 that change something honour `Idempotency-Key` (the log reads do not need it). Every answer carries `X-Request-Id` (yours, if you sent a valid one).",
    },
    servers: [{ url: "/" }],
    paths: sorted,
    components: {
      schemas: { Error: jsonSchema(errorSchema, "output", components), ...Object.fromEntries([...components].sort(([a], [b]) => a.localeCompare(b))) },
      securitySchemes: {
        ApiKey: { type: "apiKey", in: "header", name: "X-Api-Key" },
        TenantId: { type: "apiKey", in: "header", name: "X-Tenant-Id", description: "The workspace, for an organisation-wide key." },
        Bearer: { type: "http", scheme: "bearer", bearerFormat: "JWT" },
        PushToken: { type: "http", scheme: "basic", description: "The push token issued by POST /v2/deployments/{deployment_id}/push-token, as the password." },
      },
    },
  };
}

/** Shapes the answers share. */
export const timestamp = z.iso.datetime();
export const nullableTimestamp = timestamp.nullable();
/** A JSON object whose fields the service does not constrain further here. */
export const jsonObject = z.record(z.string(), z.unknown());
/** How the answers sent with NO_STORE (http.ts) document it. */
export const NO_STORE_HEADER = { "Cache-Control": "no-store: the answer carries a credential" };

/** An error answer of the operation's own, in the error shape. */
export const refused = (description: string): Answer => ({ description, schema: errorSchema });

/** The 404 of a route whose path names something. */
export const notFound: Answer = { description: "No such object in the caller's workspace", schema: errorSchema };

/** The version the API description carries (SPEC.md, Versioning); the paths carry their own (v1, v2). */
export const API_VERSION = "0.1.0";
