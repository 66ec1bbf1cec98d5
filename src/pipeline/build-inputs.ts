import type { Registry } from "../core/registry/index.js";
import { readSourceRevisionConfig } from "../core/schemas/source-config.js";
import type { UploadService } from "../core/uploads.js";
import type { Revision } from "../generated/prisma/client.js";
import { checkImage } from "./checks/image.js";
import { inspectTarball, type TarballReport } from "./checks/tarball.js";
import type { BuildFindings, StepLogger } from "./runtime.js";

/** What a revision with nothing to build waits for, and how a user provides it. */
export interface MissingInput {
  what: string;
  how: string;
}

export type Inspection = { ok: true; findings?: BuildFindings } | { ok: false; message: string; findings?: BuildFindings };

/**
 * What a revision is built from, checked for real before the (simulated) image build: the pushed
 * image of an internal_container revision in the registry, the uploaded tarball of an
 * internal_source one. What was found is kept on the revision (image_digest, build_report).
 */
export class BuildInputs {
  constructor(
    private readonly registry: Registry | null,
    private readonly uploads: UploadService,
  ) {}

  /**
   * Why the revision cannot be built yet, or null: it was created with an empty
   * source_revision_config, and the command-line tool is about to push or upload what it needs.
   */
  awaiting(revision: Revision): MissingInput | null {
    const src = readSourceRevisionConfig(revision.sourceRevisionConfig);
    if (revision.source === "internal_container" && src.image_uri === null) {
      return {
        what: "an image",
        how: "push one with a push token (POST /v2/deployments/{deployment_id}/push-token), then set source_revision_config.image_uri (PATCH)",
      };
    }
    if (revision.source === "internal_source" && src.source_tarball_path === null) {
      return {
        what: "source",
        how: "upload a tarball (POST /v2/deployments/{deployment_id}/upload-url), then set source_revision_config.source_tarball_path and framework_config_path (PATCH)",
      };
    }
    return null;
  }

  /**
   * The build step's checks; a failure says what is missing and names the file or image. What was
   * found goes to the build log as it is found (a failure's reason is the step's final line).
   */
  async inspect(revision: Revision, signal: AbortSignal, log: StepLogger): Promise<Inspection> {
    const src = readSourceRevisionConfig(revision.sourceRevisionConfig);
    if (revision.source === "internal_container" && src.image_uri !== null) {
      const owner = { workspaceId: revision.workspaceId, id: revision.deploymentId };
      log.info(this.registry ? `Looking up image ${src.image_uri} in the registry ${this.registry.host}` : `Image ${src.image_uri}: no registry is configured (REGISTRY_URL), so it is not checked`);
      const image = await checkImage(this.registry, owner, src.image_uri, signal);
      if (image.ok && image.digest) {
        const size = image.report.size_bytes == null ? "" : `, ${image.report.size_bytes} bytes`;
        log.info(`Found ${image.report.repository}:${image.report.reference}: manifest ${image.digest} (${image.report.media_type ?? "unknown type"}${size})`);
      }
      const findings: BuildFindings = { imageDigest: image.ok ? image.digest : null, report: { image: image.report } };
      return image.ok ? { ok: true, findings } : { ok: false, message: `Build failed: ${image.message}`, findings };
    }
    if (revision.source === "internal_source" && src.source_tarball_path !== null) {
      const path = src.source_tarball_path;
      const configPath = src.framework_config_path;
      if (configPath === null) return { ok: false, message: `Build failed: source_revision_config.framework_config_path is not set for the tarball ${path}.` };
      const upload = await this.uploads.open(revision, path);
      if (!upload.ok) return { ok: false, message: `Build failed: source_tarball_path '${path}' cannot be read: ${upload.reason}.` };
      log.info(`Opening the uploaded source ${path} (${upload.sizeBytes} bytes, sha256 ${upload.sha256})`);
      const found = await inspectTarball(upload.body, configPath, signal);
      if (found.report?.file_count !== undefined) logFiles(log, found.report);
      if (found.ok) {
        const graphs = Object.entries(found.report.graphs).map(([name, where]) => `${name} (${where})`);
        log.info(`${configPath} names ${graphs.length} graph${graphs.length === 1 ? "" : "s"}: ${graphs.join(", ")}`);
      }
      const source = { object_path: path, size_bytes: upload.sizeBytes, sha256: upload.sha256, ...found.report };
      const findings: BuildFindings = { report: { source } };
      return found.ok ? { ok: true, findings } : { ok: false, message: `Build failed: the tarball ${path}: ${found.message}.`, findings };
    }
    return { ok: true };
  }
}

/** The files a tarball holds, as the build log shows them: a count, then the names it kept. */
function logFiles(log: StepLogger, report: Partial<TarballReport>) {
  const files = report.files ?? [];
  log.info(`${report.file_count} file${report.file_count === 1 ? "" : "s"}, ${report.unpacked_bytes ?? 0} bytes unpacked`);
  for (const file of files) log.debug(`  ${file}`);
  if ((report.file_count ?? 0) > files.length) log.debug(`  … and ${(report.file_count ?? 0) - files.length} more`);
}
