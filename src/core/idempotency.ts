import { AsyncLocalStorage } from "node:async_hooks";
import { createHmac } from "node:crypto";
import { setTimeout as sleep } from "node:timers/promises";
import { z } from "zod";
import type { CoreDeps } from "./context.js";
import type { Tenant } from "./auth.js";
import { CoreError, invalid, type ValidationIssue } from "./errors.js";
import type { Tx } from "./publish.js";
import { toFastApiIssue } from "./validation.js";

/** A POST as the client sent it; only its keyed fingerprint is stored. */
export interface IdempotentRequest {
  method: string;
  /** Path and query string. */
  path: string;
  body: string;
}

/** The answer the first request gave, kept to replay. */
export interface StoredAnswer {
  status: number;
  contentType: string | null;
  body: string;
}

/**
 * A key a request holds: its row as this claim made it. A retry that takes a stale claim over makes
 * another (a later claimedAt), which the first request's answer, release or change never touch.
 */
export interface HeldKey {
  key: string;
  claimedAt: Date;
}

/** `fresh`: this caller holds the key and must run the request (run), then `complete` or `release` it. */
export type Claim = ({ kind: "fresh" } & HeldKey) | ({ kind: "replay" } & StoredAnswer);

export interface IdempotencyOptions {
  /** How long an answer is kept (payment APIs keep them a day). */
  ttlMs?: number;
  /** How long a duplicate waits for the first request, still running, to finish before a 409. */
  waitMs?: number;
  /** A first request still unfinished after this is taken to have died with its process. */
  staleMs?: number;
}

const HEADER_LOC = ["header", "idempotency-key"];
const keySchema = z
  .string()
  .min(1)
  .max(255)
  .regex(/^[\x21-\x7e]+$/);

/** When a duplicate that gave up waiting for the first request is told to retry (Retry-After). */
const IN_PROGRESS_RETRY_SECONDS = 5;

/** A key's row as a duplicate reads it, judged by the database's clock. */
interface HeldRow {
  fingerprint: string;
  status: number | null;
  content_type: string | null;
  response_body: string | null;
  created_at: Date;
  applied: boolean;
  expired: boolean;
  stale: boolean;
}

/** The key of the request being run (IdempotencyService.run), for markApplied. */
const running = new AsyncLocalStorage<{ workspaceId: string } & HeldKey>();

/** Expired keys are swept at most this often, by whichever claim comes along. */
const PURGE_EVERY_MS = 60_000;

/**
 * Idempotency-Key for creates, as payment APIs do it: the first request with a key runs and its
 * answer is stored; a retry with the same key and the same request gets that answer again and
 * changes nothing; the same key with another request (or from another caller) is a 422. Keys are per workspace. Concurrent
 * duplicates meet at the primary key (workspace_id, key): one inserts and runs, the others wait
 * for its answer (or get a 409 if it takes too long).
 */
export class IdempotencyService {
  private readonly ttlMs: number;
  private readonly waitMs: number;
  private readonly staleMs: number;
  private lastPurge = 0;

  constructor(
    /** `data` for a caller's keys; `prisma` only to purge expired keys of every workspace. */
    private readonly deps: Pick<CoreDeps, "prisma" | "data">,
    /** Fingerprints are keyed: a plain hash of a body would let anyone with the table guess secret values. */
    private readonly fingerprintKey: Buffer,
    options: IdempotencyOptions = {},
  ) {
    this.ttlMs = options.ttlMs ?? 24 * 60 * 60_000;
    this.waitMs = options.waitMs ?? 10_000;
    this.staleMs = options.staleMs ?? 60_000;
  }

  async claim(tenant: Tenant, rawKey: string, request: IdempotentRequest): Promise<Claim> {
    const key = parseKey(rawKey);
    const fingerprint = this.fingerprint(tenant, request);
    await this.purgeExpired();
    const { prisma } = this.deps;
    const workspaceId = tenant.workspaceId;
    const deadline = Date.now() + this.waitMs;
    // The database's clock dates a claim and says when it is stale: replicas' own clocks may disagree,
    // and one running ahead would take over claims still running elsewhere.
    for (let pause = 10; ; pause = Math.min(pause * 2, 200)) {
      const [claimed] = await prisma.$queryRaw<{ created_at: Date }[]>`
        INSERT INTO idempotency_keys (workspace_id, key, fingerprint, created_at, expires_at)
        VALUES (${workspaceId}::uuid, ${key}, ${fingerprint}, now(), now() + ${this.ttlMs}::double precision * interval '1 millisecond')
        ON CONFLICT (workspace_id, key) DO NOTHING
        RETURNING created_at`;
      if (claimed) return { kind: "fresh", key, claimedAt: claimed.created_at };
      const [row] = await prisma.$queryRaw<HeldRow[]>`
        SELECT fingerprint, status, content_type, response_body, created_at, applied_at IS NOT NULL AS applied,
               expires_at <= now() AS expired, created_at < now() - ${this.staleMs}::double precision * interval '1 millisecond' AS stale
        FROM idempotency_keys WHERE workspace_id = ${workspaceId}::uuid AND key = ${key}`;
      if (!row) continue; // released or expired in between: try to insert again
      if (row.expired) {
        await prisma.$executeRaw`DELETE FROM idempotency_keys WHERE workspace_id = ${workspaceId}::uuid AND key = ${key} AND expires_at <= now()`;
        continue;
      }
      if (row.fingerprint !== fingerprint) throw mismatch(rawKey);
      if (row.status !== null) return { kind: "replay", status: row.status, contentType: row.content_type, body: row.response_body ?? "" };
      if (row.stale) {
        // Its server stopped after the change committed, before it kept the answer: never twice.
        if (row.applied) throw answerLost();
        // Taken over only while still unapplied: a change committing meanwhile (whose row lock this
        // waits for) keeps its claim, and the next look at it says its answer was lost.
        await prisma.$executeRaw`
          DELETE FROM idempotency_keys
          WHERE workspace_id = ${workspaceId}::uuid AND key = ${key} AND created_at = ${row.created_at} AND status IS NULL AND applied_at IS NULL`;
        continue;
      }
      if (Date.now() + pause > deadline) {
        throw new CoreError("CONFLICT", "A request with this Idempotency-Key is still being processed; retry it later.", [], IN_PROGRESS_RETRY_SECONDS);
      }
      await sleep(pause);
    }
  }

  /**
   * Runs a fresh claim's request. A change it commits through commitThenPublish marks the key
   * applied in the change's own transaction (markApplied): should its server stop before the answer
   * is kept, a retry then knows the change was made, and does not make it again.
   */
  run<T>(tenant: Tenant, held: HeldKey, request: () => Promise<T>): Promise<T> {
    return running.run({ workspaceId: tenant.workspaceId, ...held }, request);
  }

  /** Stores the answer of a fresh claim, for its retries (unless a retry took the key over meanwhile). */
  async complete(tenant: Tenant, { key, claimedAt }: HeldKey, answer: StoredAnswer): Promise<void> {
    await this.deps.data(tenant).idempotencyKey.updateMany({
      where: { key, createdAt: claimedAt, status: null },
      data: { status: answer.status, contentType: answer.contentType, responseBody: answer.body },
    });
  }

  /**
   * Gives a fresh claim up (the request failed on the server's side, or its answer is not to be kept),
   * so that a retry runs again; unless its change was made (markApplied): its retries are then told
   * that its answer was lost, as they would be after its server stopped.
   */
  async release(tenant: Tenant, held: HeldKey): Promise<void> {
    const db = this.deps.data(tenant);
    const { count } = await db.idempotencyKey.deleteMany({ where: { key: held.key, createdAt: held.claimedAt, status: null, appliedAt: null } });
    if (count > 0) return;
    const lost = answerLost();
    await this.complete(tenant, held, { status: 409, contentType: "application/json", body: JSON.stringify({ detail: lost.message }) });
  }

  /**
   * The caller is part of the request: another user or key of the workspace sending the same key
   * and body is refused as a different request rather than handed the first caller's answer.
   */
  private fingerprint(tenant: Tenant, request: IdempotentRequest): string {
    return createHmac("sha256", this.fingerprintKey)
      .update(`${tenant.actor}\n${request.method.toUpperCase()}\n${request.path}\n${canonicalBody(request.body)}`)
      .digest("hex");
  }

  private async purgeExpired() {
    const now = Date.now();
    if (now - this.lastPurge < PURGE_EVERY_MS) return;
    this.lastPurge = now;
    await this.deps.prisma.$executeRaw`DELETE FROM idempotency_keys WHERE expires_at <= now()`;
  }
}

/**
 * Within a change's transaction (commitThenPublish): when the change is made by a request with an
 * Idempotency-Key (IdempotencyService.run), its key is marked applied, committing with the change.
 */
export async function markApplied(tx: Tx): Promise<void> {
  const held = running.getStore();
  if (!held) return;
  const marked = await tx.$executeRaw`
    UPDATE idempotency_keys SET applied_at = COALESCE(applied_at, now())
    WHERE workspace_id = ${held.workspaceId}::uuid AND key = ${held.key} AND created_at = ${held.claimedAt} AND status IS NULL`;
  // The claim went stale while this request waited, and a retry took the key over and runs it: the
  // change rolls back here rather than be made twice.
  if (marked === 0) throw takenOver();
}

const takenOver = () =>
  new CoreError("CONFLICT", "A retry with this Idempotency-Key took the request over while it was still running (after 60 s): it was not carried out here.");

const answerLost = () =>
  new CoreError(
    "CONFLICT",
    "The request with this Idempotency-Key was carried out, but its answer was lost (its server stopped or failed before answering); it is not run again. Look its result up instead.",
  );

function parseKey(raw: string): string {
  const result = keySchema.safeParse(raw, { reportInput: true });
  if (result.success) return result.data;
  throw invalid(result.error.issues.map((issue) => ({ ...toFastApiIssue(issue, "body"), loc: HEADER_LOC })));
}

function mismatch(key: string) {
  const issue: ValidationIssue = {
    loc: HEADER_LOC,
    msg: "Value error, this Idempotency-Key was already used with a different request",
    type: "value_error",
    input: key,
  };
  return invalid([issue]);
}

/** The same JSON with keys in another order or other spacing is the same request. */
function canonicalBody(body: string): string {
  if (body.trim() === "") return "";
  try {
    return JSON.stringify(sortKeys(JSON.parse(body)));
  } catch {
    return body;
  }
}

function sortKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((k) => [k, sortKeys((value as Record<string, unknown>)[k])]),
    );
  }
  return value;
}
