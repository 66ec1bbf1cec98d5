import { randomUUID } from "node:crypto";
import pg from "pg";
import { CONNECT_TIMEOUT_MS, KEEPALIVE_IDLE_MS } from "../db/client.js";
import type { Logger } from "../logger.js";
import { z } from "zod";
import { loggedSubscriberErrors, MemoryEventBus } from "./memory.js";
import { type DomainEvent, DomainEventSchema, type EventBus, type Unsubscribe } from "./types.js";

/** The one channel every replica listens on; subscribers filter by topic locally. */
export const CHANNEL = "dcp_events";
/** How the listening session names itself in pg_stat_activity. */
export const LISTENER_APPLICATION_NAME = "dcp-events";
/**
 * How often the listening session is asked a trivial statement, and how long its answer may take.
 * A session dropped without a word (a NAT that forgot its mapping, a host that died) never emits
 * `error` or `end`: it only stops delivering. Unanswered, it is replaced (as a lost one is) within
 * about both together; the traffic also keeps the path's NAT mapping alive.
 */
export const LIVENESS_EVERY_MS = 10_000;
export const LIVENESS_TIMEOUT_MS = 10_000;

/** A notification's payload. */
const EnvelopeSchema = z.object({
  /** The publishing replica, which has already delivered the event to its own subscribers. */
  o: z.string(),
  e: DomainEventSchema,
  /** When it was published (ms since the epoch): the receiver's lag. */
  t: z.number().optional(),
});
type Envelope = z.infer<typeof EnvelopeSchema>;

/**
 * Cross-replica events over PostgreSQL LISTEN/NOTIFY. Each replica delivers its own publications at
 * once, NOTIFYs them with its origin id, and delivers what other replicas NOTIFY. Events carry ids only
 * (subscribers refetch), far under NOTIFY's 8000-byte payload limit. While the listening connection is
 * down, other replicas' events are missed; it reconnects with backoff, and once it listens again it
 * tells its local subscribers to resync (onResync): each reads the current state of what it follows,
 * which covers every change whose notification was lost (a change committed later is notified).
 */
export class PostgresEventBus implements EventBus {
  private readonly local: MemoryEventBus;
  private readonly origin = randomUUID();
  private client: pg.Client | null = null;
  private closed = false;
  private retryMs = 250;
  private reconnectTimer: NodeJS.Timeout | null = null;
  /** The next liveness check of the listening session. */
  private livenessTimer: NodeJS.Timeout | null = null;
  /** The listening session was lost since the last resync: notifications may have been missed. */
  private missed = false;

  constructor(
    private readonly pool: pg.Pool,
    private readonly connectionString: string,
    private readonly logger: Logger,
    /** Told the seconds from another replica's publication to its delivery here (metrics). */
    private readonly observeLag?: (seconds: number) => void,
  ) {
    this.local = new MemoryEventBus(loggedSubscriberErrors(logger));
  }

  /** Connects the listening session; resolves once LISTEN is in effect. */
  async start(): Promise<void> {
    // Bounded as the pool's connections are (src/db/client.ts), so that a stalled path fails connecting
    // or listening, and is retried, instead of holding the reconnection for ever.
    const client = new pg.Client({
      connectionString: this.connectionString,
      application_name: LISTENER_APPLICATION_NAME,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      query_timeout: LIVENESS_TIMEOUT_MS,
      keepAlive: true,
      keepAliveInitialDelayMillis: KEEPALIVE_IDLE_MS,
    });
    client.on("notification", (msg) => this.receive(msg.channel, msg.payload));
    client.on("error", (err) => {
      this.logger.warn({ err }, "events: listening connection failed; reconnecting");
      this.lost(client);
    });
    client.on("end", () => this.lost(client));
    try {
      await client.connect();
      await client.query(`LISTEN ${CHANNEL}`);
    } catch (err) {
      await client.end().catch(() => {});
      throw err;
    }
    if (this.closed) {
      await client.end().catch(() => {});
      return;
    }
    this.client = client;
    this.retryMs = 250;
    this.checkLater(client);
    if (this.missed) {
      this.missed = false;
      this.logger.info("events: listening again; subscribers re-read what they follow");
      try {
        this.local.resync();
      } catch (err) {
        this.logger.error({ err }, "events: a resync handler failed");
      }
    }
  }

  async publish(event: DomainEvent): Promise<void> {
    this.local.deliver(event);
    const payload: Envelope = { o: this.origin, e: event, t: Date.now() };
    try {
      await this.pool.query("SELECT pg_notify($1, $2)", [CHANNEL, JSON.stringify(payload)]);
    } catch (err) {
      // The change is committed already; other replicas' subscribers catch up when they refetch.
      this.logger.warn({ err, event: event.type }, "events: NOTIFY failed; other replicas miss this event");
    }
  }

  subscribe(topic: string, handler: (event: DomainEvent) => void): Unsubscribe {
    return this.local.subscribe(topic, handler);
  }

  onResync(handler: () => void): Unsubscribe {
    return this.local.onResync(handler);
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.reconnectTimer) clearTimeout(this.reconnectTimer);
    if (this.livenessTimer) clearTimeout(this.livenessTimer);
    const client = this.client;
    this.client = null;
    await this.local.close();
    if (client) await client.end().catch(() => {});
  }

  private receive(channel: string, payload: string | undefined) {
    if (channel !== CHANNEL || !payload) return;
    const envelope = envelopeOf(payload);
    if (!envelope) {
      this.logger.warn({ channel }, "events: ignored a malformed notification");
      return;
    }
    if (envelope.o === this.origin) return;
    if (envelope.t !== undefined) this.observeLag?.(Math.max(0, Date.now() - envelope.t) / 1000);
    this.local.deliver(envelope.e);
  }

  private lost(client: pg.Client) {
    if (this.client !== client) return;
    this.client = null;
    this.missed = true;
    if (this.livenessTimer) clearTimeout(this.livenessTimer);
    this.livenessTimer = null;
    // With a statement unanswered, pg ends a connection by destroying its socket: nothing waits on the dead path.
    client.end().catch(() => {});
    this.connectLater();
  }

  /**
   * Asks the listening session `SELECT 1` in LIVENESS_EVERY_MS, and again after each answer; no answer
   * within LIVENESS_TIMEOUT_MS (the session's query_timeout) and it is lost: reconnected, then resynced.
   * One check at a time; the timer never holds the process open.
   */
  private checkLater(client: pg.Client) {
    this.livenessTimer = setTimeout(async () => {
      this.livenessTimer = null;
      if (this.client !== client) return;
      try {
        await client.query("SELECT 1");
      } catch (err) {
        if (this.client !== client) return;
        this.logger.warn({ err }, "events: listening connection does not answer; reconnecting");
        this.lost(client);
        return;
      }
      if (this.client === client && !this.closed) this.checkLater(client);
    }, LIVENESS_EVERY_MS);
    this.livenessTimer.unref();
  }

  private connectLater() {
    if (this.closed || this.reconnectTimer) return;
    const delay = this.retryMs;
    this.retryMs = Math.min(this.retryMs * 2, 5_000);
    this.reconnectTimer = setTimeout(async () => {
      this.reconnectTimer = null;
      if (this.closed) return;
      try {
        await this.start();
      } catch (err) {
        this.logger.warn({ err }, "events: reconnecting failed; retrying");
        this.connectLater();
      }
    }, delay);
  }

  /** Whether the listening session is up (readiness, tests). */
  get listening(): boolean {
    return this.client !== null;
  }
}

/** A notification's envelope, or null for one that is not JSON, not an envelope, or of an event this version does not know. */
function envelopeOf(payload: string): Envelope | null {
  try {
    const parsed = EnvelopeSchema.safeParse(JSON.parse(payload));
    return parsed.success ? parsed.data : null;
  } catch {
    return null;
  }
}
