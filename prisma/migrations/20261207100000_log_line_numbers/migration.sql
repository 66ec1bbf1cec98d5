-- A log line's id, as REST and GraphQL show it, is its number in its deployment's log (1, 2, 3…),
-- no longer the table's global sequence: the ids a workspace saw climbed by every line every other
-- workspace wrote meanwhile, which told it how busy the service and its other tenants were.
-- Numbers are handed out under the deployment's writers' lock (append_revision_logs), so they grow
-- in commit order as the ids did, and (timestamp, line) orders a deployment's lines as (timestamp,
-- id) did. The last number lives in log_line_counters, not in the lines: retention that empties a
-- deployment's log must not start it again at 1, where a follower skipping the ids it has printed
-- (COMPAT.md's deploy logs --follow) would skip the new lines. No foreign key to deployments: a writer
-- must never wait on the deployment row (transitions hold it while they wait for this lock);
-- finishDeleting removes a deployment's counter after the deployment.
CREATE TABLE "log_line_counters" (
    "deployment_id" UUID NOT NULL,
    "last_line" BIGINT NOT NULL,

    CONSTRAINT "log_line_counters_pkey" PRIMARY KEY ("deployment_id")
);

ALTER TABLE "revision_logs" ADD COLUMN "line" BIGINT;

-- Lines written before: numbered in id order, which was their commit order within a deployment.
UPDATE "revision_logs" AS l SET "line" = n.line
FROM (SELECT id, row_number() OVER (PARTITION BY deployment_id ORDER BY id) AS line FROM "revision_logs") AS n
WHERE n.id = l.id;

INSERT INTO "log_line_counters" ("deployment_id", "last_line")
SELECT "deployment_id", max("line") FROM "revision_logs" GROUP BY "deployment_id";

ALTER TABLE "revision_logs" ALTER COLUMN "line" SET NOT NULL;

DROP INDEX "revision_logs_revision_id_kind_timestamp_id_idx";
DROP INDEX "revision_logs_deployment_id_kind_timestamp_id_idx";
CREATE INDEX "revision_logs_revision_id_kind_timestamp_line_idx" ON "revision_logs"("revision_id", "kind", "timestamp", "line");
CREATE INDEX "revision_logs_deployment_id_kind_timestamp_line_idx" ON "revision_logs"("deployment_id", "kind", "timestamp", "line");

DROP FUNCTION "append_revision_logs"(UUID, TEXT[], TEXT[], TEXT[], TEXT[], TEXT);

CREATE FUNCTION "append_revision_logs"(
    p_revision UUID,
    p_kinds TEXT[],
    p_levels TEXT[],
    p_messages TEXT[],
    p_closed_statuses TEXT[],
    p_lease_owner TEXT DEFAULT NULL
) RETURNS INTEGER LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_deployment UUID;
    v_now TIMESTAMPTZ;
    v_base TIMESTAMPTZ;
    v_used INTEGER := 0;
    v_last BIGINT;
    v_count INTEGER;
BEGIN
    SELECT deployment_id INTO v_deployment FROM revisions WHERE id = p_revision;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    -- Writers of one deployment take turns until they commit, so that line numbers and timestamps
    -- grow in commit order: a reader past a line never finds an older one appear behind it later.
    PERFORM pg_advisory_xact_lock(1819240307, hashtext(v_deployment::text));
    SELECT last_line INTO v_last FROM log_line_counters WHERE deployment_id = v_deployment;
    v_last := coalesce(v_last, 0);
    -- Each statement of a volatile function reads a fresh snapshot: lines and a closed status
    -- committed while this writer waited are seen from here on.
    v_now := date_trunc('milliseconds', clock_timestamp());
    SELECT max(m.t) INTO v_base FROM (
        SELECT max("timestamp") AS t FROM revision_logs WHERE deployment_id = v_deployment AND kind = 'build'
        UNION ALL
        SELECT max("timestamp") FROM revision_logs WHERE deployment_id = v_deployment AND kind = 'deploy'
    ) m;
    IF v_base IS NOT NULL AND v_base >= v_now THEN
        SELECT sum(c.n) INTO v_used FROM (
            SELECT count(*) AS n FROM revision_logs WHERE deployment_id = v_deployment AND kind = 'build' AND "timestamp" = v_base
            UNION ALL
            SELECT count(*) FROM revision_logs WHERE deployment_id = v_deployment AND kind = 'deploy' AND "timestamp" = v_base
        ) c;
    ELSE
        v_base := v_now;
    END IF;
    INSERT INTO revision_logs ("revision_id", "deployment_id", "workspace_id", "kind", "timestamp", "level", "message", "line")
    SELECT r.id, r.deployment_id, r.workspace_id, l.kind,
        v_base + ((v_used + l.n - 1) / 50) * interval '1 millisecond', l.level, l.message, v_last + l.n
    FROM revisions r
    CROSS JOIN unnest(p_kinds, p_levels, p_messages) WITH ORDINALITY AS l(kind, level, message, n)
    WHERE r.id = p_revision AND r.status <> ALL (p_closed_statuses)
      AND (p_lease_owner IS NULL OR r.lease_owner = p_lease_owner)
    ORDER BY l.n;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    -- The condition is the revision's, not a line's: every line was written, or none.
    IF v_count > 0 THEN
        INSERT INTO log_line_counters (deployment_id, last_line) VALUES (v_deployment, v_last + v_count)
        ON CONFLICT (deployment_id) DO UPDATE SET last_line = EXCLUDED.last_line;
    END IF;
    RETURN v_count;
END
$$;
