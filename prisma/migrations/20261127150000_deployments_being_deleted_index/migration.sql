-- The pipeline worker's sweep finds deployments left AWAITING_DELETE (a deletion interrupted between
-- its two transactions) across every workspace, every 10 s on each replica: by status and age, on an
-- index rather than a scan of every deployment.
-- CreateIndex
CREATE INDEX "deployments_status_updated_at_idx" ON "deployments"("status", "updated_at");
