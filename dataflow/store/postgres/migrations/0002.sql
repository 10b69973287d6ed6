-- 2: the trigger on datastatus runs once per statement, over the statement's rows
-- (transition tables), set-based, and takes their offer locks first, by bucket of dataids
-- (hashtext(dataid) & 1023) and in order: one lock per dataid ran out of shared memory
-- beyond ~6,000 chunks written in a transaction, and two bulk statements wait for each
-- other instead of deadlocking. It also takes back the candidates of the consumers of an
-- OUT row that is no longer READY. Each offer check is a subquery on one (job, dataid),
-- an index seek whatever the planner guesses of a transition table's size.
-- Frozen: never edit a migration once released; a change is a new file.

CREATE OR REPLACE FUNCTION dataflow_on_statuses() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    ready boolean;  -- some OUT row is READY,
    rerun boolean;  -- RESUBMIT or FAILED,
    other boolean;  -- anything else (RUNNING, NULL): a statement runs only what it needs
BEGIN
    IF TG_OP = 'DELETE' THEN
        SELECT bool_or(locktype = 'OUT') INTO other FROM gone;
        IF other IS NULL THEN
            RETURN NULL;
        END IF;
        
    PERFORM pg_advisory_xact_lock(1, b) FROM (
        SELECT DISTINCT hashtext(dataid) & 1023 AS b FROM gone ORDER BY b) AS s;
        
    INSERT INTO candidate(jobid, sortkey, dataid)
    SELECT DISTINCT c.jobid, dataflow_natkey(n.dataid), n.dataid FROM gone n JOIN job c ON c.jobid = n.jobid
    WHERE (SELECT 1 FROM job t WHERE t.jobid = c.jobid AND t.datasetid = 'today'
           AND t.itemtype = 'IN') IS NULL
      AND (SELECT count(*) FROM job i WHERE i.jobid = c.jobid AND i.itemtype = 'IN')
        = (SELECT count(*) FROM job i WHERE i.jobid = c.jobid AND i.itemtype = 'IN'
           AND (SELECT 1 FROM datastatus r WHERE r.datasetid = i.datasetid
                AND r.dataid = n.dataid AND r.locktype = 'OUT' AND r.status = 'READY'
                LIMIT 1) IS NOT NULL)
      AND (SELECT bool_or(o.locktype = 'OUT' AND o.status NOT IN ('RESUBMIT', 'FAILED'))
           FROM datastatus o WHERE o.jobid = c.jobid AND o.dataid = n.dataid) IS NOT TRUE
    ON CONFLICT DO NOTHING;
        IF other THEN
            
    DELETE FROM candidate d USING (SELECT * FROM gone WHERE locktype = 'OUT') n JOIN job c ON c.itemtype = 'IN'
                                                     AND c.datasetid = n.datasetid
    WHERE d.jobid = c.jobid AND d.sortkey = dataflow_natkey(n.dataid) AND d.dataid = n.dataid
      AND (SELECT 1 FROM datastatus r WHERE r.datasetid = n.datasetid AND r.dataid = n.dataid
           AND r.locktype = 'OUT' AND r.status = 'READY' LIMIT 1) IS NULL;
        END IF;
        RETURN NULL;
    END IF;
    SELECT bool_or(status = 'READY'), bool_or(status IN ('RESUBMIT', 'FAILED')),
           bool_or(status IS NULL OR status NOT IN ('READY', 'RESUBMIT', 'FAILED'))
    INTO ready, rerun, other FROM written WHERE locktype = 'OUT';
    IF ready IS NULL THEN
        RETURN NULL;  -- IN rows, or none (the other half of an INSERT ... ON CONFLICT)
    END IF;
    
    PERFORM pg_advisory_xact_lock(1, b) FROM (
        SELECT DISTINCT hashtext(dataid) & 1023 AS b FROM (SELECT * FROM written WHERE locktype = 'OUT') AS w ORDER BY b) AS s;
    IF ready OR other THEN
        DELETE FROM candidate d USING (SELECT * FROM written WHERE locktype = 'OUT') n
        WHERE (n.status IS NULL OR n.status NOT IN ('RESUBMIT', 'FAILED'))
          AND d.jobid = n.jobid AND d.sortkey = dataflow_natkey(n.dataid)
          AND d.dataid = n.dataid;
    END IF;
    IF ready THEN
        
    INSERT INTO candidate(jobid, sortkey, dataid)
    SELECT DISTINCT c.jobid, dataflow_natkey(n.dataid), n.dataid FROM (SELECT * FROM written WHERE locktype = 'OUT') n JOIN job c ON n.status = 'READY' AND c.itemtype = 'IN' AND c.datasetid = n.datasetid
    WHERE (SELECT 1 FROM job t WHERE t.jobid = c.jobid AND t.datasetid = 'today'
           AND t.itemtype = 'IN') IS NULL
      AND (SELECT count(*) FROM job i WHERE i.jobid = c.jobid AND i.itemtype = 'IN')
        = (SELECT count(*) FROM job i WHERE i.jobid = c.jobid AND i.itemtype = 'IN'
           AND (SELECT 1 FROM datastatus r WHERE r.datasetid = i.datasetid
                AND r.dataid = n.dataid AND r.locktype = 'OUT' AND r.status = 'READY'
                LIMIT 1) IS NOT NULL)
      AND (SELECT bool_or(o.locktype = 'OUT' AND o.status NOT IN ('RESUBMIT', 'FAILED'))
           FROM datastatus o WHERE o.jobid = c.jobid AND o.dataid = n.dataid) IS NOT TRUE
    ON CONFLICT DO NOTHING;
    END IF;
    IF rerun THEN
        
    INSERT INTO candidate(jobid, sortkey, dataid)
    SELECT DISTINCT c.jobid, dataflow_natkey(n.dataid), n.dataid FROM (SELECT * FROM written WHERE locktype = 'OUT') n JOIN job c ON n.status IN ('RESUBMIT', 'FAILED') AND c.jobid = n.jobid
    WHERE (SELECT 1 FROM job t WHERE t.jobid = c.jobid AND t.datasetid = 'today'
           AND t.itemtype = 'IN') IS NULL
      AND (SELECT count(*) FROM job i WHERE i.jobid = c.jobid AND i.itemtype = 'IN')
        = (SELECT count(*) FROM job i WHERE i.jobid = c.jobid AND i.itemtype = 'IN'
           AND (SELECT 1 FROM datastatus r WHERE r.datasetid = i.datasetid
                AND r.dataid = n.dataid AND r.locktype = 'OUT' AND r.status = 'READY'
                LIMIT 1) IS NOT NULL)
      AND (SELECT bool_or(o.locktype = 'OUT' AND o.status NOT IN ('RESUBMIT', 'FAILED'))
           FROM datastatus o WHERE o.jobid = c.jobid AND o.dataid = n.dataid) IS NOT TRUE
    ON CONFLICT DO NOTHING;
    END IF;
    IF TG_OP = 'UPDATE' AND (rerun OR other) THEN  -- a new row was READY nowhere before
        
    DELETE FROM candidate d USING (SELECT * FROM written WHERE locktype = 'OUT' AND status IS DISTINCT FROM 'READY') n JOIN job c ON c.itemtype = 'IN'
                                                     AND c.datasetid = n.datasetid
    WHERE d.jobid = c.jobid AND d.sortkey = dataflow_natkey(n.dataid) AND d.dataid = n.dataid
      AND (SELECT 1 FROM datastatus r WHERE r.datasetid = n.datasetid AND r.dataid = n.dataid
           AND r.locktype = 'OUT' AND r.status = 'READY' LIMIT 1) IS NULL;
    END IF;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS candidate_on_status ON datastatus;
DROP FUNCTION IF EXISTS dataflow_on_status();
CREATE TRIGGER candidate_on_insert AFTER INSERT ON datastatus REFERENCING NEW TABLE AS written
    FOR EACH STATEMENT EXECUTE FUNCTION dataflow_on_statuses();
CREATE TRIGGER candidate_on_update AFTER UPDATE ON datastatus REFERENCING NEW TABLE AS written
    FOR EACH STATEMENT EXECUTE FUNCTION dataflow_on_statuses();
CREATE TRIGGER candidate_on_delete AFTER DELETE ON datastatus REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION dataflow_on_statuses();
