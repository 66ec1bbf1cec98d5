import type { GraphQLError } from "graphql";
import { getCORSHeadersByRequestAndOptions } from "@whatwg-node/server";
import { type FetchAPI, getSSEProcessor, processRegularResult } from "graphql-yoga";
import { GRAPHQL_CORS } from "./http.js";

const SSE = "text/event-stream";
/** The media types of yoga's regular (whole) answer, in the order its result processor lists them. */
const WHOLE = ["application/graphql-response+json", "application/json"] as const;

/** What yoga's result processors use of a fetch API: the platform's own, which the server writes at once. */
const PLATFORM = { Response, ReadableStream, TextEncoder } as unknown as FetchAPI;

/** Whether a media type of an answer is one a media range of Accept (`*`/`*`, `application/*`) covers. */
const covers = (range: string, type: string) => {
  const [rangeType, rangeSubtype] = range.split("/");
  const [mainType, subtype] = type.split("/");
  return (rangeType === "*" || rangeType === mainType) && (rangeSubtype === "*" || rangeSubtype === subtype);
};

/**
 * The media type yoga answers a single result (an error, here) in, for this Accept: its choice
 * (graphql-yoga's useResultProcessors and accept.js) made the same way. The ranges count in the
 * client's order, q-values aside, those with a charset other than UTF-8 not at all (no Accept is
 * `*`/`*`); a whole answer wins wherever one is accepted, in the media type the first range that
 * covers one names (application/json for a wildcard), else an event stream. Where yoga would answer
 * 406 (nothing it can say in, multipart/mixed among them), a refusal keeps its own status and says it
 * in application/json, GraphQL over HTTP's media type for clients that name none it serves.
 */
export function refusalMediaType(accept: string | null): string {
  const ranges = (accept || "*/*")
    .replace(/\s/g, "")
    .toLowerCase()
    .split(",")
    .flatMap((entry) => {
      const [range, ...params] = entry.split(";");
      const charset = params.find((p) => p.includes("charset=")) ?? "charset=utf-8";
      return range && charset === "charset=utf-8" ? [range] : [];
    });
  for (const range of ranges) {
    const whole = WHOLE.filter((type) => covers(range, type));
    if (whole.length > 0) return whole.at(-1)!;
  }
  return ranges.some((range) => covers(range, SSE)) ? SSE : "application/json";
}

/**
 * The answer to a GraphQL request over HTTP (GET, POST, SSE) refused before yoga reads it: by a limit
 * of middleware/, which answers every route ahead of it. A GraphQL response whose one error is the
 * refusal, made by yoga's own result processors as yoga answers its own errors (useAuthenticationFirst's
 * 401 among them): the media type by Accept, the status and headers (Retry-After) from the error's
 * extensions.http, left out of the body. Its parameters are never read, nor its body.
 */
export async function refusalAnswer(request: Request, error: GraphQLError): Promise<Response> {
  const mediaType = refusalMediaType(request.headers.get("accept"));
  const result = { errors: [error] };
  const answer = await (mediaType === SSE ? getSSEProcessor()(result, PLATFORM, mediaType) : processRegularResult(result, PLATFORM, mediaType));
  // With yoga's CORS headers, computed as yoga computes them: a dashboard elsewhere can read the refusal.
  for (const [name, value] of Object.entries(getCORSHeadersByRequestAndOptions(request, GRAPHQL_CORS) ?? {})) answer.headers.set(name, value);
  return answer;
}
