-- CreateTable
CREATE TABLE "revision_logs" (
    "id" BIGSERIAL NOT NULL,
    "revision_id" UUID NOT NULL,
    "deployment_id" UUID NOT NULL,
    "workspace_id" UUID NOT NULL,
    "kind" TEXT NOT NULL,
    "timestamp" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "level" TEXT NOT NULL,
    "message" TEXT NOT NULL,

    CONSTRAINT "revision_logs_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "revision_logs_revision_id_kind_timestamp_id_idx" ON "revision_logs"("revision_id", "kind", "timestamp", "id");

-- CreateIndex
CREATE INDEX "revision_logs_deployment_id_kind_timestamp_id_idx" ON "revision_logs"("deployment_id", "kind", "timestamp", "id");

-- CreateIndex
CREATE INDEX "revision_logs_timestamp_idx" ON "revision_logs"("timestamp");

-- AddForeignKey
ALTER TABLE "revision_logs" ADD CONSTRAINT "revision_logs_revision_id_fkey" FOREIGN KEY ("revision_id") REFERENCES "revisions"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- Appends lines (kinds, levels and messages side by side) to a revision's logs and returns how
-- many were written: none when the revision is gone, or when its status is one of
-- p_closed_statuses (its last line is written; pass an empty array to write regardless).
--
-- Timestamps are the database's clock, in milliseconds, never earlier than the deployment's last
-- line, and at most 50 lines of a deployment share one: a reader that follows a log by asking for
-- the lines at or after the newest timestamp it has seen (the official tool's follow mode, with
-- its page of 100) always gets past a burst of lines written at once.
CREATE FUNCTION "append_revision_logs"(
    p_revision UUID,
    p_kinds TEXT[],
    p_levels TEXT[],
    p_messages TEXT[],
    p_closed_statuses TEXT[]
) RETURNS INTEGER LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    v_deployment UUID;
    v_now TIMESTAMPTZ;
    v_base TIMESTAMPTZ;
    v_used INTEGER := 0;
    v_count INTEGER;
BEGIN
    SELECT deployment_id INTO v_deployment FROM revisions WHERE id = p_revision;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    -- Writers of one deployment take turns until they commit, so that ids and timestamps grow in
    -- commit order: a reader past a line never finds an older one appear behind it later.
    PERFORM pg_advisory_xact_lock(1819240307, hashtext(v_deployment::text));
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
    INSERT INTO revision_logs ("revision_id", "deployment_id", "workspace_id", "kind", "timestamp", "level", "message")
    SELECT r.id, r.deployment_id, r.workspace_id, l.kind,
        v_base + ((v_used + l.n - 1) / 50) * interval '1 millisecond', l.level, l.message
    FROM revisions r
    CROSS JOIN unnest(p_kinds, p_levels, p_messages) WITH ORDINALITY AS l(kind, level, message, n)
    WHERE r.id = p_revision AND r.status <> ALL (p_closed_statuses)
    ORDER BY l.n;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;
