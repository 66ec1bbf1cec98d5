import type { DocumentNode } from "graphql";
import type { YogaServerInstance } from "graphql-yoga";
import { LRUCache } from "lru-cache";

/**
 * yoga's parse cache, bounded by bytes as well as entries. Its default keeps 1,024 documents
 * whatever their size: 1,024 documents of a few thousand tokens each hold gigabytes of AST. Here
 * each document counts for its estimated heap (its tokens, each with its node and location), and the
 * least recently used go once the budget is spent. Validation results are cached by document
 * (weakly), so they go with it, as do graphql-jit's compiled queries.
 */

/** Heap per token of a parsed document: measured 340 (named fields) to 450 (one-letter fields) bytes. */
const BYTES_PER_TOKEN = 512;
/** What parsed documents may hold in all: some hundreds of dashboard queries. */
export const DOCUMENT_CACHE_BYTES = 64 * 1024 * 1024;
/** What cached parse errors may hold: each keeps its source text. */
export const ERROR_CACHE_BYTES = 8 * 1024 * 1024;
const MAX_ENTRIES = 1024;
const TTL_MS = 60 * 60_000;

function tokens(document: DocumentNode): number {
  let count = 0;
  for (let token = document.loc?.startToken ?? null; token; token = token.next) count++;
  return count;
}

export interface ParseCache {
  documents: LRUCache<string, DocumentNode>;
  errors: LRUCache<string, object>;
}

export function createParseCache(): ParseCache {
  return {
    documents: new LRUCache<string, DocumentNode>({
      max: MAX_ENTRIES,
      ttl: TTL_MS,
      maxSize: DOCUMENT_CACHE_BYTES,
      // Its text (UTF-16) and its AST; a document without locations counts by its text alone.
      sizeCalculation: (document, source) => source.length * 2 + Math.max(1, tokens(document)) * BYTES_PER_TOKEN,
    }),
    errors: new LRUCache<string, object>({
      max: MAX_ENTRIES,
      ttl: TTL_MS,
      maxSize: ERROR_CACHE_BYTES,
      sizeCalculation: (_error, source) => source.length * 2 + 1024,
    }),
  };
}

const caches = new WeakMap<object, ParseCache>();

/** Records which cache a server uses (for tests and diagnostics). */
export function registerParseCache(server: object, cache: ParseCache): void {
  caches.set(server, cache);
}

/** The parse cache of a GraphQL server made by createGraphQLServer. */
export function parseCacheOf(server: YogaServerInstance<never, never> | object): ParseCache {
  const cache = caches.get(server);
  if (!cache) throw new Error("not a server made by createGraphQLServer");
  return cache;
}
