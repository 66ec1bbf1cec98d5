import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import Provider, { type Configuration, type KoaContextWithOIDC } from "oidc-provider";

/**
 * A real OAuth 2.0 / OpenID Connect authorization server (panva's oidc-provider) on 127.0.0.1 and a
 * free port, for tests: discovery (OpenID and RFC 8414), authorization code with PKCE, refresh
 * tokens (rotated), revocation (RFC 7009), dynamic client registration (RFC 7591) and its management
 * (RFC 7592: a registered client can be deleted with its registration access token), and RFC 9728
 * metadata for an MCP server it protects at /mcp. The user's login and consent are given by a small
 * interaction handler, as a browser would after the user clicked "allow": `follow()` plays the
 * browser, following redirects with cookies until the provider sends it back to the client.
 */
export interface OAuthServer {
  issuer: string;
  /** An MCP server URL whose RFC 9728 metadata names this authorization server. */
  mcpUrl: string;
  provider: Provider;
  /** Registers a client allowed to redirect to `redirectUris` (confidential unless authMethod is "none"). */
  addClient(client: { redirectUris: string[]; authMethod?: "client_secret_post" | "client_secret_basic" | "none" }): Promise<{ clientId: string; clientSecret: string | null }>;
  /**
   * Opens `url` as the user's browser would, logs in as `account` and consents to everything asked,
   * and returns the URL the provider finally sends the browser to (the client's redirect_uri with
   * code and state, or with an error).
   */
  follow(url: string, options?: { account?: string; deny?: boolean }): Promise<URL>;
  /** Token endpoint requests seen, by grant type (what the service sent, to assert on). */
  readonly grants: string[];
  /** Revocation requests seen (token type hints). */
  readonly revocations: string[];
  /**
   * Holds every request to the token endpoint from now on (a slow provider) until `release()`, which
   * lets the held ones and every later one through. `arrived` counts the requests held so far: a test
   * waits on it to know that an exchange is at the provider.
   */
  holdTokenEndpoint(): EndpointHold;
  /** The same for the registration endpoint (RFC 7591): a slow registration. */
  holdRegistrationEndpoint(): EndpointHold;
  /**
   * Stops answering (the provider is down) until resume(): every connection is dropped as it opens,
   * and the open ones at once. The port stays bound, so that no other process can take it meanwhile.
   */
  pause(): Promise<void>;
  resume(): Promise<void>;
  close(): Promise<void>;
}

export interface EndpointHold {
  readonly arrived: number;
  release(): void;
}

export interface OAuthServerOptions {
  /** Access token lifetime in seconds (default 3600). */
  accessTokenTtl?: number;
  /** Whether /reg accepts dynamic registrations (default true). */
  registration?: boolean;
  /** Whether /token/revocation exists (default true). */
  revocation?: boolean;
}

export async function startOAuthServer(options: OAuthServerOptions = {}): Promise<OAuthServer> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  const issuer = `http://127.0.0.1:${port}`;
  const grants: string[] = [];
  const revocations: string[] = [];

  const configuration: Configuration = {
    features: {
      devInteractions: { enabled: false },
      registration: { enabled: options.registration ?? true },
      registrationManagement: { enabled: options.registration ?? true },
      revocation: { enabled: options.revocation ?? true },
    },
    scopes: ["openid", "offline_access", "email", "repo", "read:user"],
    claims: { openid: ["sub"], email: ["email"] },
    // The ID token carries the granted claims (email), as many providers' do.
    conformIdTokenClaims: false,
    pkce: { required: () => true },
    // Every client allowed the refresh_token grant gets a refresh token, without offline_access.
    issueRefreshToken: async (_ctx, client) => client.grantTypeAllowed("refresh_token"),
    rotateRefreshToken: true,
    ttl: {
      AccessToken: options.accessTokenTtl ?? 3600,
      AuthorizationCode: 60,
      RefreshToken: 24 * 3600,
      Grant: 24 * 3600,
      Interaction: 600,
      Session: 3600,
      IdToken: 3600,
    },
    findAccount: async (_ctx, sub) => ({ accountId: sub, claims: async () => ({ sub, email: `${sub}@example.test` }) }),
    interactions: { url: (_ctx, interaction) => `/interaction/${interaction.uid}` },
    cookies: { keys: ["test-cookie-key-0123456789abcdef"] },
    // Tests see the provider's own words in the answers it gives; no stack traces in the test log.
    renderError: async (ctx, out) => {
      ctx.type = "json";
      ctx.body = out;
    },
  };
  const provider = new Provider(issuer, configuration);
  provider.on("grant.success", (ctx: KoaContextWithOIDC) => grants.push(String(ctx.oidc.params?.grant_type ?? "")));
  provider.on("grant.error", (ctx: KoaContextWithOIDC) => grants.push(`${String(ctx.oidc.params?.grant_type ?? "")}:error`));
  provider.use(async (ctx, next) => {
    await next();
    const oidc = (ctx as KoaContextWithOIDC).oidc;
    if (ctx.path === "/token/revocation" && ctx.status === 200) revocations.push(String(oidc?.params?.token_type_hint ?? ""));
  });
  // The provider logs server errors through its own event: keep them out of the test output.
  provider.on("server_error", () => {});

  const handle = provider.callback();
  /** Endpoints a test holds (/token, /reg): the gate their requests wait at, and how many came. */
  const holds = new Map<string, { gate: Promise<void>; arrived: number }>();
  const accounts = new Map<string, { account: string; deny: boolean }>();
  server.on("request", (req: IncomingMessage, res: ServerResponse) => {
    const url = new URL(req.url ?? "/", issuer);
    if (url.pathname.startsWith("/interaction/")) {
      void interact(provider, req, res, accounts).catch((err: unknown) => {
        res.statusCode = 500;
        res.end(String(err));
      });
      return;
    }
    if (url.pathname.startsWith("/.well-known/oauth-protected-resource")) {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ resource: `${issuer}/mcp`, authorization_servers: [issuer] }));
      return;
    }
    if (url.pathname === "/mcp") {
      res.statusCode = 401;
      res.setHeader("www-authenticate", `Bearer resource_metadata="${issuer}/.well-known/oauth-protected-resource/mcp"`);
      res.end();
      return;
    }
    // RFC 8414 metadata: the same document as OpenID discovery.
    if (url.pathname === "/.well-known/oauth-authorization-server") req.url = "/.well-known/openid-configuration";
    const held = req.method === "POST" ? holds.get(url.pathname) : undefined;
    if (held) {
      // The body stays unread in the socket until the gate opens; the provider then reads it as usual.
      held.arrived++;
      void held.gate.then(() => handle(req, res));
      return;
    }
    handle(req, res);
  });

  function hold(path: string): EndpointHold {
    let open!: () => void;
    const held = { gate: new Promise<void>((resolve) => (open = resolve)), arrived: 0 };
    holds.set(path, held);
    return {
      get arrived() {
        return held.arrived;
      },
      release() {
        if (holds.get(path) === held) holds.delete(path);
        open();
      },
    };
  }

  let paused = false;
  server.on("connection", (socket) => {
    if (paused) socket.destroy();
  });
  return {
    issuer,
    mcpUrl: `${issuer}/mcp`,
    provider,
    grants,
    revocations,
    async addClient({ redirectUris, authMethod = "client_secret_post" }) {
      // As an administrator registers an application at a provider: here through its RFC 7591 endpoint.
      const res = await fetch(`${issuer}/reg`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          redirect_uris: redirectUris,
          grant_types: ["authorization_code", "refresh_token"],
          response_types: ["code"],
          token_endpoint_auth_method: authMethod,
        }),
      });
      const body = (await res.json()) as { client_id?: string; client_secret?: string };
      if (res.status !== 201 || !body.client_id) throw new Error(`registration failed: ${res.status} ${JSON.stringify(body)}`);
      return { clientId: body.client_id, clientSecret: body.client_secret ?? null };
    },
    async follow(start, { account = "alice", deny = false } = {}) {
      const jar = new Map<string, string>();
      let url = new URL(start);
      for (let hop = 0; hop < 10; hop++) {
        if (url.origin !== issuer) return url;
        if (url.pathname.startsWith("/interaction/")) accounts.set(url.pathname.split("/")[2]!, { account, deny });
        const res = await fetch(url, { redirect: "manual", headers: { cookie: [...jar].map(([k, v]) => `${k}=${v}`).join("; ") } });
        for (const line of res.headers.getSetCookie()) {
          const [pair] = line.split(";");
          const eq = pair!.indexOf("=");
          jar.set(pair!.slice(0, eq), pair!.slice(eq + 1));
        }
        const location = res.headers.get("location");
        if (!location) throw new Error(`the provider stopped at ${url}: ${res.status} ${await res.text()}`);
        await res.arrayBuffer();
        url = new URL(location, url);
      }
      throw new Error("too many redirects");
    },
    holdTokenEndpoint: () => hold("/token"),
    holdRegistrationEndpoint: () => hold("/reg"),
    async pause() {
      paused = true;
      server.closeAllConnections();
    },
    async resume() {
      paused = false;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The user logs in as the account `follow` named and grants (or denies) every scope asked. */
async function interact(provider: Provider, req: IncomingMessage, res: ServerResponse, accounts: Map<string, { account: string; deny: boolean }>) {
  const details = await provider.interactionDetails(req, res);
  const who = accounts.get(details.uid) ?? { account: "alice", deny: false };
  if (who.deny) {
    await provider.interactionFinished(req, res, { error: "access_denied", error_description: "The user said no." }, { mergeWithLastSubmission: false });
    return;
  }
  const accountId = details.session?.accountId ?? who.account;
  const clientId = String(details.params.client_id);
  const grant = details.grantId ? (await provider.Grant.find(details.grantId))! : new provider.Grant({ accountId, clientId });
  const missing = details.prompt.details as { missingOIDCScope?: string[]; missingOIDCClaims?: string[]; missingResourceScopes?: Record<string, string[]> };
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(" "));
  if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
  for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) grant.addResourceScope(indicator, scopes.join(" "));
  const grantId = await grant.save();
  await provider.interactionFinished(req, res, { login: { accountId }, consent: { grantId } }, { mergeWithLastSubmission: false });
}

/** Whether oidc-provider's types are present (it ships its own). */
export type { Provider };

/** Convenience for tests that need a server per file. */
export async function withOAuthServer<T>(run: (server: OAuthServer) => Promise<T>, options?: OAuthServerOptions): Promise<T> {
  const server = await startOAuthServer(options);
  try {
    return await run(server);
  } finally {
    await server.close();
  }
}

export type { Server };
