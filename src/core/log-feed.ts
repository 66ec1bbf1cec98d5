import type { PrismaClient } from "../db/client.js";
import { topics } from "../events/types.js";
import { isTerminal, type RevisionStatus } from "./revision-machine.js";
import type { Tenant } from "./auth.js";
import { DELETING } from "./deployment-status.js";
import { invalid, notFound } from "./errors.js";
import { type Channel, Feed } from "./feeds.js";
import { linePosition, type LogLine, revisionWindow } from "./log-queries.js";
import type { Position } from "./pagination.js";
import type { LogKind } from "./schemas/logs.js";

/** Lines a subscriber receives first, unless it asks for another number (0 to MAX_TAIL). */
export const DEFAULT_TAIL = 100;
/** The most a subscriber may ask for first: what each live feed keeps in memory. */
export const MAX_TAIL = 1000;
/** Lines read per statement when a log grows faster than a feed reads (a feed reads again at once). */
const BATCH = 1000;

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
