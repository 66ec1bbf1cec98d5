/**
 * Where uploaded source tarballs are kept: a folder under DATA_DIR (embedded), or the database
 * (PostgreSQL), which every replica sees.
 */
export interface BlobStore {
  readonly kind: "folder" | "database";
  /**
   * Stores the whole of `body` under `path`, or nothing: when `body` throws, what was written is
   * removed and the error passes on. `path` names an upload row that already exists (it may go
   * meanwhile, with its deployment: the caller then removes what was written).
   */
  write(path: string, body: AsyncIterable<Uint8Array>): Promise<void>;
  /** Removes what is stored under `path` (nothing there: nothing to do), and nothing else a live upload uses. */
  remove(path: string): Promise<void>;
  /** The bytes stored under `path`, streamed; null when there are none. */
  read(path: string): Promise<AsyncIterable<Uint8Array> | null>;
  /** Removes what is stored under these deployments (their uploads' rows go with the deployment). */
  removeDeployments(ids: string[]): Promise<void>;
}
