import type { GraphiQLOptions } from "graphql-yoga";

/** The Headers editor GraphiQL opens with: where the API key goes, ready to fill in. */
export const GRAPHIQL_HEADERS = JSON.stringify({ "x-api-key": "" }, null, 2);

/** The line above the IDE that says where the key goes. */
export const GRAPHIQL_HINT = 'Put your API key in the Headers tab below: {"x-api-key": "dcp_…"}. Subscriptions run over SSE with the same headers.';

const DEFAULT_QUERY = `# Your API key goes in the Headers tab below: {"x-api-key": "dcp_…"}
#
# A deployment's latest revision, with the global id a subscription takes:
query Deployments {
  deployments(first: 5) {
    edges { node { id name status latestRevision { id status } } }
  }
}

# Then, with that id:
# subscription Watch { revisionStatusChanged(revisionId: "<latestRevision.id>") { status previousStatus message } }
`;

/**
 * GraphiQL from @graphql-yoga/render-graphiql, whose page inlines GraphiQL's scripts and styles: it
 * loads nothing from a CDN, so it works offline. Subscriptions use SSE (graphql-yoga's own transport
 * on /graphql), which sends the Headers editor's headers, key included, like any other request.
 */
export const graphiqlOptions: GraphiQLOptions = {
  title: "Deployment control plane",
  subscriptionsProtocol: "SSE",
  headers: GRAPHIQL_HEADERS,
  defaultQuery: DEFAULT_QUERY,
  shouldPersistHeaders: true,
};

/**
 * The page, with the key hint above the IDE. @graphql-yoga/render-graphiql is imported on the first
 * page asked for, not with the server: its module is GraphiQL's scripts as one string, some 27 MB of
 * heap (its source and the string) that a server which never serves GraphiQL (production, an API
 * client's) held from its start (bench/README.md, start).
 */
export async function renderOfflineGraphiQL(options: GraphiQLOptions): Promise<string> {
  const { renderGraphiQL } = await import("@graphql-yoga/render-graphiql");
  const hint = `<div id="dcp-key-hint" style="font: 14px/1.4 system-ui, sans-serif; padding: 6px 12px; background: #fff7d6; border-bottom: 1px solid #e6d48a; color: #3b3000;">${GRAPHIQL_HINT.replace(/</g, "&lt;")}</div>`;
  const page = renderGraphiQL(options);
  // The IDE fills the rest of the window under the hint.
  return page.replace('<div id="root"></div>', `${hint}<div id="root" style="height: calc(100vh - 34px);"></div>`);
}
