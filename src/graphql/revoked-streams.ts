import type { ExecutionResult } from "graphql";
import type { Plugin } from "graphql-yoga";
import { keyActor, REVOKED_KEY_MESSAGE, type Tenant } from "../core/auth.js";
import { EXPIRED_TOKEN_MESSAGE, whenExpired } from "../core/credential-expiry.js";
import { CoreError } from "../core/errors.js";
import type { Core } from "../core/index.js";
import { toGraphQLError } from "./errors.js";

/** Open streams by actor (Tenant.actor: whose credentials started them). */
type OpenStreams = Map<string, Set<RevocableStream>>;

const DONE: IteratorResult<ExecutionResult> = { value: undefined, done: true };

const revokedKey = () => new CoreError("UNAUTHENTICATED", REVOKED_KEY_MESSAGE);
const expiredToken = () => new CoreError("UNAUTHENTICATED", EXPIRED_TOKEN_MESSAGE);

/**
 * SSE subscriptions end when the credentials that started them stop being valid: an API key revoked,
 * on whichever replica serves them (the revocation reaches every replica's authenticator, over the
 * bus or, on a replica whose bus was reconnecting, when it resyncs), or a bearer token reaching its
 * exp. One last result says why, in HTTP's 401 words and code, then the stream completes. A new
 * request with those credentials is refused by authentication (authenticate.ts); a stream already
 * open would otherwise go on for ever. graphql-ws subscriptions do not pass here: they end with
 * their socket (ws.ts).
 *
 * They also end, completing as a subscription that has nothing more to send, when yoga is disposed
 * (the server stopping): an SSE answer streams until its subscription ends, and the HTTP server's
 * close waits for every answer, so one open stream held a graceful stop for ever. A stream that
 * opens after that (its request was in flight) ends at once.
 */
export function useEndedOnRevocation(core: Core): Plugin {
  const open: OpenStreams = new Map();
  let stopping = false;
  const stopListening = core.auth.onKeyRevoked((keyId) => {
    const actor = keyActor(keyId);
    const streams = open.get(actor);
    open.delete(actor);
    for (const stream of streams ?? []) stream.end(revokedKey());
  });
  return {
    onSubscribe({ args }) {
      const tenant = (args.contextValue as { tenant?: Tenant }).tenant;
      if (!tenant) return;
      return {
        onSubscribeResult({ result, setResult }) {
          if (!(Symbol.asyncIterator in result)) return;
          const stream = new RevocableStream(result[Symbol.asyncIterator](), tenant, open);
          setResult(stream);
          if (stopping) stream.end();
          // Revoked after the request was authenticated and before its stream opened: ended at once.
          else if (!core.auth.stillAdmitted(tenant.actor)) stream.end(revokedKey());
        },
      };
    },
    onDispose() {
      stopListening();
      stopping = true;
      // Each end() takes its stream out of `open`: ended from a copy.
      for (const stream of [...open.values()].flatMap((streams) => [...streams])) stream.end();
    },
  };
}

/**
 * A subscription's results until its credentials stop being valid, then the refusal, then the end;
 * or until the server stops, then the end. The end does not wait for the next event: a waiting next()
 * answers at once, and the source is released.
 */
class RevocableStream implements AsyncIterableIterator<ExecutionResult> {
  private ending = false;
  /** The last result to send, if it ends for its credentials. */
  private refusal: CoreError | null = null;
  private told = false;
  private wake: () => void = () => {};
  private readonly ended = new Promise<void>((resolve) => (this.wake = resolve));
  /** Set once the expiry is armed; until then (a token past its exp ends the stream at once) nothing to stop. */
  private stopExpiry: () => void = () => {};

  constructor(
    private readonly inner: AsyncIterator<ExecutionResult>,
    private readonly tenant: Tenant,
    private readonly open: OpenStreams,
  ) {
    let streams = open.get(tenant.actor);
    if (!streams) open.set(tenant.actor, (streams = new Set()));
    streams.add(this);
    // Its exp may have passed while the stream opened (its first read): then it ends here and now.
    this.stopExpiry = whenExpired(tenant, () => this.end(expiredToken()));
  }

  /**
   * Ends the stream, with `refusal` as its last result if one is given; without, it completes. Ended
   * twice, the first end stands.
   */
  end(refusal?: CoreError): void {
    if (this.ending) return;
    this.ending = true;
    this.forget();
    this.refusal = refusal ?? null;
    this.wake();
    this.inner.return?.().catch(() => undefined);
  }

  async next(): Promise<IteratorResult<ExecutionResult>> {
    if (!this.ending) {
      let step;
      try {
        step = await Promise.race([this.inner.next(), this.ended]);
      } catch (err) {
        this.forget();
        throw err;
      }
      if (!this.ending) {
        if (step!.done) this.forget();
        return step!;
      }
    }
    if (this.told || !this.refusal) return DONE;
    this.told = true;
    return { value: { errors: [toGraphQLError(this.refusal)] }, done: false };
  }

  async return(): Promise<IteratorResult<ExecutionResult>> {
    this.forget();
    await this.inner.return?.();
    return DONE;
  }

  async throw(error?: unknown): Promise<IteratorResult<ExecutionResult>> {
    this.forget();
    if (this.inner.throw) return this.inner.throw(error);
    throw error;
  }

  [Symbol.asyncIterator]() {
    return this;
  }

  private forget(): void {
    this.stopExpiry();
    const streams = this.open.get(this.tenant.actor);
    if (!streams?.delete(this) || streams.size > 0) return;
    this.open.delete(this.tenant.actor);
  }
}
