import { z } from "zod";
import { describe, expect, it } from "vitest";
import { quotable, secretsSent, secretValue } from "../../src/core/secret-schemas.js";
import { secretsSchema } from "../../src/core/schemas/secrets.js";
import { deploymentCreateSchema, deploymentUpdateSchema, revisionCreateSchema } from "../../src/core/schemas/deployment.js";
import { listenerCreateSchema } from "../../src/core/listeners.js";

describe("quotable: what a 422 may quote of an input", () => {
  it("never a secret, what lies inside one, or what lies above one, through wrappers, unions, pipes and records", () => {
    const token = secretValue(z.string());
    const schema = z.object({
      plain: z.string().nullish(),
      config: z.object({ deep: z.union([z.number(), z.object({ token })]).optional() }).nullish(),
      byName: z.record(z.string(), z.string().pipe(token)).optional(),
      list: z.array(z.lazy(() => z.object({ token }))).max(3),
    });
    expect(quotable(schema, [], "a string body")).toBe(false);
    expect(quotable(schema, ["config"], "x")).toBe(false);
    expect(quotable(schema, ["config", "deep"], 5)).toBe(false);
    expect(quotable(schema, ["config", "deep", "token"], "s")).toBe(false);
    expect(quotable(schema, ["byName", "A"], "s")).toBe(false);
    expect(quotable(schema, ["list", 0, "token", "more"], "s")).toBe(false);
    expect(quotable(schema, ["plain"], "name")).toBe(true);
    // An unknown field holds nothing the schema knows, but a list or an object may be a misplaced secret.
    expect(quotable(schema, ["unknown"], 7)).toBe(true);
    expect(quotable(schema, ["plain"], { token: "s" })).toBe(false);
    expect(quotable(schema, ["plain"], ["s"])).toBe(false);
  });

  it("knows where the deployment bodies keep their secrets; bodies without secrets are quoted in full", () => {
    for (const schema of [deploymentCreateSchema, deploymentUpdateSchema, revisionCreateSchema]) {
      expect(quotable(schema, [], [{ secrets: [] }])).toBe(false);
      expect(quotable(schema, ["secrets"], {})).toBe(false);
      expect(quotable(schema, ["secrets", 0, "value"], 5)).toBe(false);
      expect(quotable(schema, ["secret_references", 0, "secret_key"], "k")).toBe(true);
      expect(quotable(schema, ["source_config", "resource_spec", "labels"], "x")).toBe(true);
    }
    expect(quotable(secretsSchema, [0, "name"], "NAME")).toBe(true);
    expect(quotable(listenerCreateSchema, [], [{ a: 1 }])).toBe(true);
  });

  it("nor a plain string that holds a secret value sent elsewhere in the body", () => {
    const body = { name: "x", secret_references: ['{"secrets":[{"value":"hunter2-and-more"}]}'], secrets: [{ name: "A", value: "hunter2-and-more" }] };
    const sent = secretsSent(deploymentCreateSchema, body);
    expect(sent).toEqual(["hunter2-and-more"]);
    expect(quotable(deploymentCreateSchema, ["secret_references", 0], body.secret_references[0], sent)).toBe(false);
    expect(quotable(deploymentCreateSchema, ["name"], "x", sent)).toBe(true);
    // Values of the wrong type where secrets go are not taken for secrets, and lists of wrong shapes are walked safely.
    expect(secretsSent(deploymentCreateSchema, { secrets: [{ value: 5 }, "loose", [{ value: "nested" }]] })).toEqual([]);
    expect(secretsSent(deploymentCreateSchema, [{ secrets: [{ value: "in a list" }] }])).toEqual([]);
  });
});
