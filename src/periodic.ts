import type { Logger } from "./logger.js";

/**
 * Work a process does on a timer (a sweep, a vacuum), one run at a time: a run asked for while one is
 * in progress shares it, the timer never holds the process open, and stop() waits for the run in
 * progress (before the database closes). A subclass says what a run does (perform). A run the timer
 * started that fails is logged and the next one tries again; a run asked for (run()) hands its
 * failure to the caller.
 */
export abstract class PeriodicTask<T> {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<T> | null = null;

  constructor(
    /** What the task is, as its failures are logged: "logs: sweep". */
    private readonly what: string,
    protected readonly logger: Logger,
  ) {}

  /** One run (a subclass logs the failures it expects with their context; others reach start's handler). */
  protected abstract perform(): Promise<T>;

  start(everyMs: number): this {
    this.timer = setInterval(() => {
      this.run().catch((err: unknown) => this.logger.error({ err }, `${this.what}: a run failed; the next one tries again`));
    }, everyMs);
    this.timer.unref();
    return this;
  }

  /** One run now (a call while one runs waits for that one); resolves with its result. */
  run(): Promise<T> {
    this.running ??= this.started().finally(() => (this.running = null));
    return this.running;
  }

  /** perform(), whose exception thrown before it returns a promise (one not written async) is a failed run too. */
  private started(): Promise<T> {
    try {
      return this.perform();
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** No further runs; resolves once a run in progress has ended. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    // Its failure is its caller's (or the timer's) to handle: stopping only waits for it to end.
    await this.running?.catch(() => undefined);
  }
}
