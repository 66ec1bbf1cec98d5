-- A step the service keeps dying in is given up rather than retried for ever. A worker that stops
-- seen (a commit, a retry, a graceful stop) clears its lease; a process that dies leaves it held, so a
-- claim that takes over a held lease counts a crash of the step (step_crashes). A step in flight at
-- two crashes runs alone on its next start (lease_alone), so that a crash then is its own
-- (step_crashes_alone); after PIPELINE_CRASH_LIMIT of those its revision fails. A transition resets both.
-- AlterTable
ALTER TABLE "revisions" ADD COLUMN     "lease_alone" BOOLEAN NOT NULL DEFAULT false,
ADD COLUMN     "step_crashes" INTEGER NOT NULL DEFAULT 0,
ADD COLUMN     "step_crashes_alone" INTEGER NOT NULL DEFAULT 0;
