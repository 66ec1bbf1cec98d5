import { type AddressInfo, connect, createServer, type Socket } from "node:net";

/**
 * A TCP proxy in front of PostgreSQL that can stop forwarding without closing anything: what a
 * network partition, a stalled failover or a NAT that forgot a mapping looks like to the service.
 * Sockets stay open and nothing answers; only the service's own timeouts can notice.
 */
export interface StallingProxy {
  /** The database URL through the proxy. */
  readonly url: string;
  /** The open connections, with the application_name each sent in its startup message. */
  connections(): { applicationName: string | null; stalled: boolean }[];
  /**
   * Stops forwarding on the open connections that `where` picks (every one by default): what either
   * side sends is held back. With `newConnections`, connections opened from now until resume() are
   * accepted and held back too. Returns how many open connections it stalled.
   */
  stall(options?: { where?: (applicationName: string | null) => boolean; newConnections?: boolean }): number;
  /** Forwards again, on every connection, what was held back and whatever follows: the path is back. */
  resume(): void;
  close(): Promise<void>;
}

interface Connection {
  client: Socket;
  /** Null until it is connected to PostgreSQL (held back while new connections stall). */
  upstream: Socket | null;
  /** From the startup message: "" when it sets none, null until that has arrived. */
  applicationName: string | null;
  stalled: boolean;
  /** What each side sent while it could not be forwarded. */
  toUpstream: Buffer[];
  toClient: Buffer[];
}

/** Starts a proxy to `target` (a postgres:// URL) on a free port of 127.0.0.1. */
export async function startStallingProxy(target: string): Promise<StallingProxy> {
  const to = new URL(target);
  const open = new Set<Connection>();
  let holdingNew = false;

  const forward = (c: Connection) => {
    if (c.stalled || !c.upstream || c.upstream.connecting) return;
    for (const chunk of c.toUpstream.splice(0)) c.upstream.write(chunk);
    for (const chunk of c.toClient.splice(0)) c.client.write(chunk);
  };
  const drop = (c: Connection) => {
    c.client.destroy();
    c.upstream?.destroy();
    open.delete(c);
  };
  const connectUpstream = (c: Connection) => {
    const upstream = connect(Number(to.port || 5432), to.hostname);
    c.upstream = upstream;
    upstream.on("connect", () => forward(c));
    upstream.on("data", (chunk: Buffer) => {
      c.toClient.push(chunk);
      forward(c);
    });
    upstream.on("close", () => drop(c));
    upstream.on("error", () => drop(c));
  };

  const server = createServer((client) => {
    const c: Connection = { client, upstream: null, applicationName: null, stalled: holdingNew, toUpstream: [], toClient: [] };
    open.add(c);
    let startup = Buffer.alloc(0);
    client.on("data", (chunk: Buffer) => {
      if (c.applicationName === null) {
        startup = Buffer.concat([startup, chunk]);
        c.applicationName = applicationNameOf(startup);
      }
      c.toUpstream.push(chunk);
      forward(c);
    });
    client.on("close", () => drop(c));
    client.on("error", () => drop(c));
    if (!c.stalled) connectUpstream(c);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const proxied = new URL(target);
  proxied.hostname = "127.0.0.1";
  proxied.port = String((server.address() as AddressInfo).port);

  return {
    url: proxied.toString(),
    connections: () => [...open].map((c) => ({ applicationName: c.applicationName, stalled: c.stalled })),
    stall({ where = () => true, newConnections = false } = {}) {
      let stalled = 0;
      for (const c of open) {
        if (c.stalled || !where(c.applicationName)) continue;
        c.stalled = true;
        stalled++;
      }
      holdingNew ||= newConnections;
      return stalled;
    },
    resume() {
      holdingNew = false;
      for (const c of open) {
        c.stalled = false;
        if (c.upstream) forward(c);
        else connectUpstream(c);
      }
    },
    async close() {
      for (const c of open) drop(c);
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/**
 * The application_name of a PostgreSQL startup message (its length, protocol 3.0, then name and value
 * pairs up to an empty name): "" when it sets none (or is another message), null until it has all arrived.
 */
function applicationNameOf(bytes: Buffer): string | null {
  if (bytes.length < 8) return null;
  const length = bytes.readInt32BE(0);
  if (bytes.length < length) return null;
  if (bytes.readInt32BE(4) !== 196608) return "";
  const fields = bytes.subarray(8, length - 1).toString("utf8").split("\0");
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === "application_name") return fields[i + 1]!;
  return "";
}
