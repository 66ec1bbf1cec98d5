-- A connection names one of the workspace's OAuth tokens and goes with it: a connection created while
-- its token was deleted can no longer outlive the token (the insert waits for the deletion to commit,
-- then fails on the key; or it commits first, and the deletion's cascade takes it). Connections left
-- naming a token that no longer exists are deleted first; every other one names a token's uuid.
DELETE FROM "agent_connections" c WHERE NOT EXISTS (SELECT 1 FROM "oauth_tokens" t WHERE t."id"::text = c."oauth_token_id");

-- AlterTable
ALTER TABLE "agent_connections" ALTER COLUMN "oauth_token_id" SET DATA TYPE UUID USING "oauth_token_id"::uuid;

-- CreateIndex
CREATE INDEX "agent_connections_oauth_token_id_idx" ON "agent_connections"("oauth_token_id");

-- AddForeignKey
ALTER TABLE "agent_connections" ADD CONSTRAINT "agent_connections_oauth_token_id_fkey" FOREIGN KEY ("oauth_token_id") REFERENCES "oauth_tokens"("id") ON DELETE CASCADE ON UPDATE CASCADE;
