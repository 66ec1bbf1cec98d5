import { Hono } from "hono";
import { z } from "zod";
import { computeConfigSchema, type Listener, type ListenerService, listenerCreateSchema, listenerUpdateSchema } from "../core/listeners.js";
import { describe, notFound, refused, timestamp } from "./docs.js";
import { offsetQuery } from "../core/pagination.js";
import { objectOf, strs } from "../core/stored-json.js";
import { type Env, iso, pathParams, queryParams, readJson } from "./http.js";

const idParam = z.object({ listener_id: z.guid() });
const listQuery = z.object(offsetQuery);

export const presentListener = (l: Listener): z.input<typeof listenerSchema> => ({
  id: l.id,
  compute_type: l.computeType,
  compute_id: l.computeId,
  // Read by type, as stored JSON is (GraphQL's ListenerComputeConfig reads it alike).
  compute_config: { k8s_namespaces: strs(objectOf(l.computeConfig), "k8s_namespaces") },
  created_at: iso(l.createdAt),
  updated_at: iso(l.updatedAt),
  version: l.version,
});

export const listenerSchema = z.object({
  id: z.uuid(),
  compute_type: z.string(),
  compute_id: z.string(),
  compute_config: computeConfigSchema.meta({ id: "ListenerComputeConfig" }),
  created_at: timestamp,
  updated_at: timestamp,
  version: z.string().nullable(),
}).meta({ id: "Listener" });
const listenerPage = z.object({ resources: z.array(listenerSchema), offset: z.number().int() });
const tag = "Listeners (v2)";

export function listenerRoutes(listeners: ListenerService) {
  return new Hono<Env>()
    .get("/v2/listeners", describe({ tag, operationId: "list_listeners_v2_listeners_get", summary: "List listeners", query: listQuery, responses: { 200: { description: "A page of listeners", schema: listenerPage } } }, async (c) => {
      const page = await listeners.list(c.var.tenant, queryParams(c, listQuery));
      return c.json({ resources: page.resources.map(presentListener), offset: page.offset });
    }))
    .post("/v2/listeners", describe({ tag, operationId: "create_listener_v2_listeners_post", summary: "Create a listener", body: listenerCreateSchema, idempotent: true, responses: { 201: { description: "The listener", schema: listenerSchema }, 409: refused("A listener with this compute_id exists") } }, async (c) => {
      const listener = await listeners.create(c.var.tenant, await readJson(c));
      return c.json(presentListener(listener), 201);
    }))
    .get("/v2/listeners/:listener_id", describe({ tag, operationId: "get_listener_v2_listeners__listener_id__get", summary: "Get a listener", params: idParam, responses: { 200: { description: "The listener", schema: listenerSchema }, 404: notFound } }, async (c) => {
      const { listener_id } = pathParams(c, idParam);
      return c.json(presentListener(await listeners.get(c.var.tenant, listener_id)));
    }))
    .patch("/v2/listeners/:listener_id", describe({ tag, operationId: "patch_listener_v2_listeners__listener_id__patch", summary: "Update a listener's version or compute_config", params: idParam, body: listenerUpdateSchema.optional(), responses: { 200: { description: "The listener", schema: listenerSchema }, 404: notFound } }, async (c) => {
      const { listener_id } = pathParams(c, idParam);
      return c.json(presentListener(await listeners.update(c.var.tenant, listener_id, await readJson(c))));
    }))
    .delete("/v2/listeners/:listener_id", describe({ tag, operationId: "delete_listener_v2_listeners__listener_id__delete", summary: "Delete a listener", params: idParam, responses: { 204: { description: "Deleted" }, 404: notFound } }, async (c) => {
      const { listener_id } = pathParams(c, idParam);
      await listeners.delete(c.var.tenant, listener_id);
      return c.body(null, 204);
    }));
}
