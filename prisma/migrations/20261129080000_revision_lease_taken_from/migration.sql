-- Who held a lease that a claim took over (counted as a death of its step), and whether it ran the
-- step alone: a holder that was alive all along (it lost the database for longer than its lease)
-- finds its lease taken when it is back, and takes back the death counted for it.
-- AlterTable
ALTER TABLE "revisions" ADD COLUMN     "lease_taken_alone" BOOLEAN NOT NULL DEFAULT false,
ADD COLUMN     "lease_taken_from" TEXT;
