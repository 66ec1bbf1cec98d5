import { CoreError } from "./errors.js";

/** Prisma's known request errors, recognised by code without importing the runtime's classes. */
const hasCode = (err: unknown, code: string) =>
  typeof err === "object" && err !== null && "code" in err && (err as { code: unknown }).code === code;

/** A unique constraint was violated (P2002). */
export const isUniqueViolation = (err: unknown) => hasCode(err, "P2002");

/** The record to update or delete does not exist (P2025). */
export const isRecordMissing = (err: unknown) => hasCode(err, "P2025");

/**
 * The name of the foreign key a write violated (SQLSTATE 23503); null for any other error. Reads a
 * Prisma error, its driver adapter error or a raw pg error, at any depth of cause.
 */
export function violatedForeignKey(err: unknown, depth = 0): string | null {
  if (typeof err !== "object" || err === null || depth > 5) return null;
  const e = err as Record<string, unknown>;
  if (e.kind === "ForeignKeyConstraintViolation" || e.originalCode === "23503" || e.code === "23503") {
    const named = typeof e.constraint === "string" ? e.constraint : (e.constraint as { index?: unknown } | undefined)?.index;
    if (typeof named === "string") return named;
    const message = typeof e.originalMessage === "string" ? e.originalMessage : typeof e.message === "string" ? e.message : "";
    const quoted = /violates foreign key constraint "([^"]+)"/.exec(message)?.[1];
    if (quoted) return quoted;
  }
  const meta = e.meta as { driverAdapterError?: unknown } | undefined;
  return violatedForeignKey(e.cause, depth + 1) ?? violatedForeignKey(meta?.driverAdapterError, depth + 1);
}

/**
 * Whether err, or an error it wraps at any depth (its cause, a Prisma error's driver adapter error),
 * passes `test`: Prisma errors, driver adapter errors and raw pg errors alike.
 */
function anyWrapped(err: unknown, test: (e: Record<string, unknown>) => boolean, depth = 0): boolean {
  if (typeof err !== "object" || err === null || depth > 5) return false;
  const e = err as Record<string, unknown>;
  if (test(e)) return true;
  const meta = e.meta as { driverAdapterError?: unknown } | undefined;
  return anyWrapped(e.cause, test, depth + 1) || anyWrapped(meta?.driverAdapterError, test, depth + 1);
}

/** Whether one of the error's codes (its own, the database's original, the driver adapter's kind) is in `codes`. */
const codeIn = (e: Record<string, unknown>, codes: ReadonlySet<string>) =>
  [e.code, e.originalCode, e.kind].some((code) => typeof code === "string" && codes.has(code));

/**
 * Prisma's codes for "cannot reach / lost / timed out waiting for" the database. P2028: a transaction
 * could not start (or finish) in time, every pooled connection busy: an overload a retry gets past.
 */
const PRISMA_UNAVAILABLE = new Set(["P1001", "P1002", "P1008", "P1017", "P2024", "P2028"]);
/** Driver adapter error kinds that mean the connection, not the query, failed. */
const ADAPTER_UNAVAILABLE = new Set(["DatabaseNotReachable", "ConnectionClosed", "SocketTimeout", "TooManyConnections"]);
/**
 * SQLSTATEs of a lost or refused connection (admin/crash shutdown, cannot connect now, too many
 * connections) or of a statement the server cancelled past its bound (statement_timeout: a database
 * too slow to answer in time, src/db/client.ts).
 */
const SQLSTATE_UNAVAILABLE = new Set(["57P01", "57P02", "57P03", "53300", "57014"]);
const SOCKET_UNAVAILABLE = new Set(["ECONNREFUSED", "ECONNRESET", "ETIMEDOUT", "EPIPE", "ENOTFOUND", "EAI_AGAIN", "EHOSTUNREACH"]);
/** pg's own: a connection lost, none free or opened in time (connectionTimeoutMillis), no answer in time (query_timeout). */
const PG_MESSAGES = /Connection terminated|timeout exceeded when trying to connect|connection error and is not queryable|Query read timeout/i;

/**
 * True when err (a Prisma error, a driver adapter error or a raw pg error, at any depth of cause)
 * says the database connection failed rather than the query: such requests answer 503 with
 * Retry-After, as the pool reconnects on its own. A FATAL severity always ends the session.
 */
export function isDatabaseUnavailable(err: unknown): boolean {
  return anyWrapped(err, (e) => {
    const code = typeof e.code === "string" ? e.code : typeof e.originalCode === "string" ? e.originalCode : "";
    if (PRISMA_UNAVAILABLE.has(code) || SQLSTATE_UNAVAILABLE.has(code) || SOCKET_UNAVAILABLE.has(code)) return true;
    if (code.startsWith("08")) return true; // SQLSTATE class 08: connection exception
    if (typeof e.kind === "string" && ADAPTER_UNAVAILABLE.has(e.kind)) return true;
    if (e.severity === "FATAL") return true;
    return typeof e.message === "string" && PG_MESSAGES.test(e.message) && !(e instanceof CoreError);
  });
}

/**
 * SQLSTATEs of a server that answers but refuses the connection for good: the database does not
 * exist (3D000), the role or its password is not accepted (28000, 28P01). Waiting changes nothing.
 */
const SQLSTATE_REFUSED_FOR_GOOD = new Set(["3D000", "28000", "28P01"]);

/** Whether err (at any depth of cause) is a connection the server refuses for good (SQLSTATE_REFUSED_FOR_GOOD). */
export const isRefusedForGood = (err: unknown): boolean => anyWrapped(err, (e) => codeIn(e, SQLSTATE_REFUSED_FOR_GOOD));

/** How long both faces tell a client to wait before retrying when the database is lost (Retry-After). */
export const UNAVAILABLE_RETRY_AFTER_SECONDS = 1;

/**
 * Of those, a database that answers too slowly rather than not at all: a transaction that could not
 * start or finish in time (P2028: every connection busy, or a row lock held by another past the
 * transaction's bound), a statement past its bound (57014), no answer within pg's or Prisma's wait.
 */
const TIMED_OUT_CODES = new Set(["P2028", "P1008", "57014"]);
const TIMED_OUT_MESSAGES = /timeout exceeded when trying to connect|Query read timeout/i;

const isTimedOut = (err: unknown): boolean =>
  anyWrapped(err, (e) => codeIn(e, TIMED_OUT_CODES) || (typeof e.message === "string" && TIMED_OUT_MESSAGES.test(e.message)));

/**
 * A lost database as the CoreError both faces answer with (503 + Retry-After, SERVICE_UNAVAILABLE),
 * saying whether it did not answer in time (busy, or a lock held long) or could not be reached.
 */
export const unavailableAsCoreError = (err: unknown): unknown => {
  if (!isDatabaseUnavailable(err)) return err;
  return new CoreError("UNAVAILABLE", isTimedOut(err) ? "The database did not answer in time; retry shortly." : "The database is unavailable; retry shortly.");
};

/** SQLSTATEs (and Prisma's, the driver adapter's names) of a write that met another's: a conflict, a deadlock, a wait cut short. */
const CONFLICT_CODES = new Set(["40001", "40P01", "55P03", "57014", "P2034", "TransactionWriteConflict"]);

/** Whether err (at any depth of cause) is a write that met another's: a serialization failure, a deadlock, a lock or statement timeout. */
const isWriteConflict = (err: unknown): boolean => anyWrapped(err, (e) => codeIn(e, CONFLICT_CODES));

/**
 * Whether err says nothing about the work that met it, so that doing it again may well succeed: the
 * database was lost (isDatabaseUnavailable), or the write met another's (isWriteConflict).
 */
export const isRetryableDatabaseError = (err: unknown): boolean => isDatabaseUnavailable(err) || isWriteConflict(err);
