import { Hono } from "hono";
import { z } from "zod";
import type { Listener, ListenerService } from "../core/listeners.js";
import { offsetQuery } from "../core/pagination.js";
import { type Env, iso, pathParams, queryParams, readJson } from "./http.js";

const idParam = z.object({ listener_id: z.uuid() });
const listQuery = z.object(offsetQuery);

export const presentListener = (l: Listener) => ({
  id: l.id,
  compute_type: l.computeType,
  compute_id: l.computeId,
  compute_config: l.computeConfig,
  created_at: iso(l.createdAt),
  updated_at: iso(l.updatedAt),
  version: l.version,
});

export function listenerRoutes(listeners: ListenerService) {
  return new Hono<Env>()
    .get("/v2/listeners", async (c) => {
      const page = await listeners.list(c.var.tenant, queryParams(c, listQuery));
      return c.json({ resources: page.resources.map(presentListener), offset: page.offset });
    })
    .post("/v2/listeners", async (c) => {
      const listener = await listeners.create(c.var.tenant, await readJson(c));
      return c.json(presentListener(listener), 201);
    })
    .get("/v2/listeners/:listener_id", async (c) => {
      const { listener_id } = pathParams(c, idParam);
      return c.json(presentListener(await listeners.get(c.var.tenant, listener_id)));
    })
    .patch("/v2/listeners/:listener_id", async (c) => {
      const { listener_id } = pathParams(c, idParam);
      return c.json(presentListener(await listeners.update(c.var.tenant, listener_id, await readJson(c))));
    })
    .delete("/v2/listeners/:listener_id", async (c) => {
      const { listener_id } = pathParams(c, idParam);
      await listeners.delete(c.var.tenant, listener_id);
      return c.body(null, 204);
    });
}
