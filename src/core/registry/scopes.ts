import { isRepositoryName, isWithin } from "./reference.js";

/**
 * Scopes of the Docker Registry v2 token protocol: what a client asks the token server for
 * (`repository:team/app:push,pull`), and what a token grants (its `access` claim). Pure.
 */

export type RegistryAction = "pull" | "push";

export interface Access {
  type: "repository";
  name: string;
  actions: RegistryAction[];
}

export interface RequestedScope {
  type: string;
  name: string;
  actions: string[];
}

/**
 * Parses the `scope` query parameters: each is `type[(class)]:name:actions`, and one parameter may
 * hold several separated by spaces. The name may itself hold a colon (a host with a port in other
 * types), so the actions are after the last colon and the type before the first.
 */
export function parseScopes(values: string[]): RequestedScope[] | { error: string } {
  const scopes: RequestedScope[] = [];
  for (const text of values.flatMap((v) => v.split(" ")).filter((s) => s !== "")) {
    const first = text.indexOf(":");
    const last = text.lastIndexOf(":");
    if (first === -1 || first === last) return { error: `scope '${text}' is not type:name:actions` };
    const type = text.slice(0, first).replace(/\([a-z0-9]+\)$/, "");
    const name = text.slice(first + 1, last);
    const actions = text.slice(last + 1).split(",").filter((a) => a !== "");
    if (!/^[a-z0-9]+$/.test(type) || name === "") return { error: `scope '${text}' is not type:name:actions` };
    scopes.push({ type, name, actions });
  }
  return scopes;
}

/**
 * What a token may grant: for every requested scope on a repository under `prefix`, the requested
 * actions among `allowed`; nothing for any other scope. As the token protocol has it, a scope that is
 * not granted is left out of the token (the registry then refuses that operation), so that a push
 * that also tries to mount a layer from another repository falls back to uploading it.
 */
export function grant(requested: RequestedScope[], prefix: string, allowed: readonly RegistryAction[]): Access[] {
  const byName = new Map<string, Set<RegistryAction>>();
  for (const scope of requested) {
    if (scope.type !== "repository" || !isRepositoryName(scope.name) || !isWithin(scope.name, prefix)) continue;
    const wanted = scope.actions.includes("*") ? allowed : allowed.filter((a) => scope.actions.includes(a));
    if (wanted.length === 0) continue;
    const set = byName.get(scope.name) ?? new Set<RegistryAction>();
    for (const action of wanted) set.add(action);
    byName.set(scope.name, set);
  }
  return [...byName].map(([name, actions]) => ({ type: "repository", name, actions: [...actions].sort() }));
}
