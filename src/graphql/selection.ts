import type { FieldNode, GraphQLResolveInfo, SelectionSetNode } from "graphql";

type Info = Pick<GraphQLResolveInfo, "fieldNodes" | "fragments">;

/** The fields a selection set asks for, through inline fragments and named fragments. */
function* fieldsOf(set: SelectionSetNode | undefined, fragments: Info["fragments"]): Generator<FieldNode> {
  for (const selection of set?.selections ?? []) {
    if (selection.kind === "Field") yield selection;
    else if (selection.kind === "InlineFragment") yield* fieldsOf(selection.selectionSet, fragments);
    else yield* fieldsOf(fragments[selection.name.value]?.selectionSet, fragments);
  }
}

/** selectedNames' answers by field, then path: the same nodes for every item of a list, and for every run of a compiled document. */
const namesByField = new WeakMap<readonly FieldNode[], Map<string, ReadonlySet<string>>>();

/**
 * The names of the fields the resolving field's selection asks for below the fields named by `path`
 * (e.g. edges, node): a resolver plans its read from them (one statement that also reads what the
 * children will show). Conservative: a field under @skip or @include counts as asked for.
 * Remembered per field and path: a compiled document hands its resolvers the same nodes every run,
 * so a page plans its read without walking its selection again.
 */
export function selectedNames(info: Info, path: readonly string[]): ReadonlySet<string> {
  let byPath = namesByField.get(info.fieldNodes);
  if (!byPath) namesByField.set(info.fieldNodes, (byPath = new Map()));
  const key = path.join(".");
  let names = byPath.get(key);
  if (!names) byPath.set(key, (names = namesBelow(info, path)));
  return names;
}

function namesBelow(info: Info, path: readonly string[]): Set<string> {
  let level: FieldNode[] = [...info.fieldNodes];
  for (const name of path) {
    level = level.flatMap((field) => [...fieldsOf(field.selectionSet, info.fragments)].filter((f) => f.name.value === name));
  }
  return new Set(level.flatMap((field) => [...fieldsOf(field.selectionSet, info.fragments)].map((f) => f.name.value)));
}

/** Whether the selection below `path` asks for any of `names` (see selectedNames). */
export function selectsAny(info: Info, path: readonly string[], names: ReadonlySet<string>): boolean {
  for (const name of selectedNames(info, path)) if (names.has(name)) return true;
  return false;
}

/** selectsOnly's answers by field (the same nodes for every item of a list, and for every run of a cached document). */
const onlyAnswers = new WeakMap<ReadonlySet<string>, WeakMap<readonly FieldNode[], boolean>>();

/**
 * Whether the resolving field's own selection asks for nothing outside `names` (see selectedNames).
 * Remembered per field: a field of a list's items asks it once, not once per item.
 */
export function selectsOnly(info: Info, names: ReadonlySet<string>): boolean {
  let byField = onlyAnswers.get(names);
  if (!byField) onlyAnswers.set(names, (byField = new WeakMap()));
  let answer = byField.get(info.fieldNodes);
  if (answer === undefined) {
    answer = [...selectedNames(info, [])].every((name) => names.has(name));
    byField.set(info.fieldNodes, answer);
  }
  return answer;
}
