import { readFileSync } from "node:fs";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";

/**
 * The committed openapi.json (which test/rest/openapi.test.ts proves is what /openapi.json serves)
 * as validators: every answer the suite receives through app.fetch is checked against its
 * operation's documented answer, so the document and the service cannot drift apart.
 */

interface Operation {
  responses: Record<string, { content?: { "application/json"?: { schema: object } } }>;
}

const document = JSON.parse(readFileSync(new URL("../../openapi.json", import.meta.url), "utf8")) as {
  paths: Record<string, Record<string, Operation>>;
  components: object;
};

const ajv = new Ajv2020({ strict: false, allErrors: true });
(addFormats as unknown as (a: Ajv2020) => void)(ajv);
const compiled = new Map<string, ValidateFunction>();

/** Each template as a matcher: `{name}` is one path segment. */
const templates = Object.keys(document.paths).map((template) => ({
  template,
  pattern: new RegExp(`^${template.replace(/[.*+?^$()|[\]\\]/g, "\\$&").replace(/\{[^}]+\}/g, "[^/]+")}$`),
  // Literal segments win over parameters: /v2/auth/tokens/exists before /v2/auth/tokens/{token_id}.
  literals: template.split("/").filter((s) => s && !s.startsWith("{")).length,
}));
templates.sort((a, b) => b.literals - a.literals);

/** The documented operation a request goes to, or null (a path the service does not route). */
export function operationOf(method: string, pathname: string): { template: string; op: Operation } | null {
  for (const { template, pattern } of templates) {
    if (!pattern.test(pathname)) continue;
    const op = document.paths[template]?.[method.toLowerCase()];
    if (op) return { template, op };
  }
  return null;
}

/**
 * The errors an operation answers for reasons of its own (a bad request, a missing object, a
 * conflict, a provider that failed), which a client handles one by one: each must be documented. The
 * others (401, 403, 413, 422, 429, 503: documented on every operation they apply to) and any error
 * yet unforeseen fall to `default`.
 */
const OWN_STATUSES = new Set([400, 404, 409, 410, 502]);

/**
 * Why this answer does not match the document, or null when it does. Only JSON answers are checked
 * (an event stream, an HTML page, an asset have no JSON schema); a success status and an error of
 * OWN_STATUSES must be documented, any other error falls to the operation's `default` (the error shape).
 */
export function contractViolation(method: string, pathname: string, status: number, contentType: string | null, text: string): string | null {
  const found = operationOf(method, pathname);
  if (!found) return null;
  const { template, op } = found;
  const where = `${method} ${template} -> ${status}`;
  const documented = op.responses[String(status)];
  if (!documented && (status < 400 || OWN_STATUSES.has(status))) return `${where}: status not documented`;
  const answer = documented ?? op.responses.default;
  const schema = answer?.content?.["application/json"]?.schema;
  if (!schema) {
    if (text !== "" && contentType?.includes("json")) return `${where}: documented without a body, answered ${text.slice(0, 200)}`;
    return null;
  }
  if (!contentType?.includes("json")) return null;
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return `${where}: not JSON: ${text.slice(0, 200)}`;
  }
  const key = `${where}${documented ? "" : " default"}`;
  let validate = compiled.get(key);
  if (!validate) {
    validate = ajv.compile({ ...schema, components: document.components });
    compiled.set(key, validate);
  }
  return validate(body) ? null : `${where}: ${ajv.errorsText(validate.errors)} in ${text.slice(0, 300)}`;
}
