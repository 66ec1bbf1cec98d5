import type { PrismaClient } from "../../db/client.js";
import type { BlobStore } from "./types.js";

/** Rows of at most this size: one insert per MiB streamed in, never the whole upload in memory. */
export const CHUNK_BYTES = 1024 * 1024;

/**
 * Uploads as rows of 1 MiB chunks (source_upload_chunks) in the database, which every replica on
 * the same PostgreSQL sees. Chunks are written one by one as the body arrives, outside a
 * transaction (an upload may take minutes); a failed write deletes its chunks, and the upload's
 * status says when they are complete.
 */
export class DatabaseBlobStore implements BlobStore {
  readonly kind = "database";

  constructor(private readonly prisma: PrismaClient) {}

  async write(path: string, body: AsyncIterable<Uint8Array>): Promise<void> {
    let seq = 0;
    let pending: Buffer[] = [];
    let size = 0;
    const flush = async () => {
      const data = Buffer.concat(pending, size);
      pending = [];
      size = 0;
      await this.prisma.sourceUploadChunk.create({ data: { objectPath: path, seq: seq++, data } });
    };
    try {
      for await (const part of body) {
        let chunk = Buffer.from(part.buffer, part.byteOffset, part.byteLength);
        while (chunk.length > 0) {
          const take = chunk.subarray(0, CHUNK_BYTES - size);
          pending.push(Buffer.from(take));
          size += take.length;
          chunk = chunk.subarray(take.length);
          if (size === CHUNK_BYTES) await flush();
        }
      }
      if (size > 0) await flush();
    } catch (err) {
      await this.prisma.sourceUploadChunk.deleteMany({ where: { objectPath: path } });
      throw err;
    }
  }

  async read(path: string): Promise<AsyncIterable<Uint8Array> | null> {
    const first = await this.prisma.sourceUploadChunk.findUnique({ where: { objectPath_seq: { objectPath: path, seq: 0 } } });
    if (!first) return null;
    const prisma = this.prisma;
    return (async function* () {
      yield first.data;
      for (let seq = 1; ; seq++) {
        const chunk = await prisma.sourceUploadChunk.findUnique({ where: { objectPath_seq: { objectPath: path, seq } } });
        if (!chunk) return;
        yield chunk.data;
      }
    })();
  }

  async remove(path: string): Promise<void> {
    await this.prisma.sourceUploadChunk.deleteMany({ where: { objectPath: path } });
  }

  async removeDeployments(): Promise<void> {
    // The chunks go with their uploads' rows, which go with the deployment (ON DELETE CASCADE).
  }
}
