import { brandWithType, type ObjectRef } from "@pothos/core";
import { decodeGlobalID, encodeGlobalID } from "@pothos/plugin-relay";
import { notFound } from "../core/errors.js";
import { uuidsOnly } from "../core/batch-reads.js";
import type { Types } from "./builder.js";
import type { GraphQLContext } from "./context.js";

type NodeLoader<T> = (ctx: GraphQLContext, id: string) => Promise<T | null>;

/** How each node type is loaded by its REST id; every entity file registers its own. */
const loaders = new Map<string, { ref: ObjectRef<Types, object>; load: NodeLoader<object> }>();

export function registerNode<T extends object>(ref: ObjectRef<Types, T>, load: NodeLoader<T>): void {
  loaders.set(ref.name, { ref: ref as ObjectRef<Types, object>, load });
}

/** The REST id inside a global id of the given type, or null when the id is malformed or of another type. */
export function idOf(globalId: string, typename: string): string | null {
  const decoded = decode(globalId);
  return decoded && decoded.typename === typename ? decoded.id : null;
}

/**
 * The REST id a mutation acts on. An id that is malformed or of another type names nothing, so it
 * is refused as core refuses an unknown id: NOT_FOUND (a userError), never a malformed database query.
 */
export function requireId(globalId: string, typename: string): string {
  const id = idOf(globalId, typename);
  if (!id || uuidsOnly([id]).length === 0) throw notFound(typename, globalId);
  return id.toLowerCase();
}

export const globalIdOf = (typename: string, id: string) => encodeGlobalID(typename, id);

/**
 * A global id as the API gives it, or null. Only that spelling: another one of the same object (its
 * uuid in capitals, other base64) would be a second id for it in a client's cache, whose refetch
 * answered an id other than the one asked for.
 */
function decode(globalId: string): { typename: string; id: string } | null {
  let decoded;
  try {
    decoded = decodeGlobalID(globalId);
  } catch {
    return null;
  }
  return encodeGlobalID(decoded.typename, decoded.id) === globalId && decoded.id === decoded.id.toLowerCase() ? decoded : null;
}

/**
 * Any node by its global id; null when the id is malformed, of an unknown type, or names an object
 * the caller cannot see (another workspace's objects do not exist for it).
 */
export async function loadNode(ctx: GraphQLContext, globalId: string): Promise<object | null> {
  const decoded = decode(globalId);
  const entry = decoded && loaders.get(decoded.typename);
  if (!decoded || !entry) return null;
  const node = await entry.load(ctx, decoded.id);
  // The Node interface resolves a value's type from this brand.
  if (node) brandWithType(node, entry.ref);
  return node;
}
