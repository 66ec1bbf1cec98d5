/**
 * A worker's line of steps that must run alone: suspects of taking the process down with them (their
 * step was in flight at two crashes of the service, src/core/revision-leases.ts). A crash while a step runs
 * with others in flight says nothing of which one caused it, so each suspect waits until no other step
 * of the worker is in flight, then runs while none starts; a crash then is its own. The worker claims
 * nothing new while the line is not empty.
 */
export class AloneLine {
  private readonly line: string[] = [];
  private readonly waiters = new Set<() => void>();

  /** Whether a suspect waits or runs: the worker starts no other step meanwhile. */
  get waiting(): boolean {
    return this.line.length > 0;
  }

  /**
   * Resolves true once the revision's step is first in line and every step in flight (`inFlight()`,
   * the suspects in line included) is a suspect in line: the others have ended. False when aborted first.
   */
  async turn(revisionId: string, inFlight: () => number, signal: AbortSignal): Promise<boolean> {
    this.line.push(revisionId);
    // The step the first in line waits for may be this one, in flight until now and in line from now.
    this.wakeAll();
    while (!(this.line[0] === revisionId && inFlight() === this.line.length)) {
      if (signal.aborted) return false;
      await new Promise<void>((resolve) => {
        const done = () => {
          this.waiters.delete(done);
          signal.removeEventListener("abort", done);
          resolve();
        };
        this.waiters.add(done);
        signal.addEventListener("abort", done, { once: true });
      });
    }
    return !signal.aborted;
  }

  /** A step of the worker ended (once it is out of the worker's steps in flight): it leaves the line, and the line looks again. */
  ended(revisionId: string): void {
    const at = this.line.indexOf(revisionId);
    if (at >= 0) this.line.splice(at, 1);
    this.wakeAll();
  }

  private wakeAll(): void {
    for (const wake of [...this.waiters]) wake();
  }
}
