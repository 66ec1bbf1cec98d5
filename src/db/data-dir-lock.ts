import { mkdirSync, readFileSync, unlinkSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** A start-up failure whose message says everything: printed as one line, without a stack. */
export class StartupError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "StartupError";
  }
}

export const LOCK_FILE = "dcp.pid";

interface LockContent {
  pid: number;
  started: string;
  command: string;
}

const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, under another user.
    return (err as NodeJS.ErrnoException).code === "EPERM";
  }
};

export interface DataDirLock {
  /** The pid of a dead process whose lock was taken over, if any. */
  readonly tookOverFrom: number | null;
  release(): void;
}

/**
 * One process per DATA_DIR: embedded PGlite cannot share its folder, and a second process that
 * tried would abort inside PGlite (`RuntimeError: Aborted()`). The lock is a pid file made with
 * O_EXCL; a second process is told which pid holds the folder; a lock left by a process that is
 * gone (killed, crashed) is taken over.
 */
export function lockDataDir(dataDir: string, command: string): DataDirLock {
  mkdirSync(dataDir, { recursive: true });
  const path = join(dataDir, LOCK_FILE);
  const content: LockContent = { pid: process.pid, started: new Date().toISOString(), command };
  let tookOverFrom: number | null = null;
  for (let attempt = 0; ; attempt++) {
    try {
      writeFileSync(path, `${JSON.stringify(content)}\n`, { flag: "wx" });
      break;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== "EEXIST" || attempt > 2) throw err;
    }
    let holder: Partial<LockContent> = {};
    try {
      holder = JSON.parse(readFileSync(path, "utf8")) as Partial<LockContent>;
    } catch {
      // Unreadable or half-written: treated as stale below.
    }
    if (typeof holder.pid === "number" && alive(holder.pid)) {
      throw new StartupError(
        `DATA_DIR ${dataDir} is in use by process ${holder.pid}${holder.command ? ` (${holder.command})` : ""}, started ${holder.started ?? "at an unknown time"}: stop it first, or give this process another DATA_DIR (or a DATABASE_URL). Lock file: ${path}`,
      );
    }
    tookOverFrom = typeof holder.pid === "number" ? holder.pid : null;
    try {
      unlinkSync(path);
    } catch {
      // Another process took it over first: the next attempt sees its lock.
    }
  }
  let released = false;
  return {
    tookOverFrom,
    release() {
      if (released) return;
      released = true;
      try {
        const holder = JSON.parse(readFileSync(path, "utf8")) as Partial<LockContent>;
        if (holder.pid === process.pid && holder.started === content.started) unlinkSync(path);
      } catch {
        // Gone already.
      }
    },
  };
}
