-- One refresh of a token at its provider at a time, across replicas: a replica claims the token (by
-- compare-and-set, until the provider's timeout has surely passed) before it sends the refresh token,
-- and clears the claim when it stores what the provider answered. The others wait for that result: a
-- rotating refresh token sent twice is reuse, for which a provider revokes the whole grant.
-- AlterTable
ALTER TABLE "oauth_tokens" ADD COLUMN     "refresh_claimed_until" TIMESTAMPTZ(3);
