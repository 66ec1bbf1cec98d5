import type { PrismaClient } from "../db/client.js";
import { topics } from "../events/types.js";
import { isTerminal, type RevisionStatus } from "./revision-machine.js";
import type { Tenant } from "./auth.js";
import { DELETING } from "./deployment-status.js";
import { CoreError, invalid, notFound } from "./errors.js";
import { type Backlog, type Channel, Feed } from "./feeds.js";
import { linePosition, type LogLine, revisionWindow } from "./log-queries.js";
import type { Position } from "./pagination.js";
import type { LogKind } from "./schemas/logs.js";
import { MAX_MESSAGE_LENGTH } from "./log-writer.js";

/** Lines a subscriber receives first, unless it asks for another number (0 to MAX_TAIL). */
export const DEFAULT_TAIL = 100;
/** The most a subscriber may ask for first: what each live feed keeps in memory. */
export const MAX_TAIL = 1000;
/** Lines read per statement when a log grows faster than a feed reads (a feed reads again at once). */
const BATCH = 1000;
/** About what a line's id, timestamp, level and framing add to its message in an answer. */
const LINE_OVERHEAD = 100;
/** What a line weighs in a subscriber's backlog: about its size in an answer. */
export const lineWeight = (line: Pick<LogLine, "message">): number => line.message.length + LINE_OVERHEAD;
/**
 * How far behind the log a subscriber may fall, by lineWeight (about 31 MiB): room for two greetings
 * of MAX_TAIL of the longest lines, and for hundreds of thousands of ordinary ones. A subscriber
 * further behind has stopped reading, or reads slower than the build writes: it is ended
 * (SLOW_CONSUMER) rather than have the server keep the rest of the log for it.
 */
export const LOG_BACKLOG_LIMIT = 2 * MAX_TAIL * (MAX_MESSAGE_LENGTH + LINE_OVERHEAD);

const logBacklog: Backlog<LogLine> = {
  limit: LOG_BACKLOG_LIMIT,
  weigh: lineWeight,
  overflow: () =>
    new CoreError(
      "SLOW_CONSUMER",
      `This subscription fell behind the log by more than ${Math.round(LOG_BACKLOG_LIMIT / 2 ** 20)} MiB and was ended; subscribe again (tail up to ${MAX_TAIL}) or read the log's pages.`,
    ),
};

export function checkTail(tail: number): void {
  if (Number.isInteger(tail) && tail >= 0 && tail <= MAX_TAIL) return;
  throw invalid([
    { loc: ["query", "tail"], msg: `Input should be an integer from 0 to ${MAX_TAIL}`, type: "value_error", input: tail, ctx: { ge: 0, le: MAX_TAIL } },
  ]);
}

/**
 * A revision's build or deploy log, live. Its one statement per wake-up reads the lines past the
 * last one it has, with the revision's status, in one snapshot: when that status is final, every
 * line is among those read (nothing is written after a final status's line), and the feed ends.
 * Lines are read in (timestamp, id) order, which is their commit order within a deployment, so a
 * line never appears behind one already read.
 */
export class RevisionLogFeed extends Feed<LogLine, number> {
  /** The last MAX_TAIL lines, oldest first: what joining subscribers start from. */
  private recent: LogLine[] = [];
  private last: Position | undefined;
  protected override readonly backlog = logBacklog;

  constructor(
    private readonly prisma: PrismaClient,
    private readonly tenant: Tenant,
    private readonly revisionId: string,
    private readonly kind: LogKind,
    recheckMs: number,
    forget: () => void,
  ) {
    super(recheckMs, forget);
  }

  protected async load(): Promise<void> {
    const { status, deployment, lines } = await this.read({ direction: "desc", take: MAX_TAIL });
    if (status === null || deployment === null) throw notFound("Revision", this.revisionId);
    this.keep(lines.reverse());
    if (isTerminal(status as RevisionStatus) || deployment.status === DELETING) return this.finish();
    // Woken when the deployment is deleted (no final status comes then): the next read says so. Its
    // status is read again once followed, for a deletion between the read above and the following.
    this.follow(topics.deploymentStatus(deployment.id));
    const now = await this.prisma.deployment.findUnique({ where: { id: deployment.id }, select: { status: true } });
    if (!now || now.status === DELETING) this.finish();
  }

  protected async step(): Promise<void> {
    for (;;) {
      const { status, deployment, lines } = await this.read({ direction: "asc", from: this.last, take: BATCH });
      if (status === null) return this.finish(); // deleted with its deployment
      for (const line of lines) this.publish(line, false);
      this.keep(lines);
      if (lines.length === BATCH) continue;
      // Ends after its final status line, or once its deployment is being deleted (its lines go with it).
      if (isTerminal(status as RevisionStatus) || deployment?.status === DELETING) this.finish();
      return;
    }
  }

  protected override greet(channel: Channel<LogLine>, tail: number): void {
    if (tail <= 0) return;
    for (const line of this.recent.slice(-tail)) channel.push(line);
  }

  private read(window: { direction: "asc" | "desc"; from?: Position; take: number }) {
    return revisionWindow(this.prisma, { workspaceId: this.tenant.workspaceId, revisionId: this.revisionId }, this.kind, {}, window);
  }

  private keep(lines: LogLine[]): void {
    if (lines.length === 0) return;
    this.recent.push(...lines);
    if (this.recent.length > MAX_TAIL) this.recent = this.recent.slice(-MAX_TAIL);
    this.last = linePosition(lines.at(-1)!);
  }
}
