import { API_KEY } from "./server.js";

export interface Answer<T = unknown> {
  status: number;
  body: T;
}

/** A JSON client for one benchmark server, authenticated with the bootstrap key. */
export class Client {
  constructor(readonly url: string) {}

  async call<T = unknown>(method: string, path: string, body?: unknown): Promise<Answer<T>> {
    const res = await fetch(`${this.url}${path}`, {
      method,
      headers: { "x-api-key": API_KEY, ...(body !== undefined && { "content-type": "application/json" }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
    const text = await res.text();
    return { status: res.status, body: (text === "" ? null : JSON.parse(text)) as T };
  }

  /** Like call, but any status other than `expected` is an error naming the call and the answer. */
  async expect<T = unknown>(expected: number, method: string, path: string, body?: unknown): Promise<T> {
    const answer = await this.call<T>(method, path, body);
    if (answer.status !== expected) {
      throw new Error(`${method} ${path}: ${answer.status}, expected ${expected}: ${JSON.stringify(answer.body).slice(0, 500)}`);
    }
    return answer.body;
  }

  /** A GraphQL operation over HTTP; GraphQL errors are thrown. */
  async graphql<T = Record<string, unknown>>(query: string, variables?: Record<string, unknown>): Promise<T> {
    const answer = await this.call<{ data?: T; errors?: unknown[] }>("POST", "/graphql", { query, variables });
    if (answer.status !== 200 || answer.body.errors || !answer.body.data) {
      throw new Error(`graphql: ${answer.status} ${JSON.stringify(answer.body).slice(0, 800)}`);
    }
    return answer.body.data;
  }
}

/** Runs fn over items with at most `limit` in flight; results in input order. */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await fn(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

/** Polls check every intervalMs until it returns a value other than undefined, or fails at the deadline. */
export async function pollUntil<T>(what: string, timeoutMs: number, intervalMs: number, check: () => Promise<T | undefined>): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (performance.now() > deadline) throw new Error(`${what}: not reached within ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
