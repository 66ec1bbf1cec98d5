-- A pipeline step's lines are written only while its worker holds the revision's lease
-- (p_lease_owner): a worker that stalled past its lease, and whose step another worker has taken
-- over, wrote its step's remaining lines after the new holder's, and the log told the step twice.
-- The lease is read after the deployment's writers' lock, as the closed statuses are: a takeover
-- committed while this writer waited is seen. Without p_lease_owner (status lines, the service's
-- own notes) nothing changes.
DROP FUNCTION "append_revision_logs"(UUID, TEXT[], TEXT[], TEXT[], TEXT[]);

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
      AND (p_lease_owner IS NULL OR r.lease_owner = p_lease_owner)
    ORDER BY l.n;
    GET DIAGNOSTICS v_count = ROW_COUNT;
    RETURN v_count;
END
$$;
