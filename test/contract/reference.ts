import { readFileSync } from "node:fs";
import { Ajv2020, type ValidateFunction } from "ajv/dist/2020.js";
import addFormats from "ajv-formats";
import { expect } from "vitest";
import type { TestResponse } from "../support/app.js";

/**
 * The reference contract (the real control plane's OpenAPI 3.1 document, a copy kept beside this
 * file) as JSON Schema validators: answers are checked against the schema of their operation and
 * status, requests the tests send against the operation's request body.
 */

interface Operation {
  requestBody?: { content: { "application/json": { schema: object } } };
  responses: Record<string, { content?: { "application/json"?: { schema: object } } }>;
}

const document = JSON.parse(readFileSync(new URL("./openapi-reference.json", import.meta.url), "utf8")) as {
  paths: Record<string, Record<string, Operation>>;
  components: object;
};

// OpenAPI keeps keywords JSON Schema does not know (include_in_schema): not strict.
const ajv = new Ajv2020({ strict: false, allErrors: true });
(addFormats as unknown as (a: Ajv2020) => void)(ajv);
const compiled = new Map<string, ValidateFunction>();

/** A schema of the document, its `#/components/...` references resolved within the document. */
function validator(key: string, schema: object): ValidateFunction {
  let validate = compiled.get(key);
  if (!validate) {
    validate = ajv.compile({ ...schema, components: document.components });
    compiled.set(key, validate);
  }
  return validate;
}

function operation(method: string, template: string): Operation {
  const op = document.paths[template]?.[method.toLowerCase()];
  if (!op) throw new Error(`the reference has no operation ${method} ${template}`);
  return op;
}

/** Every operation of the reference under these path prefixes, as "METHOD template". */
export function operationsUnder(...prefixes: string[]): string[] {
  return Object.entries(document.paths).flatMap(([template, ops]) =>
    prefixes.some((p) => template.startsWith(p)) ? Object.keys(ops).map((m) => `${m.toUpperCase()} ${template}`) : [],
  );
}

/** Plain errors are `{detail: string}` (SPEC.md's Errors); the reference documents only its 422. */
const plainError = ajv.compile({ type: "object", required: ["detail"], properties: { detail: { type: "string" } }, additionalProperties: false });

/**
 * Checks an answer of `METHOD template` against the reference: a documented status against its
 * schema, an undocumented error status against the plain error shape. A success status the
 * reference does not document is a failure (a 201 where it says 200).
 */
export function expectAnswer(method: string, template: string, res: TestResponse): void {
  const op = operation(method, template);
  const where = `${method} ${template} -> ${res.status} ${res.text.slice(0, 300)}`;
  const documented = op.responses[String(res.status)];
  if (!documented) {
    expect(res.status >= 400, `${where}: status not in the reference`).toBe(true);
    expect(plainError(res.body), `${where}: ${ajv.errorsText(plainError.errors)}`).toBe(true);
    return;
  }
  const schema = documented.content?.["application/json"]?.schema;
  if (!schema) {
    expect(res.text, `${where}: the reference documents no body`).toBe("");
    return;
  }
  const validate = validator(`${method} ${template} ${res.status}`, schema);
  expect(validate(res.body), `${where}: ${ajv.errorsText(validate.errors)}`).toBe(true);
}

/** A request body the tests send is one the reference allows (so the service accepting it is the contract's point). */
export function expectValidRequest(method: string, template: string, body: unknown): void {
  const schema = operation(method, template).requestBody?.content["application/json"].schema;
  if (!schema) throw new Error(`${method} ${template} takes no body in the reference`);
  const validate = validator(`${method} ${template} request`, schema);
  expect(validate(body), `${method} ${template} request: ${ajv.errorsText(validate.errors)}`).toBe(true);
}
