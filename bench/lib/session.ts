import type { DbKind } from "./args.js";
import { type BenchDatabase, createDatabase } from "./database.js";
import { Client } from "./http.js";
import { type BenchServer, startServer } from "./server.js";

export interface Session {
  db: BenchDatabase;
  server: BenchServer;
  client: Client;
}

/**
 * A new database and one server on it for the duration of fn; both are gone afterwards, whether fn
 * succeeds or throws.
 */
export async function withServer<T>(kind: DbKind, env: Record<string, string>, fn: (s: Session) => Promise<T>): Promise<T> {
  const db = await createDatabase(kind);
  try {
    const server = await startServer({ db, env });
    try {
      return await fn({ db, server, client: new Client(server.url) });
    } catch (err) {
      throw new Error(`${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n--- server log ---\n${server.logTail()}`);
    } finally {
      await server.stop();
    }
  } finally {
    await db.drop();
  }
}
