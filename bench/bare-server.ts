import { readFileSync } from "node:fs";
import { createServer } from "node:http";

/**
 * The limit for this machine in the overhead benchmark: a bare node:http handler that answers every
 * request with the same JSON bytes, held in memory. No routing, no auth, no database.
 *
 *   PORT=9000 BARE_JSON_FILE=deployment.json node --import tsx bench/bare-server.ts
 */
const port = Number(process.env.PORT);
const file = process.env.BARE_JSON_FILE;
if (!Number.isInteger(port) || port <= 0 || !file) {
  process.stderr.write("usage: PORT=<port> BARE_JSON_FILE=<file.json> node --import tsx bench/bare-server.ts\n");
  process.exit(2);
}
// Parsed and serialised once, as a handler holding an object would answer it.
const body = Buffer.from(JSON.stringify(JSON.parse(readFileSync(file, "utf8"))));

const server = createServer((_req, res) => {
  res.writeHead(200, { "content-type": "application/json", "content-length": body.length });
  res.end(body);
});
server.listen(port, "127.0.0.1", () => process.stdout.write(`listening on http://127.0.0.1:${port}\n`));
process.on("SIGTERM", () => {
  server.close(() => process.exit(0));
  server.closeAllConnections();
});
