-- A host serves one deployment (src/core/serving-hosts.ts): each deployment's custom URL's host is
-- kept, lower case, where a new custom URL's host is looked up across workspaces. Deployments that
-- already share a host keep it (nothing here fails on them); a new claim of that host is refused.
-- Hosts of custom URLs set before this are read here as the service reads them (scheme, optional
-- user, then the host up to a port, path, query or fragment; a trailing dot left out).
-- AlterTable
ALTER TABLE "deployments" ADD COLUMN     "custom_host" TEXT;

UPDATE "deployments"
   SET "custom_host" = NULLIF(regexp_replace(lower(substring("source_config"->>'custom_url' from '^[A-Za-z][A-Za-z0-9+.-]*://(?:[^@/?#]*@)?(\[[^]/?#]*\]|[^:/?#]*)')), '\.$', ''), '')
 WHERE "source_config"->>'custom_url' IS NOT NULL;

-- CreateIndex
CREATE INDEX "deployments_custom_host_idx" ON "deployments"("custom_host");
