/**
 * GraphQL inputs are camelCase; core's zod schemas take REST's snake_case bodies. One rule maps
 * both ways, so that userErrors name the field the client typed: keys are converted, except inside
 * the subtrees below, which SPEC.md already spells as Kubernetes does (camelCase) or which are free
 * maps (labels, annotations); those pass through verbatim, and so does everything in them.
 */
const VERBATIM = new Set(["labels", "annotations", "volumes", "volume_mounts", "init_containers", "sidecars", "image_pull_secrets"]);

export const snake = (name: string) => name.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
export const camel = (name: string) => name.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());

/** REST field names as GraphQL says them in prose: "a, b and c" (or "or c"). */
export const camelList = (fields: readonly string[], and: "and" | "or") =>
  fields.length < 2 ? fields.map(camel).join("") : `${fields.slice(0, -1).map(camel).join(", ")} ${and} ${camel(fields.at(-1) ?? "")}`;

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === "object" && v !== null && !Array.isArray(v) && !(v instanceof Date);

/** A GraphQL input value as core's REST-shaped body. Nulls stay (core treats null as "not given"). */
export function toRestBody(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(toRestBody);
  if (!isPlainObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [key, inner] of Object.entries(value)) {
    const name = snake(key);
    out[name] = VERBATIM.has(name) ? inner : toRestBody(inner);
  }
  return out;
}

/**
 * A core validation location as the GraphQL path of the argument that carried it:
 * ["body","source_config","repo_url"] → ["input","sourceConfig","repoUrl"];
 * ["path","deployment_id"] → the id argument's name; ["query","first"] → ["first"].
 */
export function fieldPath(loc: readonly (string | number)[], names: { input?: string; path?: Record<string, string> } = {}): string[] {
  const [where, ...rest] = loc;
  if (where === "path") {
    const name = String(rest[0] ?? "id");
    return [names.path?.[name] ?? camel(name)];
  }
  const out: string[] = where === "body" ? [names.input ?? "input"] : [];
  let verbatim = false;
  for (const part of rest) {
    if (typeof part === "number") {
      out.push(String(part));
      continue;
    }
    out.push(verbatim ? part : camel(part));
    if (VERBATIM.has(part)) verbatim = true;
  }
  return out;
}
