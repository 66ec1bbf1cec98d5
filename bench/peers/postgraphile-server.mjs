/**
 * PostGraphile 5 over the benchmark's database, for bench/peers.ts: its amber preset, one pg pool,
 * and a smart tag that exposes deployments.latest_revision_id (which has no foreign key) as the
 * relation `latestRevision`. Installed in bench/peers/ (npm install there, done by bench/peers.ts on
 * its first run), never one of the service's dependencies.
 *
 *   DATABASE_URL=postgres://… PORT=9001 node bench/peers/postgraphile-server.mjs
 */
import { createServer } from "node:http";

// PostGraphile 5 declares Node >= 22; on Node 20 it needs Promise.withResolvers (Node 22's).
if (typeof Promise.withResolvers !== "function") {
  Promise.withResolvers = function withResolvers() {
    let resolve;
    let reject;
    const promise = new this((res, rej) => {
      resolve = res;
      reject = rej;
    });
    return { promise, resolve, reject };
  };
}

const { postgraphile } = await import("postgraphile");
const { grafserv } = await import("postgraphile/grafserv/node");
const { PostGraphileAmberPreset } = await import("postgraphile/presets/amber");
const { makePgService } = await import("postgraphile/adaptors/pg");
const { jsonPgSmartTags } = await import("postgraphile/utils");

const port = Number(process.env.PORT);
const connectionString = process.env.DATABASE_URL;
if (!Number.isInteger(port) || port <= 0 || !connectionString) {
  process.stderr.write("usage: DATABASE_URL=<postgres url> PORT=<port> node bench/peers/postgraphile-server.mjs\n");
  process.exit(2);
}

const LatestRevisionRelation = jsonPgSmartTags({
  version: 1,
  config: {
    class: {
      deployments: {
        tags: {
          foreignKey: "(latest_revision_id) references revisions (id)|@fieldName latestRevision|@foreignFieldName deploymentsWhereLatest",
        },
      },
    },
  },
});

const preset = {
  extends: [PostGraphileAmberPreset],
  plugins: [LatestRevisionRelation],
  pgServices: [makePgService({ connectionString, schemas: ["public"], poolConfig: { max: 10 } })],
  grafserv: { port, graphiql: false, watch: false },
  grafast: { explain: false },
};

const pgl = postgraphile(preset);
const serv = pgl.createServ(grafserv);
const server = createServer();
server.once("listening", () => process.stdout.write(`listening on http://127.0.0.1:${port}\n`));
await serv.addTo(server);
server.listen(port, "127.0.0.1");
process.on("SIGTERM", () => {
  server.close(() => pgl.release().finally(() => process.exit(0)));
  server.closeAllConnections();
});
