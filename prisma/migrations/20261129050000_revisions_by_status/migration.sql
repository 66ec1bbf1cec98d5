-- A deployment's unfinished revisions, found by their status rather than by reading its whole
-- history: whether its log may still grow (every poll of its deploy logs), which older revisions a new
-- one supersedes, and whether another is in flight ahead of a queued one. A deployment may hold
-- thousands of revisions that ended and only a few that have not.
-- CreateIndex
CREATE INDEX "revisions_deployment_id_status_idx" ON "revisions"("deployment_id", "status");
