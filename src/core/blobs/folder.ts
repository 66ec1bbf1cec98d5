import { createReadStream, createWriteStream, existsSync, mkdirSync, rmSync } from "node:fs";
import { rename, rm, rmdir } from "node:fs/promises";
import { randomUUID } from "node:crypto";
import { dirname, join, relative, resolve, sep } from "node:path";
import { pipeline } from "node:stream/promises";
import { Readable } from "node:stream";
import type { BlobStore } from "./types.js";

/**
 * Uploads as files under `<DATA_DIR>/uploads`: written to `.incoming/` and renamed into place when
 * complete, so that a reader never sees half a file. One process owns the folder (embedded PGlite
 * is single-process), so leftovers of a crash in `.incoming/` are cleared at start.
 */
export class FolderBlobStore implements BlobStore {
  readonly kind = "folder";
  private readonly root: string;
  private readonly incoming: string;

  constructor(dataDir: string) {
    this.root = resolve(dataDir, "uploads");
    this.incoming = join(this.root, ".incoming");
    rmSync(this.incoming, { recursive: true, force: true });
    mkdirSync(this.incoming, { recursive: true });
  }

  async write(path: string, body: AsyncIterable<Uint8Array>): Promise<void> {
    const target = this.file(path);
    const temp = join(this.incoming, randomUUID());
    const out = createWriteStream(temp, { flags: "wx", mode: 0o600 });
    try {
      await pipeline(Readable.from(body), out);
      mkdirSync(dirname(target), { recursive: true });
      await rename(temp, target);
    } catch (err) {
      // A body that fails at once fails the pipeline while the file's open is still pending: the
      // file appears once it completes. Removed after the stream has closed, not before.
      if (!out.closed) await new Promise<void>((closed) => out.once("close", () => closed()));
      await rm(temp, { force: true });
      throw err;
    }
  }

  async read(path: string): Promise<AsyncIterable<Uint8Array> | null> {
    const file = this.file(path);
    return existsSync(file) ? createReadStream(file) : null;
  }

  async remove(path: string): Promise<void> {
    const file = this.file(path);
    await rm(file, { force: true });
    // Its deployment's folder too when that leaves it empty: a write that ended after its deployment
    // was deleted (and its folder removed) made it anew.
    const folder = dirname(file);
    if (folder === this.root) return;
    await rmdir(folder).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== "ENOENT" && err.code !== "ENOTEMPTY" && err.code !== "EEXIST") throw err;
    });
  }

  async removeDeployments(ids: string[]): Promise<void> {
    for (const id of ids) await rm(this.file(`uploads/${id}`), { recursive: true, force: true });
  }

  /** The file of an object path (`uploads/<deployment id>/<name>`), never outside the folder. */
  private file(path: string): string {
    const file = resolve(this.root, relative("uploads", path));
    if (!file.startsWith(this.root + sep) || file.startsWith(this.incoming)) throw new Error(`object path outside the upload folder: ${path}`);
    return file;
  }
}
