import { createHash } from "node:crypto";
import { createServer, type ServerResponse } from "node:http";
import pg from "pg";

/**
 * The limit for a database read on this machine, for bench/peers.ts: a minimal node:http + pg
 * handler doing what the service's REST reads do at their least: the same API key lookup (a SHA-256
 * of the key, cached for a minute as the service caches it) and the same SELECT (the deployment with
 * its latest revision's config, confined to the key's workspace), as named prepared statements,
 * answered as the rows' JSON. No routing library, no validation, no presenting, no limits.
 *
 *   DATABASE_URL=postgres://… PORT=9002 node --import tsx bench/minimal-server.ts
 */
const port = Number(process.env.PORT);
const connectionString = process.env.DATABASE_URL;
if (!Number.isInteger(port) || port <= 0 || !connectionString) {
  process.stderr.write("usage: DATABASE_URL=<postgres url> PORT=<port> node --import tsx bench/minimal-server.ts\n");
  process.exit(2);
}
const pool = new pg.Pool({ connectionString, max: 10 });
pool.on("error", () => {});

const COLUMNS = `d.*, r.source_revision_config AS latest_source_revision_config,
  r.repo_commit_sha AS latest_repo_commit_sha, r.repo_commit_title AS latest_repo_commit_title`;
const KEY = { name: "minimal-key", text: "SELECT k.workspace_id FROM api_keys k WHERE k.key_hash = $1" };
const GET = {
  name: "minimal-get",
  text: `SELECT ${COLUMNS} FROM deployments d LEFT JOIN revisions r ON r.id = d.latest_revision_id WHERE d.id = $1 AND d.workspace_id = $2`,
};
const LIST = {
  name: "minimal-list",
  text: `SELECT ${COLUMNS} FROM deployments d LEFT JOIN revisions r ON r.id = d.latest_revision_id
    WHERE d.workspace_id = $1 ORDER BY d.created_at DESC, d.id DESC LIMIT $2 OFFSET $3`,
};

const keys = new Map<string, { workspaceId: string | null; until: number }>();
async function workspaceOf(key: string | undefined): Promise<string | null> {
  if (!key) return null;
  const hash = createHash("sha256").update(key).digest("hex");
  const cached = keys.get(hash);
  if (cached && cached.until > Date.now()) return cached.workspaceId;
  const { rows } = await pool.query<{ workspace_id: string | null }>({ ...KEY, values: [hash] });
  const workspaceId = rows[0]?.workspace_id ?? null;
  keys.set(hash, { workspaceId, until: Date.now() + 60_000 });
  return workspaceId;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
function send(res: ServerResponse, status: number, body: unknown) {
  const text = Buffer.from(JSON.stringify(body));
  res.writeHead(status, { "content-type": "application/json", "content-length": text.length });
  res.end(text);
}

const server = createServer((req, res) => {
  void (async () => {
    const url = new URL(req.url ?? "/", "http://localhost");
    if (url.pathname === "/readyz") return send(res, 200, { status: "ready" });
    const workspaceId = await workspaceOf(req.headers["x-api-key"] as string | undefined);
    if (!workspaceId) return send(res, 401, { detail: "Unauthorized" });
    if (url.pathname === "/v2/deployments") {
      const limit = Math.min(100, Math.max(1, Number(url.searchParams.get("limit") ?? 20) || 20));
      const offset = Math.max(0, Number(url.searchParams.get("offset") ?? 0) || 0);
      const { rows } = await pool.query({ ...LIST, values: [workspaceId, limit, offset] });
      return send(res, 200, { resources: rows, offset: offset + rows.length });
    }
    const id = /^\/v2\/deployments\/([^/]+)$/.exec(url.pathname)?.[1];
    if (id && UUID.test(id)) {
      const { rows } = await pool.query({ ...GET, values: [id, workspaceId] });
      return rows[0] ? send(res, 200, rows[0]) : send(res, 404, { detail: "Not Found" });
    }
    return send(res, 404, { detail: "Not Found" });
  })().catch((err: unknown) => send(res, 500, { detail: String(err) }));
});
server.listen(port, "127.0.0.1", () => process.stdout.write(`listening on http://127.0.0.1:${port}\n`));
process.on("SIGTERM", () => {
  server.close(() => void pool.end().finally(() => process.exit(0)));
  server.closeAllConnections();
});
