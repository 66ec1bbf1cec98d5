import { createClient, type Client } from "graphql-ws";
import WebSocket from "ws";
import type { TestApp } from "../support/app.js";
import { waitFor } from "../support/wait.js";

export interface Received {
  data?: any;
  errors?: { message: string; extensions?: Record<string, unknown> }[];
}

/** A graphql-ws client on the app's real port, authenticated by connection params as a dashboard would be. */
export function wsClient(url: string, key: string | null, extra: Record<string, unknown> = {}): Client {
  return createClient({
    url: `${url.replace(/^http/, "ws")}/graphql`,
    webSocketImpl: WebSocket,
    connectionParams: key ? { "X-Api-Key": key, ...extra } : extra,
    retryAttempts: 0,
    lazy: true,
  });
}

/**
 * Subscribes over graphql-ws; `messages` fills as results arrive, `done` settles when the server
 * completes the subscription (or rejects with the error or close event that ended it).
 */
export function subscribeWs(client: Client, query: string, variables: Record<string, unknown>) {
  const messages: Received[] = [];
  let dispose: () => void = () => {};
  const done = new Promise<void>((resolve, reject) => {
    dispose = client.subscribe({ query, variables }, { next: (m) => void messages.push(m as Received), error: reject, complete: resolve });
  });
  return { messages, done, dispose: () => dispose() };
}

/** How an operation ended: completed, with an error message's errors, or with the close event (code, reason) of its socket. */
export type Ending = "completed" | { errors: Received["errors"] } | { code?: number; reason?: string };

/** Waits, with waitFor's deadline, for an operation's `done` (subscribeWs, subscribeSse) to settle: how it ended. */
export async function endOf(done: Promise<void>, what: string): Promise<Ending> {
  let end: Ending | undefined;
  done.then(
    () => (end = "completed"),
    (e: Received["errors"] | { code?: number; reason?: string }) => (end = Array.isArray(e) ? { errors: e } : { code: e?.code, reason: e?.reason }),
  );
  return (await waitFor(() => end, Boolean, { what }))!;
}

/**
 * Subscribes over GraphQL over SSE (yoga's distinct connections mode) through app.fetch, reading
 * the event stream as a browser's fetch would: `next` events carry results, `complete` ends it.
 * `credentials`: an API key, or the headers to send (an Authorization header, say).
 */
export function subscribeSse(t: TestApp, credentials: string | Record<string, string>, query: string, variables: Record<string, unknown>) {
  const messages: Received[] = [];
  const abort = new AbortController();
  let status = 0;
  // While paused, nothing more is read: the stream backs up as it does for a client that stopped reading.
  let resumed: Promise<void> = Promise.resolve();
  let resume = () => {};
  const done = (async () => {
    const response = await t.app.fetch(
      new Request("http://test/graphql", {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "text/event-stream",
          ...(typeof credentials === "string" ? { "x-api-key": credentials } : credentials),
        },
        body: JSON.stringify({ query, variables }),
        signal: abort.signal,
      }),
    );
    status = response.status;
    if (!response.headers.get("content-type")?.startsWith("text/event-stream")) {
      messages.push((await response.json()) as Received);
      return;
    }
    const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    for (;;) {
      await resumed;
      const { value, done } = await reader.read();
      if (done) return;
      buffer += value;
      let end: number;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const event = /^event: (.*)$/m.exec(block)?.[1];
        const data = /^data: (.*)$/m.exec(block)?.[1];
        if (event === "complete") {
          await reader.cancel();
          return;
        }
        if (event === "next" && data) messages.push(JSON.parse(data) as Received);
      }
    }
  })();
  return {
    messages,
    done,
    status: () => status,
    close: () => abort.abort(),
    /** Stops reading (after the read under way, if any) until resume(). */
    pause: () => void (resumed = new Promise((r) => (resume = r))),
    resume: () => resume(),
  };
}

