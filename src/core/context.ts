import type { InternalImageBuilds } from "../config.js";
import type { PrismaClient } from "../db/client.js";
import type { Tenant } from "./auth.js";
import type { Prepared } from "../db/prepared.js";
import type { EventBus } from "../events/types.js";
import type { BlobStore } from "./blobs/types.js";
import type { CursorCodec } from "./pagination.js";
import type { SecretBox } from "./secrets.js";

/** What every core service is built from. Only core touches `prisma`. */
export interface CoreDeps {
  /** Unscoped: for work across workspaces (the pipeline, retention, authentication). */
  prisma: PrismaClient;
  /**
   * The one door to a tenant's data: every query through it (and its transactions) is confined to
   * the tenant's workspace, so that a service cannot forget it (core/tenant-data.ts).
   */
  data(tenant: Pick<Tenant, "workspaceId">): PrismaClient;
  /** Named prepared statements for the hot reads (src/core/deployment-reads.ts), over the same database. */
  prepared: Prepared;
  events: EventBus;
  secrets: SecretBox;
  cursors: CursorCodec;
  /** Domain under which serving URLs are made: https://<name>-<id>.<domain>. */
  deploymentDomain: string;
  /** Whether this installation's cloud provider runs internal image builds (internal_container). */
  internalImageBuilds: InternalImageBuilds;
  /** Where uploaded source tarballs are kept. */
  blobs: BlobStore;
}
