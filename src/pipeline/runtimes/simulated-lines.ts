import { createHash } from "node:crypto";
import type { Revision } from "../../generated/prisma/client.js";
import type { RevisionStatus } from "../../core/revision-machine.js";
import { numberOf, objectOf, textOf } from "../../core/stored-json.js";

/** What the simulator writes for a step: lines as it starts, and lines once its work is done. */
export interface SimulatedLines {
  start: string[];
  done: string[];
  /** What a failure of this step writes, before its outcome says why. */
  failure: string[];
}

/** A digest that is the same for the same revision: the stand-in for a built image's. */
export const simulatedDigest = (revision: Pick<Revision, "id">) => `sha256:${createHash("sha256").update(`image\n${revision.id}`).digest("hex")}`;

/**
 * Realistic lines for each step of the simulated runtime, from the revision's own configuration.
 * Secrets are named, never shown: only their names and count appear.
 */
export function simulatedLines(revision: Revision, status: RevisionStatus, built: boolean): SimulatedLines {
  const config = objectOf(revision.sourceConfig);
  const revisionConfig = objectOf(revision.sourceRevisionConfig);
  const spec = objectOf(config.resource_spec);
  const image = textOf(revisionConfig.image_uri);
  const frameworkConfig = textOf(revisionConfig.framework_config_path) ?? "langgraph.json";
  const none = { start: [], done: [], failure: [] };
  switch (status) {
    case "CREATING": {
      const secrets = Array.isArray(revision.secrets) ? revision.secrets.map((s) => textOf(objectOf(s).name)).filter(Boolean) : [];
      const references = Array.isArray(revision.secretReferences) ? revision.secretReferences.length : 0;
      const start = [`Creating revision ${revision.id} (source ${revision.source})`];
      if (revision.source === "codehost") {
        start.push(`Resolving ${textOf(revisionConfig.repo_ref) ?? textOf(config.repo_branch) ?? "main"} of ${textOf(config.repo_url) ?? "the repository"}`);
      } else if (revision.source === "internal_source") {
        start.push(`Source: uploaded archive ${textOf(revisionConfig.source_tarball_path) ?? "(none given)"}`);
      } else if (image) {
        start.push(`Image: ${image}`);
      }
      if (built) start.push(`Framework configuration: ${frameworkConfig}`);
      start.push(`Secrets: ${secrets.length === 0 ? "none" : `${secrets.length} (${secrets.join(", ")})`}; secret references: ${references}`);
      const done = revision.repoCommitSha ? [`Using commit ${revision.repoCommitSha.slice(0, 7)}`] : [];
      return { start, done: [...done, "Revision configuration checked"], failure: ["Creating the revision failed (simulated)"] };
    }
    case "QUEUED":
      return { start: ["No other revision of this deployment is in flight"], done: [built ? "Next in line for a builder" : "Next in line to deploy"], failure: [] };
    case "AWAITING_BUILD":
      return { start: ["Builder assigned (simulated)"], done: ["Build context prepared"], failure: [] };
    case "BUILDING": {
      const install = textOf(config.install_command) ?? "pip install --no-cache-dir -e .";
      const build = textOf(config.build_command);
      const steps = build ? 5 : 4;
      return {
        start: [
          `Step 1/${steps} : FROM langchain/langgraph-api:3.11 (simulated)`,
          `Step 2/${steps} : ADD . /deps/${revision.deploymentId}`,
          `Step 3/${steps} : RUN ${install}`,
        ],
        done: [
          ...(build ? [`Step 4/${steps} : RUN ${build}`] : []),
          `Step ${steps}/${steps} : ENV LANGSERVE_GRAPHS from ${frameworkConfig}`,
          `Built image ${simulatedDigest(revision)} (simulated)`,
          `Pushed image ${image ?? `registry.local/${revision.deploymentId}`}@${simulatedDigest(revision).slice(0, 19)}…`,
        ],
        failure: [`Step 3/${steps} : RUN ${install} exited with code 1 (simulated)`],
      };
    }
    case "AWAITING_DEPLOY":
      return { start: [`Preparing to deploy ${image ?? (built ? "the built image" : "the image")}`], done: ["Deploy slot acquired"], failure: [] };
    case "DEPLOYING": {
      const [min, max] = [numberOf(spec.min_scale) ?? 1, numberOf(spec.max_scale) ?? numberOf(spec.min_scale) ?? 1];
      const scale = min === max ? `${min} replica${min === 1 ? "" : "s"}` : `${min} to ${max} replicas`;
      const size = `${numberOf(spec.cpu) ?? 1} CPU, ${numberOf(spec.memory_mb) ?? 1024} MB`;
      return {
        start: [`Rolling out revision ${revision.id}: ${scale}, ${size} each`, `Starting the agent server${image ? ` from ${image}` : ""}`],
        done: ["Health check passed: GET /ok answered 200", `Revision ${revision.id} is serving`],
        failure: ["Health check failed: the agent server did not become ready (simulated)"],
      };
    }
    default:
      return none;
  }
}
