import type { Fixtures } from "./fuzz-fixtures.js";

/** Every REST endpoint: its method, its path template, and a valid body when it reads one. */
export interface Route {
  method: string;
  template: string;
  body?: (fx: Fixtures) => object;
}

export const ROUTES: Route[] = [
  { method: "GET", template: "/v2/deployments" },
  { method: "POST", template: "/v2/deployments", body: (f) => f.bodies.deploymentCreate[2]! },
  { method: "DELETE", template: "/v2/deployments" },
  { method: "GET", template: "/v2/deployments/{deployment_id}" },
  { method: "PATCH", template: "/v2/deployments/{deployment_id}", body: (f) => f.bodies.deploymentUpdate[0]! },
  { method: "DELETE", template: "/v2/deployments/{deployment_id}" },
  { method: "GET", template: "/v2/deployments/{deployment_id}/revisions" },
  { method: "POST", template: "/v2/deployments/{deployment_id}/revisions", body: (f) => f.bodies.revisionCreate[0]! },
  { method: "GET", template: "/v2/deployments/{deployment_id}/revisions/{revision_id}" },
  { method: "POST", template: "/v2/deployments/{deployment_id}/revisions/{revision_id}/redeploy" },
  { method: "POST", template: "/v2/deployments/{deployment_id}/revisions/{revision_id}/interrupt" },
  { method: "GET", template: "/v2/listeners" },
  { method: "POST", template: "/v2/listeners", body: (f) => f.bodies.listenerCreate[0]! },
  { method: "GET", template: "/v2/listeners/{listener_id}" },
  { method: "PATCH", template: "/v2/listeners/{listener_id}", body: (f) => f.bodies.listenerUpdate[0]! },
  { method: "DELETE", template: "/v2/listeners/{listener_id}" },
  { method: "GET", template: "/v2/auth/agents/{agent_id}/connections" },
  { method: "POST", template: "/v2/auth/agents/{agent_id}/connections", body: (f) => f.bodies.connectionCreate[0]! },
  { method: "DELETE", template: "/v2/auth/agents/{agent_id}/connections/{connection_id}" },
  { method: "GET", template: "/v2/integrations/forge-codehost/installations" },
  { method: "POST", template: "/v2/integrations/forge-codehost/installations", body: (f) => f.bodies.installationRegister[0]! },
  { method: "GET", template: "/v1/integrations/codehost/install" },
  { method: "POST", template: "/v2/deployments/{deployment_id}/push-token" },
  { method: "POST", template: "/v2/deployments/{deployment_id}/upload-url" },
  { method: "GET", template: "/registry/token" },
  { method: "PUT", template: "/uploads/{deployment_id}/{file}" },
  { method: "POST", template: "/v1/projects/{deployment_id}/revisions/{revision_id}/build_logs", body: (f) => f.bodies.logQuery[0]! },
  { method: "POST", template: "/v1/projects/{deployment_id}/revisions/{revision_id}/deploy_logs", body: (f) => f.bodies.logQuery[0]! },
  { method: "POST", template: "/v1/projects/{deployment_id}/deploy_logs", body: (f) => f.bodies.logQuery[0]! },
  { method: "GET", template: "/v1/integrations/forge/codehost/install" },
  { method: "GET", template: "/v1/integrations/codehost/{integration_id}/repos" },
  { method: "GET", template: "/v1/integrations/forge/codehost/{integration_id}/repos" },
  { method: "PUT", template: "/v2/integrations/forge-codehost/installations/{integration_id}/repositories", body: (f) => f.bodies.repositoriesSet[0]! },
  { method: "GET", template: "/v2/auth/providers" },
  { method: "POST", template: "/v2/auth/providers", body: (f) => f.bodies.providerCreate[0]! },
  { method: "POST", template: "/v2/auth/providers/mcp-discover", body: (f) => f.bodies.mcpDiscover[0]! },
  { method: "GET", template: "/v2/auth/providers/{provider_id}" },
  { method: "PATCH", template: "/v2/auth/providers/{provider_id}", body: (f) => f.bodies.providerUpdate[0]! },
  { method: "DELETE", template: "/v2/auth/providers/{provider_id}" },
  { method: "POST", template: "/v2/auth/authenticate", body: (f) => f.bodies.authenticate[0]! },
  { method: "GET", template: "/v2/auth/callback/{provider_id}" },
  { method: "POST", template: "/v2/auth/callback/{provider_id}", body: (f) => f.bodies.finalize[0]! },
  { method: "GET", template: "/v2/auth/setup/{provider_id}" },
  { method: "GET", template: "/v2/auth/wait/{auth_id}" },
  { method: "GET", template: "/v2/auth/tokens" },
  { method: "DELETE", template: "/v2/auth/tokens" },
  { method: "GET", template: "/v2/auth/tokens/exists" },
  { method: "GET", template: "/v2/auth/tokens/workspace/slack/exists" },
  { method: "DELETE", template: "/v2/auth/tokens/workspace/slack" },
  { method: "PATCH", template: "/v2/auth/tokens/{token_id}/metadata", body: (f) => f.bodies.tokenUpdate[0]! },
  { method: "DELETE", template: "/v2/auth/tokens/{token_id}" },
];

/** The path parameters a template names. */
export const paramsOf = (template: string) => [...template.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);

/** A UUID nothing has: DELETE routes aim at it, so that a fuzz case never removes a fixture. */
export const NOWHERE = "00000000-0000-4000-8000-00000000dead";

/** The fixture's value of each path parameter (DELETE routes get ids that name nothing). */
export function fixtureParam(fx: Fixtures, route: Route, name: string): string {
  const deleting = route.method === "DELETE";
  switch (name) {
    case "deployment_id":
      return deleting ? NOWHERE : fx.deploymentId;
    case "revision_id":
      return fx.revisionId;
    case "listener_id":
      return deleting ? NOWHERE : fx.listenerId;
    case "agent_id":
      return fx.agentId;
    case "connection_id":
      return deleting ? NOWHERE : fx.connectionId;
    case "file":
      return `${NOWHERE}.tar.gz`;
    case "integration_id":
      return fx.installationId;
    case "provider_id":
      return deleting ? "nowhere" : fx.providerId;
    case "token_id":
      return deleting ? NOWHERE : fx.tokenId;
    case "auth_id":
      return fx.authId;
    default:
      throw new Error(`no fixture for path parameter ${name}`);
  }
}

/** The route's path with `override` for some parameters (already encoded) and the fixtures for the rest. */
export function fillPath(fx: Fixtures, route: Route, override: Record<string, string> = {}): string {
  return route.template.replace(/\{(\w+)\}/g, (_, name: string) => override[name] ?? fixtureParam(fx, route, name));
}
