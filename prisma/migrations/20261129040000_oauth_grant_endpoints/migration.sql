-- A provider is its workspace's, and any caller of the workspace may change its endpoints; a token is
-- its owner's alone. A flow keeps the provider's token and revocation endpoints of when it began, and
-- the token it makes keeps them: its code is exchanged, and the token refreshed and revoked, there
-- alone, so that a provider changed since (by anyone) never sends them to a server of someone else's
-- choosing. Rows made before this record their provider's endpoints of now.
-- AlterTable
ALTER TABLE "oauth_flows" ADD COLUMN     "revocation_url" TEXT,
ADD COLUMN     "token_url" TEXT;

-- AlterTable
ALTER TABLE "oauth_tokens" ADD COLUMN     "revocation_url" TEXT,
ADD COLUMN     "token_url" TEXT;

UPDATE "oauth_flows" AS f SET "token_url" = p."token_url", "revocation_url" = p."revocation_url"
FROM "oauth_providers" AS p WHERE p."id" = f."oauth_provider_id";

UPDATE "oauth_tokens" AS t SET "token_url" = p."token_url", "revocation_url" = p."revocation_url"
FROM "oauth_providers" AS p WHERE p."id" = t."oauth_provider_id";

ALTER TABLE "oauth_flows" ALTER COLUMN "token_url" SET NOT NULL;

ALTER TABLE "oauth_tokens" ALTER COLUMN "token_url" SET NOT NULL;
