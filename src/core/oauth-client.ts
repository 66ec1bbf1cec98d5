import * as oauth from "oauth4webapi";
import * as oidc from "openid-client";
import type { z } from "zod";
import { badRequest, CoreError } from "./errors.js";
import { isStorable } from "./validation.js";
import { endpointUrl, HTTP_NEEDS_SETTING, providerCreateSchema, TOKEN_ENDPOINT_AUTH_METHODS } from "./schemas/oauth.js";
import { storableText } from "./text.js";

/**
 * This service as an OAuth 2.0 client of the providers a workspace configures, over panva's
 * openid-client (and oauth4webapi for discovery and RFC 7591 registration): authorization URLs with
 * PKCE, the code exchange, refresh, RFC 7009 revocation. Every failure becomes a CoreError that says
 * whose fault it was: the provider refused (400: the code, the grant or the client is bad) or could
 * not be reached or answered nonsense (502). Nothing of a token or a secret is ever in a message.
 */

/** What the client needs of a provider (its client secret in plain, opened by the caller). */
export interface ProviderEndpoints {
  providerId: string;
  clientId: string;
  clientSecret: string | null;
  authUrl: string;
  tokenUrl: string;
  revocationUrl: string | null;
  issuer: string | null;
  tokenEndpointAuthMethod: string;
}

/** A token endpoint's answer, as the vault stores it. */
export interface TokenSet {
  accessToken: string;
  refreshToken: string | null;
  tokenType: string;
  /** The scopes granted (the answer's `scope`), or null when the provider did not say. */
  scopes: string[] | null;
  expiresAt: Date | null;
  /** Who the user is at the provider, from a validated ID token: email, username, name or subject. */
  accountLabel: string | null;
}

/** Metadata found for an MCP server's authorization server, and the client registered there. */
export interface DiscoveredProvider {
  issuer: string;
  authUrl: string;
  tokenUrl: string;
  revocationUrl: string | null;
  clientId: string;
  clientSecret: string | null;
  tokenEndpointAuthMethod: string;
  usesPkce: boolean;
  /**
   * Deletes the client registered for it (RFC 7592), for a discovery refused after the registration:
   * where the server gave a registration_client_uri and a registration_access_token. Best effort,
   * never throws: true when the server confirmed it.
   */
  unregister(): Promise<boolean>;
}

/**
 * The issuer a provider's answers (their `iss`, their ID tokens') are checked against: the one it
 * names, else, for a provider configured by hand, its authorization endpoint's origin.
 */
export const expectedIssuer = (p: { issuer: string | null; authUrl: string }): string => p.issuer ?? new URL(p.authUrl).origin;

/** Seconds each request to an OAuth provider may take (the client's `timeoutSeconds` in the service). */
export const PROVIDER_TIMEOUT_SECONDS = 10;

/**
 * The most of a provider's answer that is read: token answers and metadata documents are a few KB.
 * A server sending more (or without end) is cut off there, instead of filling the service's memory.
 */
export const MAX_PROVIDER_ANSWER_BYTES = 1024 * 1024;

export interface OAuthClientSettings {
  /** Whether http:// endpoints are allowed (a provider on this machine, tests); https only otherwise. */
  allowHttp: boolean;
  /** Seconds each request to a provider may take. */
  timeoutSeconds: number;
}

export class OAuthClient {
  constructor(private readonly settings: OAuthClientSettings) {}

  authorizationUrl(p: ProviderEndpoints, params: Record<string, string>): string {
    return oidc.buildAuthorizationUrl(this.configuration(p), params).href;
  }

  /** Exchanges the code the provider sent back to `callbackUrl` (which carries code, state and maybe iss). */
  async exchange(p: ProviderEndpoints, callbackUrl: URL, checks: { state: string; codeVerifier: string | null; redirectUri: string }): Promise<TokenSet> {
    const tokens = await this.call(p, "exchange the authorization code", () =>
      oidc.authorizationCodeGrant(
        this.configuration(p),
        callbackUrl,
        { expectedState: checks.state, ...(checks.codeVerifier && { pkceCodeVerifier: checks.codeVerifier }) },
        { redirect_uri: checks.redirectUri },
      ),
    );
    return this.kept(p, tokens);
  }

  async refresh(p: ProviderEndpoints, refreshToken: string): Promise<TokenSet> {
    return this.kept(p, await this.call(p, "refresh the token", () => oidc.refreshTokenGrant(this.configuration(p), refreshToken)));
  }

  /**
   * A token answer as the vault keeps it; one it cannot keep (tokenSet: nonsense, a 502) issued its
   * tokens all the same, and nothing will keep them: they are revoked there first (best effort).
   */
  private async kept(p: ProviderEndpoints, tokens: oidc.TokenEndpointResponse & Partial<oidc.TokenEndpointResponseHelpers>): Promise<TokenSet> {
    try {
      return tokenSet(tokens);
    } catch (err) {
      const [value, hint] = tokens.refresh_token ? [tokens.refresh_token, "refresh_token" as const] : [tokens.access_token, "access_token" as const];
      await this.revoke(p, value, hint).catch(() => false);
      throw err;
    }
  }

  /** RFC 7009; false when the provider publishes no revocation endpoint. */
  async revoke(p: ProviderEndpoints, token: string, hint: "access_token" | "refresh_token"): Promise<boolean> {
    if (!p.revocationUrl) return false;
    await this.call(p, "revoke the token", () => oidc.tokenRevocation(this.configuration(p), token, { token_type_hint: hint }));
    return true;
  }

  /**
   * Finds the authorization server of an MCP server (RFC 9728 protected resource metadata, else the
   * server's own origin), reads its metadata (RFC 8414, else OpenID discovery), and registers a
   * client there (RFC 7591) that may redirect to `redirectUri`.
   */
  async discoverAndRegister(mcpServerUrl: string, registration: { clientName: string; redirectUri: string }): Promise<DiscoveredProvider> {
    const where = `the MCP server ${mcpServerUrl}`;
    const issuer = (await this.protectedResourceIssuer(new URL(mcpServerUrl))) ?? new URL(mcpServerUrl).origin;
    if (!URL.canParse(issuer)) throw new CoreError("UPSTREAM", `${where} names an authorization server that is not a URL.`);
    const as = await this.authorizationServer(new URL(issuer), where);
    if (!as.authorization_endpoint || !as.token_endpoint) {
      throw badRequest(`The authorization server ${as.issuer} of ${where} publishes no authorization or token endpoint.`);
    }
    // Stored as a provider's endpoints: held to what a provider created by hand must give.
    const endpoint = endpointUrl(this.settings.allowHttp);
    for (const url of [as.authorization_endpoint, as.token_endpoint, as.registration_endpoint, as.revocation_endpoint]) {
      if (url !== undefined && !endpoint.safeParse(url).success) {
        throw new CoreError("UPSTREAM", `The authorization server ${as.issuer} of ${where} publishes an endpoint that is not ${this.settings.allowHttp ? "an http(s) URL" : `an https URL (${HTTP_NEEDS_SETTING})`}.`);
      }
    }
    if (!as.registration_endpoint) {
      throw badRequest(
        `The authorization server ${as.issuer} of ${where} does not allow dynamic client registration (RFC 7591): create the provider with POST /v2/auth/providers and a client_id registered there.`,
      );
    }
    const supported: unknown[] = Array.isArray(as.token_endpoint_auth_methods_supported) ? as.token_endpoint_auth_methods_supported : ["client_secret_basic"];
    const method = ["client_secret_post", "client_secret_basic", "none"].find((m) => supported.includes(m)) ?? "none";
    const client = await this.guard(`register a client at ${as.issuer}`, async () =>
      oauth.processDynamicClientRegistrationResponse(
        await oauth.dynamicClientRegistrationRequest(
          as,
          {
            client_name: registration.clientName,
            redirect_uris: [registration.redirectUri],
            grant_types: ["authorization_code", "refresh_token"],
            response_types: ["code"],
            token_endpoint_auth_method: method,
          },
          this.requestOptions(),
        ),
      ),
    );
    // Stored as a provider's client: held to what a provider created by hand must give (a value PostgreSQL
    // cannot store was a 500, an unbounded one was served by every read). Named, never quoted: it may be a secret.
    const byHand = providerCreateSchema(this.settings.allowHttp).shape;
    const acceptable = <T>(field: string, rule: string, schema: z.ZodType<T>, value: unknown): T => {
      const parsed = schema.safeParse(value);
      if (parsed.success && (typeof parsed.data !== "string" || isStorable(parsed.data))) return parsed.data;
      throw new CoreError("UPSTREAM", `The authorization server ${as.issuer} of ${where} registered a client whose ${field} is not one a provider can have (${rule}).`);
    };
    const unregister = () => this.unregister(client);
    try {
      return {
        issuer: as.issuer,
        authUrl: as.authorization_endpoint,
        tokenUrl: as.token_endpoint,
        revocationUrl: as.revocation_endpoint ?? null,
        clientId: acceptable("client_id", "1 to 1000 printable characters", byHand.client_id, client.client_id),
        clientSecret: acceptable("client_secret", "1 to 4096 characters", byHand.client_secret, client.client_secret) ?? null,
        // Not said: the method asked for.
        tokenEndpointAuthMethod: acceptable(
          "token_endpoint_auth_method",
          `one of ${TOKEN_ENDPOINT_AUTH_METHODS.join(", ")}`,
          byHand.token_endpoint_auth_method,
          client.token_endpoint_auth_method ?? method,
        ),
        // MCP requires PKCE of every client; S256 is what servers support.
        usesPkce: true,
        unregister,
      };
    } catch (err) {
      // Refused: the client registered for it is of no use to anyone.
      await unregister();
      throw err;
    }
  }

  /** RFC 7592's DELETE of a registered client, where its registration said how; false when it could not be done. */
  private async unregister(client: oauth.OmitSymbolProperties<oauth.Client>): Promise<boolean> {
    const uri = client.registration_client_uri;
    const token = client.registration_access_token;
    if (typeof uri !== "string" || typeof token !== "string" || !endpointUrl(this.settings.allowHttp).safeParse(uri).success) return false;
    try {
      const response = await boundedFetch(uri, {
        method: "DELETE",
        headers: { authorization: `Bearer ${token}` },
        body: undefined,
        redirect: "manual",
        signal: AbortSignal.timeout(this.settings.timeoutSeconds * 1000),
      });
      await response.body?.cancel();
      return response.status === 204 || response.status === 200;
    } catch {
      return false;
    }
  }

  private async protectedResourceIssuer(resource: URL): Promise<string | null> {
    try {
      const response = await retryOnce(() => oauth.resourceDiscoveryRequest(resource, this.requestOptions()));
      const metadata = await oauth.processResourceDiscoveryResponse(resource, response);
      return metadata.authorization_servers?.[0] ?? null;
    } catch (err) {
      // No RFC 9728 metadata (an older MCP server): its own origin is the authorization server. A
      // server that cannot be reached at all fails in the next step, with that said.
      if (isUnreachable(err)) throw unreachable(`the MCP server ${resource.href}`);
      if (tooLarge(err)) throw answerTooLarge(`the MCP server ${resource.href}`);
      return null;
    }
  }

  private async authorizationServer(issuer: URL, where: string): Promise<oauth.AuthorizationServer> {
    let lastError: unknown = null;
    for (const algorithm of ["oauth2", "oidc"] as const) {
      try {
        const response = await retryOnce(() => oauth.discoveryRequest(issuer, { ...this.requestOptions(), algorithm }));
        return await oauth.processDiscoveryResponse(issuer, response);
      } catch (err) {
        if (isUnreachable(err)) throw unreachable(`the authorization server ${issuer.href}`);
        if (tooLarge(err)) throw answerTooLarge(`the authorization server ${issuer.href}`);
        lastError = err;
      }
    }
    throw badRequest(
      `No OAuth metadata found for ${where}: neither ${issuer.origin}/.well-known/oauth-authorization-server (RFC 8414) nor /.well-known/openid-configuration answered with a valid document (${describe(lastError)}).`,
    );
  }

  private configuration(p: ProviderEndpoints): oidc.Configuration {
    const server: oidc.ServerMetadata = {
      issuer: expectedIssuer(p),
      authorization_endpoint: p.authUrl,
      token_endpoint: p.tokenUrl,
      ...(p.revocationUrl && { revocation_endpoint: p.revocationUrl }),
    };
    // A client without a secret is a public client, whatever method it names (RFC 6749 2.3.1).
    const auth = !p.clientSecret
      ? oidc.None()
      : p.tokenEndpointAuthMethod === "client_secret_basic"
        ? oidc.ClientSecretBasic(p.clientSecret)
        : oidc.ClientSecretPost(p.clientSecret);
    const config = new oidc.Configuration(server, p.clientId, undefined, auth);
    config.timeout = this.settings.timeoutSeconds;
    config[oidc.customFetch] = boundedFetch;
    if (this.settings.allowHttp) oidc.allowInsecureRequests(config);
    return config;
  }

  private requestOptions() {
    return {
      signal: () => AbortSignal.timeout(this.settings.timeoutSeconds * 1000),
      [oauth.allowInsecureRequests]: this.settings.allowHttp,
      [oauth.customFetch]: boundedFetch,
    };
  }

  private call<T>(p: ProviderEndpoints, what: string, run: () => Promise<T>): Promise<T> {
    return this.guard(`${what} at provider '${p.providerId}'`, run);
  }

  /** Runs one exchange with a provider; its failures as CoreErrors. */
  private async guard<T>(what: string, run: () => Promise<T>): Promise<T> {
    try {
      return await run();
    } catch (err) {
      throw providerError(what, err);
    }
  }
}

/** The longest lifetime a token's expires_in may give it: past that, the answer is nonsense (Date has no such instant, or none worth keeping). */
const MAX_EXPIRES_IN_SECONDS = 100 * 365 * 24 * 3600;

/**
 * The tokens a provider answered, as stored: an answer whose values cannot be (an expires_in no date
 * can hold, a scope or token PostgreSQL cannot store as text) is nonsense, a 502 that stores nothing,
 * not a failure to store it. An account label that is not storable text is left out.
 */
export function tokenSet(tokens: oidc.TokenEndpointResponse & Partial<oidc.TokenEndpointResponseHelpers>): TokenSet {
  const claims = tokens.id_token && tokens.claims ? tokens.claims() : undefined;
  const label = claims && [claims.email, claims.preferred_username, claims.name, claims.sub].find((v): v is string => typeof v === "string" && v !== "" && isStorable(v));
  const scopes = typeof tokens.scope === "string" ? tokens.scope.split(" ").filter((s) => s !== "") : null;
  const expiresIn = tokens.expires_in;
  const nonsense = (why: string) => new CoreError("UPSTREAM", `The provider's answer was not a valid OAuth response (${why}).`);
  if (expiresIn !== undefined && (typeof expiresIn !== "number" || !Number.isFinite(expiresIn) || Math.abs(expiresIn) > MAX_EXPIRES_IN_SECONDS)) throw nonsense("its expires_in is out of range");
  if (scopes?.some((scope) => !isStorable(scope)) || (tokens.token_type !== undefined && !isStorable(tokens.token_type))) throw nonsense("it holds text that is not valid");
  return {
    accessToken: tokens.access_token,
    refreshToken: tokens.refresh_token ?? null,
    tokenType: tokens.token_type ?? "bearer",
    scopes,
    expiresAt: typeof expiresIn === "number" ? new Date(Date.now() + expiresIn * 1000) : null,
    accountLabel: label ?? null,
  };
}

/**
 * A GET that failed to connect is tried once more: a pooled keep-alive connection the server had
 * just closed fails the first attempt of an otherwise healthy exchange.
 */
async function retryOnce<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (err) {
    if (!isUnreachable(err)) throw err;
    return run();
  }
}

/** Whether the provider could not be reached at all (refused, reset, timed out, no such host). */
function isUnreachable(err: unknown): boolean {
  if (!(err instanceof Error)) return false;
  if (err.name === "TimeoutError" || err.name === "AbortError") return true;
  return err instanceof TypeError && /fetch failed/i.test(err.message);
}

const unreachable = (what: string) => new CoreError("UPSTREAM", `Could not reach ${what}: it did not answer. Try again later.`);
const answerTooLarge = (what: string) => new CoreError("UPSTREAM", `The answer of ${what} was larger than ${MAX_PROVIDER_ANSWER_BYTES} bytes.`);

/** A provider's answer went past MAX_PROVIDER_ANSWER_BYTES (boundedFetch). */
class AnswerTooLarge extends Error {
  constructor() {
    super(`the answer is larger than ${MAX_PROVIDER_ANSWER_BYTES} bytes`);
  }
}

/** Whether err, or an error it was caused by (the libraries wrap what reading a body threw), is AnswerTooLarge. */
function tooLarge(err: unknown, depth = 0): boolean {
  if (err instanceof AnswerTooLarge) return true;
  return err instanceof Error && depth < 5 && tooLarge(err.cause, depth + 1);
}

/** Statuses whose answer has no body (a Response with one cannot be made). */
const NULL_BODY_STATUSES = new Set([101, 204, 205, 304]);

/**
 * fetch, as openid-client and oauth4webapi take it (their customFetch), with the answer's body cut
 * off past MAX_PROVIDER_ANSWER_BYTES: reading more fails with AnswerTooLarge and cancels the
 * stream, which closes the connection. A Content-Length over the limit fails at once.
 */
const boundedFetch: oidc.CustomFetch = async (url, options) => {
  // The libraries' options are fetch's (their type names a body type of their own).
  const response = await fetch(url, options as RequestInit);
  if (!response.body || NULL_BODY_STATUSES.has(response.status)) return response;
  if (Number(response.headers.get("content-length")) > MAX_PROVIDER_ANSWER_BYTES) {
    await response.body.cancel();
    throw new AnswerTooLarge();
  }
  let read = 0;
  const bounded = response.body.pipeThrough(
    new TransformStream<Uint8Array, Uint8Array>({
      transform(chunk, controller) {
        read += chunk.byteLength;
        if (read > MAX_PROVIDER_ANSWER_BYTES) controller.error(new AnswerTooLarge());
        else controller.enqueue(chunk);
      },
    }),
  );
  return new Response(bounded, { status: response.status, statusText: response.statusText, headers: response.headers });
};

/** How much of a provider's error code and description is told (and kept with a failed flow). */
const MAX_REFUSAL_LENGTH = 1024;

/**
 * A provider's OAuth error, its code and description, in words it chose: told to the client and kept
 * with the flow it failed, so as text the database can hold, and not at any length.
 */
const refusalText = (err: { error: string; error_description?: string }) =>
  `${storableText(err.error, MAX_REFUSAL_LENGTH)}${err.error_description ? `: ${storableText(err.error_description, MAX_REFUSAL_LENGTH)}` : ""}`;

function describe(err: unknown): string {
  if (err instanceof oauth.ResponseBodyError || err instanceof oidc.ResponseBodyError) return refusalText(err);
  if (err instanceof oauth.WWWAuthenticateChallengeError) return `HTTP ${err.status}`;
  if (err instanceof Error && "code" in err) return String((err as { code: unknown }).code);
  return "unexpected answer";
}

/**
 * The provider's refusal (an OAuth error in its answer) is the request's fault: 400 with the
 * provider's error code and description. Anything else (no answer, a 5xx, a malformed answer) is the
 * provider's: 502. Messages never quote a response body, which could hold a token.
 */
export function providerError(what: string, err: unknown): CoreError {
  if (err instanceof CoreError) return err;
  if (isUnreachable(err)) return new CoreError("UPSTREAM", `Could not ${what}: the provider did not answer. Try again later.`);
  if (tooLarge(err)) return new CoreError("UPSTREAM", `Could not ${what}: its answer was larger than ${MAX_PROVIDER_ANSWER_BYTES} bytes.`);
  const refusal = err instanceof oauth.ResponseBodyError || err instanceof oidc.ResponseBodyError ? err : null;
  if (refusal && refusal.status < 500) return badRequest(`Could not ${what}: the provider refused (${describe(refusal)}).`);
  if (err instanceof oauth.AuthorizationResponseError || err instanceof oidc.AuthorizationResponseError) {
    return badRequest(`Could not ${what}: the provider refused (${refusalText(err)}).`);
  }
  return new CoreError("UPSTREAM", `Could not ${what}: the provider's answer was not a valid OAuth response (${describe(err)}).`);
}
