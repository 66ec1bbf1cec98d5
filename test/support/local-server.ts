import type { Server } from "node:http";
import type { AddressInfo } from "node:net";

/** Starts `server` on 127.0.0.1 and a free port; its base URL (http://127.0.0.1:port), `path` appended. */
export function listenLocally(server: Server, path = ""): Promise<string> {
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(`http://127.0.0.1:${(server.address() as AddressInfo).port}${path}`)));
}

/** Closes `server` now: the connections it holds (answers it never finished, on purpose) are cut. */
export function closeNow(server: Server): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  server.closeAllConnections();
  return closed;
}
