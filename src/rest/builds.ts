import { Readable } from "node:stream";
import { Hono } from "hono";
import { z } from "zod";
import type { Core } from "../core/index.js";
import { type Env, iso, NO_STORE, pathParams } from "./http.js";
import { describe, errorSchema, NO_STORE_HEADER, notFound, refused, timestamp } from "./docs.js";

const idParam = z.object({ deployment_id: z.guid() });

const tag = "Builds";
const registryQuery = z.object({
  service: z.string().optional().describe("The registry's service name"),
  scope: z.string().optional().describe("repository:<path>:pull,push; may be repeated"),
});
const uploadParams = z.object({ deployment_id: z.string(), file: z.string() });
const uploadQuery = z.object({ expires: z.string().describe("From the signed URL"), signature: z.string().describe("From the signed URL") });

/**
 * What the command-line tool's deploy asks for before it builds: a push token for the registry
 * (image path) or a signed upload URL (remote build), and the registry's token server.
 */
export function buildRoutes(core: Core) {
  return new Hono<Env>()
    .post("/v2/deployments/:deployment_id/push-token", describe({ tag, summary: "Issue a registry push token for a deployment's image", params: idParam, responses: { 200: { description: "The token (shown once; never kept by Idempotency-Key)", headers: NO_STORE_HEADER, schema: z.object({ token: z.string(), registry_url: z.string(), expires_at: timestamp }) }, 404: notFound, 400: refused("Push tokens are for internal_container deployments not being deleted, where a registry is configured") } }, async (c) => {
      const { deployment_id } = pathParams(c, idParam);
      const issued = await core.pushTokens.create(c.var.tenant, deployment_id);
      return c.json({ token: issued.token, registry_url: issued.registryUrl, expires_at: iso(issued.expiresAt) }, 200, NO_STORE);
    }))
    .post("/v2/deployments/:deployment_id/upload-url", describe({ tag, summary: "Issue a signed URL to upload a source tarball to", params: idParam, responses: { 200: { description: "The signed URL: PUT the tarball to it before expires_at", headers: NO_STORE_HEADER, schema: z.object({ upload_url: z.string(), object_path: z.string(), expires_at: timestamp }) }, 404: notFound, 400: refused("Uploads are for managed deployments not being deleted, where the service knows its public URL") } }, async (c) => {
      const { deployment_id } = pathParams(c, idParam);
      const issued = await core.uploads.issue(c.var.tenant, deployment_id, new URL(c.req.url).origin);
      return c.json({ upload_url: issued.uploadUrl, object_path: issued.objectPath, expires_at: iso(issued.expiresAt) }, 200, NO_STORE);
    }))
    // The registry's `auth.token.realm`: authenticated by the push token (Basic), not an API key.
    .get("/registry/token", describe({ tag, auth: "push-token", summary: "The registry's token server (auth.token.realm): a push token (Basic) for a registry bearer token", query: registryQuery, responses: { 200: { description: "The registry token", headers: NO_STORE_HEADER, schema: z.object({ token: z.string(), access_token: z.string(), expires_in: z.number().int(), issued_at: timestamp }) }, 401: { description: "No or a wrong push token (WWW-Authenticate: Basic)", schema: errorSchema }, 400: refused("A service or scope this token server does not issue tokens for") } }, async (c) => {
      try {
        const issued = await core.pushTokens.exchange({
          authorization: c.req.header("authorization") ?? null,
          service: c.req.query("service") ?? null,
          scopes: c.req.queries("scope") ?? [],
        });
        return c.json(
          { token: issued.token, access_token: issued.token, expires_in: issued.expiresIn, issued_at: iso(issued.issuedAt) },
          200,
          NO_STORE,
        );
      } catch (err) {
        // A client that sent no (or wrong) Basic credentials is told which scheme to use.
        c.header("WWW-Authenticate", 'Basic realm="registry token server"');
        throw err;
      }
    }));
}

/**
 * PUT <upload_url>: outside the API's authentication (the URL's signature is the credential) and
 * outside the global body limit: uploads have their own (200 MiB), counted as the body streams in.
 */
export function uploadRoutes(core: Core) {
  return new Hono()
    // A refusal is answered before the body is read; the server then reads no more of it and closes
    // the connection. Said in the answer, so that a client sends its next request on a new one.
    .use("/uploads/*", async (c, next) => {
      await next();
      if (c.res.status >= 400) c.header("Connection", "close");
    })
    .put("/uploads/:deployment_id/:file", describe({ tag, auth: "signed-url", summary: "Upload a source tarball to a signed URL", description: "The URL's expires and signature are the credential; the body is the gzipped tarball (at most 200 MiB).", params: uploadParams, query: uploadQuery, body: z.string(), bodyMedia: "application/gzip", responses: { 200: { description: "Stored", schema: z.object({ object_path: z.string(), size_bytes: z.number().int(), sha256: z.string() }) }, 403: { description: "The signature is wrong or has expired", schema: errorSchema }, 400: refused("A malformed X-Goog-Content-Length-Range, an upload smaller than it asks, or one cut short (the connection closed, or the body came too slowly)"), 404: refused("The deployment was deleted (before or while the body streamed in): nothing is stored"), 409: refused("This upload URL has been used already, or another PUT of it is receiving it (or stopped with its server)"), 415: refused("The body is not gzip, or its Content-Type is not application/gzip: nothing is stored") } }, async (c) => {
    const length = c.req.header("content-length");
    const stored = await core.uploads.receive({
      objectPath: `uploads/${c.req.param("deployment_id")}/${c.req.param("file")}`,
      expires: c.req.query("expires") ?? null,
      signature: c.req.query("signature") ?? null,
      contentType: c.req.header("content-type") ?? null,
      contentLength: length !== undefined && /^\d{1,15}$/.test(length) ? Number(length) : null,
      lengthRange: c.req.header("x-goog-content-length-range") ?? null,
      body: c.req.raw.body ? Readable.fromWeb(c.req.raw.body as import("node:stream/web").ReadableStream<Uint8Array>) : null,
    });
    return c.json({ object_path: stored.objectPath, size_bytes: stored.sizeBytes, sha256: stored.sha256 });
  }));
}
