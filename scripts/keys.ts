// `npm run keys -- create [--workspace <id>] [--org-wide] [--name <label>]`, `npm run keys -- list`,
// `npm run keys -- revoke <id or prefix>`: API keys over the core's ApiKeyService, with the same
// environment as the service (DATABASE_URL, DATA_DIR). Only hashes are stored: `create` prints the
// new key once. On PostgreSQL it runs beside the replicas, and a revocation reaches every one of
// them at once (event api_key.revoked); embedded PGlite belongs to one process: stop the service.
import { parseArgs } from "node:util";
import { ConfigError, loadConfig } from "../src/config.js";
import { ApiKeyService } from "../src/core/api-keys.js";
import { CoreError } from "../src/core/errors.js";
import { StartupError } from "../src/db/data-dir-lock.js";
import { migrate, readMigrations } from "../src/db/migrate.js";
import { createEventBus } from "../src/events/index.js";
import { createLogger } from "../src/logger.js";
import { openScriptDatabase } from "./lib/database.js";

const USAGE = `usage:
  npm run keys -- create [--workspace <workspace id>] [--org-wide] [--name <label>]
  npm run keys -- list
  npm run keys -- revoke <key id or prefix>   (the prefix as list shows it, "…" and all)`;

async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: { workspace: { type: "string" }, "org-wide": { type: "boolean" }, name: { type: "string" }, help: { type: "boolean", short: "h" } },
  });
  const [command, ...rest] = positionals;
  if (values.help || !command || !["create", "list", "revoke"].includes(command) || (command === "revoke" ? rest.length !== 1 : rest.length !== 0)) {
    process.stderr.write(`${USAGE}\n`);
    return values.help ? 0 : 2;
  }
  const config = loadConfig();
  const logger = createLogger(process.env.LOG_LEVEL ?? "warn");
  const { db, close } = await openScriptDatabase(config, `npm run keys -- ${command}`);
  try {
    await migrate(db.sql, await readMigrations());
    const events = await createEventBus(db, config.database.kind === "postgres" ? config.database.url : null, logger);
    const keys = new ApiKeyService(db.prisma, events);
    try {
      if (command === "create") {
        const { key, summary } = await keys.create({ workspaceId: values.workspace, orgWide: values["org-wide"] ?? false, name: values.name });
        process.stderr.write(
          `created key ${summary.id} for ${summary.workspaceId ? `workspace ${summary.workspaceId}` : `organisation ${summary.organizationId} (send X-Tenant-Id)`}; store it now, it is not shown again:\n`,
        );
        process.stdout.write(`${key}\n`);
      } else if (command === "list") {
        const list = await keys.list();
        const rows = list.map((k) => [
          k.id,
          k.prefix ? `${k.prefix}…` : "(unknown)",
          k.workspaceId ?? `org ${k.organizationId}`,
          k.name ?? "",
          k.createdAt.toISOString(),
          k.revokedAt ? `revoked ${k.revokedAt.toISOString()}` : "active",
        ]);
        const header = ["ID", "PREFIX", "WORKSPACE", "NAME", "CREATED", "STATUS"];
        const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i]!.length)));
        for (const row of [header, ...rows]) process.stdout.write(`${row.map((c, i) => c.padEnd(widths[i]!)).join("  ").trimEnd()}\n`);
      } else {
        const revoked = await keys.revoke(rest[0]!);
        process.stdout.write(`revoked ${revoked.id} (${revoked.prefix ?? "no prefix"}…)\n`);
      }
    } finally {
      await events.close();
    }
    return 0;
  } finally {
    await close();
  }
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    if (err instanceof ConfigError || err instanceof StartupError || err instanceof CoreError || (err instanceof TypeError && "code" in err && String(err.code).startsWith("ERR_PARSE_ARGS"))) {
      // A bad argument (the parser's, or a value core refuses) is told with the usage.
      const badArgument = err instanceof TypeError || (err instanceof CoreError && err.code === "VALIDATION");
      process.stderr.write(`${err.message}\n${badArgument ? `${USAGE}\n` : ""}`);
      process.exit(err instanceof ConfigError || badArgument ? 2 : 1);
    }
    process.stderr.write(`keys: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exit(1);
  },
);
