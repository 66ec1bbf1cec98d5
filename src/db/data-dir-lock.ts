import { randomBytes } from "node:crypto";
import { linkSync, mkdirSync, readFileSync, renameSync, rmSync, unlinkSync, writeFileSync } from "node:fs";
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

/** The lock file, or its take-over guard, is held by a live process, which wrote `holder` in it. */
class Held extends Error {
  constructor(
    readonly file: string,
    readonly holder: Partial<LockContent>,
  ) {
    super(`${file} is held by process ${holder.pid}`);
  }
}

/** What the file system says of a DATA_DIR that is not a folder this process may write in. */
const UNUSABLE_FOLDER = new Set(["EACCES", "EPERM", "EROFS", "EEXIST", "ENOTDIR", "ENOSPC"]);

/**
 * One process per DATA_DIR: embedded PGlite cannot share its folder, and a second process that
 * tried would abort inside PGlite (`RuntimeError: Aborted()`). The lock is a pid file; a second
 * process is told which pid holds the folder; a lock left by a process that is gone (killed,
 * crashed) is taken over.
 *
 * Every step is atomic, so that processes starting together end with one holder:
 * - a lock file appears whole: it is written under a name of its own, then hard-linked to its
 *   name, which fails if that exists (O_EXCL would show the others an empty file for a moment,
 *   which they would take for a broken lock, and remove);
 * - a stale lock is replaced (renamed over) only by the process holding the take-over guard, a
 *   file made the same way next to it, after it has read the lock again under the guard: so what
 *   it replaces is the stale lock it judged, and never one another process has just made in its
 *   place. Another process that finds the guard held by a live process is refused, as the one
 *   taking over will have the folder; a guard left by a process that died holding it is stale
 *   in turn, and taken over the same way (under a guard of its own).
 */
export function lockDataDir(dataDir: string, command: string): DataDirLock {
  const path = join(dataDir, LOCK_FILE);
  const content: LockContent = { pid: process.pid, started: new Date().toISOString(), command };
  let tookOverFrom: number | null = null;
  try {
    mkdirSync(dataDir, { recursive: true });
    const replaced = claim(path, `${JSON.stringify(content)}\n`);
    tookOverFrom = replaced === null ? null : (parse(replaced).pid ?? null);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code && UNUSABLE_FOLDER.has(code)) throw new StartupError(`DATA_DIR=${dataDir}: cannot be made a folder or written in (${code})`);
    if (!(err instanceof Held)) throw err;
    const { pid, command: what, started } = err.holder;
    // A holder of the take-over guard is about to have the folder: it found the lock stale too.
    const state = err.file === path ? "is in use by" : "is being taken over by";
    throw new StartupError(
      `DATA_DIR ${dataDir} ${state} process ${pid}${what ? ` (${what})` : ""}, started ${started ?? "at an unknown time"}: stop it first, or give this process another DATA_DIR (or a DATABASE_URL). Lock file: ${err.file}`,
    );
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

/**
 * Makes `file` hold `content`: creates it, or replaces it when the process it names is gone.
 * Returns what was replaced (null when it was created); throws Held when a live process has it.
 */
function claim(file: string, content: string): string | null {
  for (let attempt = 0; attempt < 10; attempt++) {
    if (place(file, content, "create")) return null;
    const current = readOrNull(file);
    // Released between the two: create it again.
    if (current === null) continue;
    const holder = parse(current);
    if (typeof holder.pid === "number" && alive(holder.pid)) throw new Held(file, holder);
    // Stale, or unreadable: a file is written whole before it gets its name, so nothing in
    // progress looks like this.
    const guard = `${file}.takeover`;
    claim(guard, content);
    try {
      if (readOrNull(file) === current) {
        place(file, content, "replace");
        return current;
      }
      // Replaced or released by another process since it was read (which released the guard
      // before this one got it): look again.
    } finally {
      unlinkSync(guard);
    }
  }
  throw new Error(`${file} kept changing while this process tried to take it: try again`);
}

/**
 * Gives `file` this content in one step, through a file of this process's own next to it: "create"
 * hard-links it, and fails (false) if `file` exists; "replace" renames it over `file`.
 */
function place(file: string, content: string, how: "create" | "replace"): boolean {
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString("hex")}.tmp`;
  writeFileSync(tmp, content, { flag: "wx" });
  try {
    if (how === "replace") renameSync(tmp, file);
    else linkSync(tmp, file);
    return true;
  } catch (err) {
    if (how === "create" && (err as NodeJS.ErrnoException).code === "EEXIST") return false;
    throw err;
  } finally {
    rmSync(tmp, { force: true });
  }
}

function readOrNull(file: string): string | null {
  try {
    return readFileSync(file, "utf8");
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === "ENOENT") return null;
    throw err;
  }
}

function parse(content: string): Partial<LockContent> {
  try {
    const parsed = JSON.parse(content) as unknown;
    return typeof parsed === "object" && parsed !== null ? (parsed as Partial<LockContent>) : {};
  } catch {
    return {};
  }
}
