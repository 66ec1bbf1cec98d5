import { z } from "zod";
import { secretValue } from "../secret-schemas.js";
import { queryInt } from "../validation.js";

/**
 * The agents' OAuth service's requests, as the reference contract names them. Strings the contract
 * leaves free are bounded (and identifiers kept printable) so that nothing unstorable or unbounded
 * reaches the database or a provider.
 */

/** A provider's name in the workspace: it appears in paths (/v2/auth/callback/{provider_id}). */
export const providerSlugSchema = z.string().min(1, { abort: true }).max(100, { abort: true }).regex(/^[A-Za-z0-9][A-Za-z0-9_.-]*$/);

export const TOKEN_ENDPOINT_AUTH_METHODS = ["none", "client_secret_basic", "client_secret_post"] as const;
export const PROVIDER_TYPES = ["microsoft", "salesforce", "slack"] as const;
/** RFC 7636's methods; S256 unless a provider can do only plain. */
export const CODE_CHALLENGE_METHODS = ["S256", "plain"] as const;

const printable = (max: number) => z.string().min(1, { abort: true }).max(max, { abort: true }).regex(/^[^\s\p{Cc}]+$/u);
/** Sealed at rest and never quoted back, not even in a 422 (secret-schemas.ts). */
const clientSecret = secretValue(z.string().min(1).max(4096));

/** What an http:// endpoint is told where OAUTH_ALLOW_HTTP is off: the setting that accepts it. */
export const HTTP_NEEDS_SETTING = "http:// is accepted only where the service runs with OAUTH_ALLOW_HTTP=on, as for a provider on its own machine";

/** An endpoint URL: https, or http where OAUTH_ALLOW_HTTP is on (a provider on this machine, tests). */
export const endpointUrl = (allowHttp: boolean) =>
  z
    .url({
      protocol: allowHttp ? /^https?$/ : /^https$/,
      error: (issue) =>
        allowHttp
          ? "must be an http(s) URL"
          : typeof issue.input === "string" && /^http:\/\//i.test(issue.input)
            ? `must be an https URL: ${HTTP_NEEDS_SETTING}`
            : "must be an https URL",
    })
    .max(2048);

export const providerCreateSchema = (allowHttp: boolean) =>
  z.object({
    provider_id: providerSlugSchema,
    name: z.string().min(1).max(255),
    client_id: printable(1000),
    client_secret: clientSecret.nullish(),
    auth_url: endpointUrl(allowHttp),
    token_url: endpointUrl(allowHttp),
    uses_pkce: z.boolean().default(false),
    code_challenge_method: z.enum(CODE_CHALLENGE_METHODS).default("S256"),
    provider_type: z.enum(PROVIDER_TYPES).nullish(),
    token_endpoint_auth_method: z.enum(TOKEN_ENDPOINT_AUTH_METHODS).default("client_secret_post"),
    /** An extension: the provider's RFC 7009 endpoint, so that deleted tokens are revoked there. */
    revocation_url: endpointUrl(allowHttp).nullish(),
  });

/** PATCH: a field that is absent or null keeps its value. */
export const providerUpdateSchema = (allowHttp: boolean) =>
  z.object({
    name: z.string().min(1).max(255).nullish(),
    client_id: printable(1000).nullish(),
    client_secret: clientSecret.nullish(),
    auth_url: endpointUrl(allowHttp).nullish(),
    token_url: endpointUrl(allowHttp).nullish(),
    uses_pkce: z.boolean().nullish(),
    code_challenge_method: z.enum(CODE_CHALLENGE_METHODS).nullish(),
    revocation_url: endpointUrl(allowHttp).nullish(),
  });

export const mcpDiscoverSchema = (allowHttp: boolean) =>
  z.object({ provider_id: providerSlugSchema, name: z.string().min(1).max(255), mcp_server_url: endpointUrl(allowHttp) });

const scopeSchema = z.string().min(1).max(256).regex(/^[\x21\x23-\x5B\x5D-\x7E]+$/, "an OAuth scope (RFC 6749 3.3: printable ASCII, no space, quote or backslash)");

export const authenticateSchema = z.object({
  user_id: z.string().max(255).nullish(),
  ls_user_id: z.string().max(255).nullish(),
  agent_id: z.string().max(255).nullish(),
  provider: providerSlugSchema,
  scopes: z.array(scopeSchema).max(100),
  use_agent_builder_public_oauth: z.boolean().default(false),
  force_new: z.boolean().default(false),
  token_id: z.guid().nullish(),
  is_default: z.boolean().default(true),
});
export type AuthenticateInput = z.output<typeof authenticateSchema>;

// Secrets until used: whoever reads them can finish the caller's flow (never quoted in a 422).
export const finalizeSchema = z.object({ code: secretValue(z.string().min(1).max(4096)), state: secretValue(z.string().min(1).max(512)) });

/**
 * GET /v2/auth/callback/{provider_id} and /v2/auth/setup/{provider_id}. All optional: a refusal
 * carries only `error`. Code and state are secrets here too (finalizeSchema).
 */
export const callbackQuerySchema = z.object({
  code: secretValue(z.string().max(4096)).optional(),
  state: secretValue(z.string().max(512)).optional(),
  error: z.string().max(256).optional(),
  error_description: z.string().max(2048).optional(),
  /** RFC 9207: the issuer of the answer, checked against the provider's. */
  iss: z.string().max(2048).optional(),
  setup_action: z.string().max(64).optional(),
  installation_id: queryInt().optional(),
});
export type CallbackQuery = z.output<typeof callbackQuerySchema>;

/** How long GET /v2/auth/wait may hold a request; a longer `timeout` waits this long. */
export const MAX_WAIT_SECONDS = 60;

export const waitQuerySchema = z.object({
  // Any integer is accepted (the contract allows it); the wait itself is kept within 0..MAX_WAIT_SECONDS.
  timeout: queryInt()
    .default(30)
    .transform((s) => Math.min(Math.max(s, 0), MAX_WAIT_SECONDS)),
});

export const tokenUpdateSchema = z.object({
  provider_account_label: z.string().max(255).nullish(),
  is_default: z.boolean().nullish(),
});

export const tokenListQuerySchema = z.object({ provider_id: z.string().max(100).optional() });
export const tokenProviderQuerySchema = z.object({ provider_id: z.string().min(1).max(100) });
