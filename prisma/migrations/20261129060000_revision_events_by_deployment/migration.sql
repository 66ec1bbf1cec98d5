-- A deployment's revisions' log (the feed of deploymentRevisionsChanged) was read per revision of
-- the deployment, through (revision_id, id): every step of a feed, at each change of any of its
-- revisions and at each periodic re-check, walked every revision the deployment ever had. Each entry
-- now names its deployment, and the log is read from (deployment_id, id): only what is new.
-- Entries written before this are given their revision's deployment.
-- AlterTable
ALTER TABLE "revision_events" ADD COLUMN     "deployment_id" UUID;

UPDATE "revision_events" AS e SET "deployment_id" = r."deployment_id" FROM "revisions" AS r WHERE r."id" = e."revision_id";

ALTER TABLE "revision_events" ALTER COLUMN "deployment_id" SET NOT NULL;

-- CreateIndex
CREATE INDEX "revision_events_deployment_id_id_idx" ON "revision_events"("deployment_id", "id");
