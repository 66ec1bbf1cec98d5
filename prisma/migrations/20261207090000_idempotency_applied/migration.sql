-- When the change of a request with an Idempotency-Key committed (in the change's own transaction):
-- a retry that finds the key's first request gone (its server stopped before it kept the answer)
-- runs it again only if nothing was applied, and otherwise says the answer was lost.
-- AlterTable
ALTER TABLE "idempotency_keys" ADD COLUMN     "applied_at" TIMESTAMPTZ(3);
