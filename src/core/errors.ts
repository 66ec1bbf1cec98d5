/** One problem with a request, in FastAPI's shape: what REST clients already parse. */
export interface ValidationIssue {
  loc: (string | number)[];
  msg: string;
  type: string;
  input?: unknown;
  ctx?: Record<string, unknown>;
}

export type ErrorCode =
  | "VALIDATION"
  | "BAD_REQUEST"
  | "NOT_FOUND"
  | "CONFLICT"
  | "UNAUTHENTICATED"
  | "FORBIDDEN"
  | "PARTIAL"
  | "UNAVAILABLE"
  /** A body larger than the endpoint takes (413). */
  | "TOO_LARGE"
  /** A body of a type the endpoint does not take (415). */
  | "UNSUPPORTED_TYPE"
  /** Another service this one called (an OAuth provider) failed or did not answer: 502. */
  | "UPSTREAM"
  /** A live subscriber fell too far behind its feed and was ended (Backlog in feeds.ts): subscribe again. */
  | "SLOW_CONSUMER"
  /** The caller holds as many live subscriptions as it may (SubscriptionQuota): 429. */
  | "TOO_MANY_SUBSCRIPTIONS";

/** The errors core raises; each face maps them to its own shape (REST status + detail, GraphQL userErrors). */
export class CoreError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    /** For VALIDATION: every problem found, all at once. */
    readonly issues: ValidationIssue[] = [],
    /** How soon a retry may succeed, in seconds (REST's Retry-After), when that is known. */
    readonly retryAfterSeconds: number | null = null,
  ) {
    super(message);
    this.name = "CoreError";
  }
}

/**
 * An object that does not exist (or that the caller cannot see). `loc` names the input field that
 * referred to it when that was not the object the request is about (["body", "oauth_token_id"]):
 * GraphQL's userErrors name it; REST answers the message alone.
 */
export const notFound = (kind: string, id: string, loc?: ValidationIssue["loc"]) => {
  const message = `${kind} ID ${id} not found.`;
  return new CoreError("NOT_FOUND", message, loc ? [{ loc, type: "not_found", msg: message }] : []);
};
export const badRequest = (message: string) => new CoreError("BAD_REQUEST", message);
/**
 * A change that clashes with an existing object. `loc` names the input field whose value is taken
 * (["body", "name"]): GraphQL's userErrors name it; REST answers the message alone.
 */
export const conflict = (message: string, loc?: ValidationIssue["loc"]) =>
  new CoreError("CONFLICT", message, loc ? [{ loc, type: "conflict", msg: message }] : []);
export const invalid = (issues: ValidationIssue[]) =>
  new CoreError("VALIDATION", issues.map((i) => `${i.loc.join(".")}: ${i.msg}`).join("; "), issues);
