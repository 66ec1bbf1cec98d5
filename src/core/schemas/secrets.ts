import { z } from "zod";
import { secretValue } from "../secret-schemas.js";
import { maskSecrets } from "../secrets.js";

/** Secrets become environment variables, so their names follow the environment variable rules. */
const secretName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/).max(255);

/** A secret's value is never quoted back (secret-schemas.ts), nor anything sent where it belongs. */
export const secretSchema = z.object({ name: secretName, value: secretValue(z.string().max(65_536)) });

export const secretsSchema = z
  .array(secretSchema)
  .max(200)
  .superRefine((secrets, ctx) => {
    const seen = new Set<string>();
    secrets.forEach((s, i) => {
      if (seen.has(s.name)) ctx.addIssue({ code: "custom", path: [i, "name"], input: s.name, message: `duplicate secret name '${s.name}'` });
      seen.add(s.name);
    });
  });

export const secretReferenceSchema = z.object({
  name: secretName,
  secret_name: z.string().min(1).max(253),
  secret_key: z.string().min(1).max(253),
});

export const secretReferencesSchema = z.array(secretReferenceSchema).max(200);
export type SecretReference = z.output<typeof secretReferenceSchema>;

const isSecret = (v: unknown): v is { name: string; value: string } =>
  typeof v === "object" && v !== null && typeof (v as { name?: unknown }).name === "string" && typeof (v as { value?: unknown }).value === "string";

/** Stored secrets (JSON written by core): [{ name, value: ciphertext }]. */
export const readStoredSecrets = (json: unknown): { name: string; value: string }[] =>
  Array.isArray(json) ? json.filter(isSecret).map((s) => ({ name: s.name, value: s.value })) : [];

export const readSecretReferences = (json: unknown): SecretReference[] =>
  Array.isArray(json) ? json.flatMap((r) => secretReferenceSchema.safeParse(r).data ?? []) : [];

/** What faces may show of stored secrets: names, values masked. Never the plain value. */
export const maskedSecrets = (json: unknown) => maskSecrets(readStoredSecrets(json));
