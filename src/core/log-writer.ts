import type { Logger } from "../logger.js";
import type { Revision } from "../generated/prisma/client.js";
import type { RevisionStatus, Route } from "./revision-machine.js";
import type { CoreDeps } from "./context.js";
import { CLOSED_STATUSES } from "./log-queries.js";
import { violatedForeignKey } from "./prisma-errors.js";
import { type LogKind, type LogLevel } from "./schemas/logs.js";
import { readStoredSecrets } from "./schemas/secrets.js";
import { MASK, type SecretBox } from "./secrets.js";
import type { Tx } from "./transitions.js";
import type { PrismaClient } from "../db/client.js";
import { storableText } from "./text.js";

export interface NewLogLine {
  kind: LogKind;
  level: LogLevel;
  message: string;
}

/** The revision a line belongs to, as its event names it. */
export type LogTarget = Pick<Revision, "id" | "deploymentId" | "workspaceId">;

/** Longer messages are cut: a line is a line, not a file. */
export const MAX_MESSAGE_LENGTH = 16_384;
/** Lines one step may write; more are counted and left out, and a last line says so. */
export const MAX_STEP_LINES = 10_000;
/** Lines per statement when a step writes faster than the database takes them. */
const MAX_BATCH = 500;
/** Secret values shorter than this are not searched for in log lines: they would match everywhere. */
export const MIN_MASKED_LENGTH = 4;

/** What PostgreSQL text can hold, a line at most MAX_MESSAGE_LENGTH long (storableText). */
export const cleanMessage = (message: string): string => storableText(message, MAX_MESSAGE_LENGTH);

/**
 * Appends lines to a revision's logs in one statement (SQL function append_revision_logs: the
 * deployment's writers take turns, so the logs' order is the order lines were committed in), or
 * nothing once the revision's status is one of `closedStatuses`, or (given `leaseOwner`) once its
 * lease is not that worker's. Returns how many were written.
 */
export async function appendLines(
  db: PrismaClient | Tx,
  revisionId: string,
  lines: NewLogLine[],
  closedStatuses: readonly string[],
  leaseOwner: string | null = null,
): Promise<number> {
  if (lines.length === 0) return 0;
  const [row] = await db.$queryRaw<{ n: number }[]>`
    SELECT append_revision_logs(${revisionId}::uuid, ${lines.map((l) => l.kind)}::text[], ${lines.map((l) => l.level)}::text[],
      ${lines.map((l) => cleanMessage(l.message))}::text[], ${[...closedStatuses]}::text[], ${leaseOwner}::text) AS n`;
  return Number(row?.n ?? 0);
}

const BUILD_PHASE: ReadonlySet<RevisionStatus> = new Set(["CREATING", "QUEUED", "AWAITING_BUILD", "BUILDING", "CREATE_FAILED", "BUILD_FAILED"]);

/**
 * The log a status belongs to: a built revision's build log holds its creating, queueing and
 * building; its deploy log the rest. A revision with nothing to build (external_container) has only
 * a deploy log. A status that ends any phase (SKIPPED, INTERRUPTED) goes where the revision was.
 */
export function logKindOf(status: RevisionStatus, route: Route, from: RevisionStatus | null = null): LogKind {
  if (!route.build) return "deploy";
  if (status === "SKIPPED" || status === "INTERRUPTED" || status === "UNKNOWN") return from ? logKindOf(from, route) : "build";
  return BUILD_PHASE.has(status) ? "build" : "deploy";
}

/** The line a status change writes: its status and status_message, an error for a failure. */
export function statusLine(route: Route, from: RevisionStatus | null, to: RevisionStatus, message: string): NewLogLine {
  const level: LogLevel = to.endsWith("_FAILED") ? "ERROR" : to === "SKIPPED" || to === "INTERRUPTED" ? "WARNING" : "INFO";
  return { kind: logKindOf(to, route, from), level, message: message ? `[${to}] ${message}` : `[${to}]` };
}

/**
 * A revision's secret values, masked wherever they show in a line (plain, JSON-escaped or base64):
 * what a step writes may quote its environment. Opened from their ciphertext on first use.
 */
export class SecretMask {
  private forms: string[] | null = null;

  constructor(
    private readonly box: SecretBox,
    private readonly secretsJson: unknown,
  ) {}

  apply(text: string): string {
    this.forms ??= this.open();
    for (const form of this.forms) if (text.includes(form)) text = text.split(form).join(MASK);
    return text;
  }

  /** A JSON value (a step's findings) with every string in it masked as a line is, keys included. */
  applyToJson(value: unknown): unknown {
    if (typeof value === "string") return this.apply(value);
    if (Array.isArray(value)) return value.map((v) => this.applyToJson(v));
    if (value !== null && typeof value === "object") return Object.fromEntries(Object.entries(value).map(([k, v]) => [this.apply(k), this.applyToJson(v)]));
    return value;
  }

  private open(): string[] {
    const forms = new Set<string>();
    for (const { value } of readStoredSecrets(this.secretsJson)) {
      let plain: string;
      try {
        plain = this.box.open(value);
      } catch {
        continue; // sealed under a key this process lacks: it cannot have been written by it either
      }
      if (plain.length < MIN_MASKED_LENGTH) continue;
      forms.add(plain).add(JSON.stringify(plain).slice(1, -1)).add(Buffer.from(plain).toString("base64"));
    }
    // Longest first, so that a secret containing another is masked whole.
    return [...forms].sort((a, b) => b.length - a.length);
  }
}

/** revision_logs.revision_id's foreign key (ON DELETE CASCADE): a line's revision exists when it commits. */
const REVISION_KEY = "revision_logs_revision_id_fkey";

/** Writes log lines for the pipeline, and tells subscribers (across replicas) that there are new ones. */
export class LogWriter {
  constructor(
    private readonly deps: CoreDeps,
    private readonly logger: Logger,
  ) {}

  /**
   * Appends lines unless the revision has ended, or (given `leaseOwner`) its lease is another
   * worker's; never throws (a lost line must not fail a step).
   */
  async append(target: LogTarget, lines: NewLogLine[], leaseOwner: string | null = null): Promise<number> {
    let written = 0;
    try {
      written = await appendLines(this.deps.prisma, target.id, lines, CLOSED_STATUSES, leaseOwner);
    } catch (err) {
      // The revision was deleted (with its deployment) while these were written: append_revision_logs
      // found it, and its insert's key check waited for the deletion to commit. Its lines went with
      // it, as these would have; nothing is lost that was meant to stay.
      if (violatedForeignKey(err) === REVISION_KEY) {
        this.logger.debug({ revision_id: target.id, lines: lines.length }, "logs: the revision was deleted while its lines were written; they went with it");
        return 0;
      }
      this.logger.warn({ err, revision_id: target.id, lines: lines.length }, "logs: could not write log lines; they are lost");
      return 0;
    }
    if (written > 0) {
      for (const kind of new Set(lines.map((l) => l.kind))) {
        await this.deps.events.publish({ type: "revision.logs", workspaceId: target.workspaceId, deploymentId: target.deploymentId, revisionId: target.id, kind });
      }
    }
    return written;
  }

  /**
   * A log for one step of a revision: lines go to `kind`, with the revision's secret values masked,
   * while the revision's lease is `leaseOwner`'s (the worker running the step).
   */
  stepLog(revision: Revision, kind: LogKind, leaseOwner: string | null): StepLog {
    return new StepLog(this, revision, kind, new SecretMask(this.deps.secrets, revision.secrets), leaseOwner);
  }
}

/**
 * What one pipeline step writes: `info("…")` and the like return at once; lines are stored in the
 * background, in order, those of one turn of the event loop in one statement, so that a follower
 * sees them while the step works. close() waits until every line is stored.
 */
export class StepLog {
  private pending: NewLogLine[] = [];
  private writing: Promise<void> | null = null;
  private accepted = 0;
  private dropped = 0;
  private closed = false;

  constructor(
    private readonly writer: LogWriter,
    private readonly target: LogTarget,
    readonly kind: LogKind,
    readonly mask: SecretMask,
    /** Lines are written while the revision's lease is this worker's (null: regardless). */
    private readonly leaseOwner: string | null,
  ) {}

  debug(message: string): void {
    this.line("DEBUG", message);
  }
  info(message: string): void {
    this.line("INFO", message);
  }
  warning(message: string): void {
    this.line("WARNING", message);
  }
  error(message: string): void {
    this.line("ERROR", message);
  }

  line(level: LogLevel, message: string): void {
    if (this.closed) return;
    if (this.accepted >= MAX_STEP_LINES) {
      this.dropped++;
      return;
    }
    this.accepted++;
    this.pending.push({ kind: this.kind, level, message: this.mask.apply(String(message)) });
    this.writing ??= this.drain();
  }

  /** Writes what is left (and how many lines were left out), then takes no more lines. */
  async close(): Promise<void> {
    if (this.closed) return;
    if (this.dropped > 0) {
      this.pending.push({
        kind: this.kind,
        level: "WARNING",
        message: `${this.dropped} more lines of this step were left out: a step keeps at most ${MAX_STEP_LINES} lines`,
      });
      this.writing ??= this.drain();
    }
    this.closed = true;
    await this.writing;
  }

  /** The step's result is thrown away (its lease is lost, the worker stops): nothing more is written. */
  abandon(): void {
    this.closed = true;
    this.pending = [];
  }

  private async drain(): Promise<void> {
    // Lines written in the same turn go together.
    await new Promise((resolve) => setImmediate(resolve));
    while (this.pending.length > 0) await this.writer.append(this.target, this.pending.splice(0, MAX_BATCH), this.leaseOwner);
    this.writing = null;
  }
}
