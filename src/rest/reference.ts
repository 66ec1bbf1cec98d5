import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { Hono } from "hono";
import { z } from "zod";
import { describe, errorSchema, jsonObject } from "./docs.js";

/** swagger-ui-dist's files that /docs serves: read from the installed package, so the page works offline. */
const ASSETS: Record<string, string> = {
  "swagger-ui.css": "text/css; charset=utf-8",
  "swagger-ui-bundle.js": "text/javascript; charset=utf-8",
  "swagger-ui-standalone-preset.js": "text/javascript; charset=utf-8",
  "favicon-32x32.png": "image/png",
};

let assetDir: string | null = null;
const assetPath = (file: string) => join((assetDir ??= dirname(createRequire(import.meta.url).resolve("swagger-ui-dist/package.json"))), file);

const PAGE = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <title>Deployment control plane: REST reference</title>
    <link rel="stylesheet" href="/docs/swagger-ui.css" />
    <link rel="icon" type="image/png" href="/docs/favicon-32x32.png" />
  </head>
  <body>
    <div id="swagger-ui"></div>
    <script src="/docs/swagger-ui-bundle.js"></script>
    <script src="/docs/swagger-ui-standalone-preset.js"></script>
    <script>
      window.ui = SwaggerUIBundle({
        url: "/openapi.json",
        dom_id: "#swagger-ui",
        deepLinking: true,
        persistAuthorization: false,
        presets: [SwaggerUIBundle.presets.apis, SwaggerUIStandalonePreset],
        layout: "StandaloneLayout",
      });
    </script>
  </body>
</html>
`;

const assetParam = z.object({ file: z.enum(Object.keys(ASSETS) as [string, ...string[]]) });
const tag = "Reference";

/**
 * GET /openapi.json (the document, made once from the app's routes) and GET /docs (Swagger UI from
 * swagger-ui-dist, no CDN). Neither needs a key: they describe the API, they do not use it.
 */
export function referenceRoutes(document: () => Record<string, unknown>) {
  let text: string | null = null;
  return new Hono()
    .get(
      "/openapi.json",
      describe({ tag, auth: "none", summary: "This document (OpenAPI 3.1)", responses: { 200: { description: "The OpenAPI document", schema: jsonObject } } }, (c) => {
        text ??= `${JSON.stringify(document(), null, 2)}\n`;
        return c.body(text, 200, { "Content-Type": "application/json; charset=utf-8" });
      }),
    )
    .get(
      "/docs",
      describe({ tag, auth: "none", summary: "The interactive reference (Swagger UI)", responses: { 200: { description: "An HTML page" } } }, (c) => c.html(PAGE)),
    )
    .get(
      "/docs/:file",
      describe({ tag, auth: "none", summary: "The interactive reference's assets", params: assetParam, responses: { 200: { description: "The file" }, 404: { description: "No such asset", schema: errorSchema } } }, (c) => {
        const file = c.req.param("file") ?? "";
        const type = Object.hasOwn(ASSETS, file) ? ASSETS[file] : undefined;
        if (!type) return c.json({ detail: "Not Found" }, 404);
        return c.body(readFileSync(assetPath(file)), 200, { "Content-Type": type, "Cache-Control": "public, max-age=86400" });
      }),
    );
}
