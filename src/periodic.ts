/**
 * Work a process does on a timer (a sweep, a vacuum), one run at a time: a run asked for while one is
 * in progress shares it, the timer never holds the process open, and stop() waits for the run in
 * progress (before the database closes). A subclass says what a run does (perform), which never throws.
 */
export abstract class PeriodicTask<T> {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<T> | null = null;

  /** One run; never throws (a failure is logged, and the next run tries again). */
  protected abstract perform(): Promise<T>;

  start(everyMs: number): this {
    this.timer = setInterval(() => void this.run(), everyMs);
    this.timer.unref();
    return this;
  }

  /** One run now (a call while one runs waits for that one); resolves with its result. */
  run(): Promise<T> {
    this.running ??= this.perform().finally(() => (this.running = null));
    return this.running;
  }

  /** No further runs; resolves once a run in progress has ended. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.running;
  }
}
