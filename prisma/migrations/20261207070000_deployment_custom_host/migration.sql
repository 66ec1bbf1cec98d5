-- A host serves one deployment (src/core/serving-hosts.ts): each deployment's custom URL's host is
-- kept, lower case, where a new custom URL's host is looked up across workspaces.
--
-- The database derives it, whoever writes the row: replicas of earlier code (during a rolling
-- upgrade, or after a rollback) write custom URLs without knowing this column, and a host they set
-- or gave up must still count. deployment_custom_host reads a URL as src/core/serving-hosts.ts
-- does (scheme, optional user, then the host up to a port, path, query or fragment, lower case, a
-- trailing dot left out; none longer than a host name may be); the service takes its lock and
-- makes its check with the same reading.
--
-- Deployments that already share a host keep it (nothing here fails on them); a new claim of that
-- host is refused.
CREATE FUNCTION "deployment_custom_host"(p_url TEXT) RETURNS TEXT LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN length(h) <= 253 THEN h END
    FROM (SELECT NULLIF(regexp_replace(lower(substring(p_url from '^[A-Za-z][A-Za-z0-9+.-]*://(?:[^@/?#]*@)?(\[[^]/?#]*\]|[^:/?#]*)')), '\.$', ''), '') AS h) AS host
$$;

-- AlterTable
ALTER TABLE "deployments" ADD COLUMN     "custom_host" TEXT;

CREATE FUNCTION "deployments_set_custom_host"() RETURNS TRIGGER LANGUAGE plpgsql AS $$
BEGIN
    NEW."custom_host" := deployment_custom_host(NEW."source_config"->>'custom_url');
    RETURN NEW;
END
$$;

CREATE TRIGGER "deployments_custom_host" BEFORE INSERT OR UPDATE OF "source_config", "custom_host" ON "deployments"
    FOR EACH ROW EXECUTE FUNCTION "deployments_set_custom_host"();

UPDATE "deployments" SET "custom_host" = deployment_custom_host("source_config"->>'custom_url')
 WHERE "source_config"->>'custom_url' IS NOT NULL;

-- CreateIndex
CREATE INDEX "deployments_custom_host_idx" ON "deployments"("custom_host");
