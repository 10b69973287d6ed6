-- 8: `utility status` and /metrics read a job's chunks by status from a summary, not by
-- counting every OUT row of the store (0.5 s of the server at a million rows).
-- chunk_tally holds, per job and status other than RUNNING, the dataids at which some
-- OUT row of the job has that status (what COUNT(DISTINCT dataid) of those rows gives);
-- RUNNING chunks are few and counted where they are read, so a claim of a new chunk
-- appends nothing (a RUNNING row's insert or delete changes no other status). A counter that
-- every claim and finish updated would be a hot row each claim of a job waits on until
-- its COMMIT; here a statement that writes datastatus (ours, psql's, a COPY) only
-- appends the chunks it touched to chunk_pending, and a reader folds them in
-- (fold_chunk_tally, under an advisory lock): it compares each pending chunk's statuses
-- now with those chunk_seen holds for it, adds the difference to chunk_tally, and keeps
-- the statuses now. A reader that does not fold adds the pending difference to what it
-- reads (status_counts), so the answer is exact either way.
-- Frozen: never edit a migration once released; a change is a new file.

CREATE TABLE IF NOT EXISTS chunk_pending(
    jobid  text NOT NULL,
    dataid text NOT NULL
);
CREATE TABLE IF NOT EXISTS chunk_seen(
    jobid    text NOT NULL,
    dataid   text NOT NULL,
    statuses text[] NOT NULL,
    PRIMARY KEY (jobid, dataid)
);
CREATE TABLE IF NOT EXISTS chunk_tally(
    jobid  text NOT NULL,
    status text,
    chunks bigint NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS chunk_tally_key ON chunk_tally(jobid, status)
    NULLS NOT DISTINCT;
DELETE FROM chunk_pending;
DELETE FROM chunk_seen;
DELETE FROM chunk_tally;
INSERT INTO chunk_seen(jobid, dataid, statuses)
SELECT jobid, dataid, array_agg(DISTINCT status) FROM datastatus
WHERE locktype = 'OUT' AND status IS DISTINCT FROM 'RUNNING' GROUP BY jobid, dataid;
INSERT INTO chunk_tally(jobid, status, chunks)
SELECT jobid, status, count(DISTINCT dataid) FROM datastatus
WHERE locktype = 'OUT' AND status IS DISTINCT FROM 'RUNNING' GROUP BY jobid, status;

CREATE OR REPLACE FUNCTION dataflow_chunks_written() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO chunk_pending(jobid, dataid)
        SELECT DISTINCT jobid, dataid FROM written
        WHERE locktype = 'OUT' AND status IS DISTINCT FROM 'RUNNING';
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO chunk_pending(jobid, dataid)
        SELECT jobid, dataid FROM gone WHERE locktype = 'OUT'
        UNION SELECT jobid, dataid FROM written WHERE locktype = 'OUT';
    ELSE
        INSERT INTO chunk_pending(jobid, dataid)
        SELECT DISTINCT jobid, dataid FROM gone
        WHERE locktype = 'OUT' AND status IS DISTINCT FROM 'RUNNING';
    END IF;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS chunk_tally_on_insert ON datastatus;
CREATE TRIGGER chunk_tally_on_insert AFTER INSERT ON datastatus
    REFERENCING NEW TABLE AS written
    FOR EACH STATEMENT EXECUTE FUNCTION dataflow_chunks_written();
DROP TRIGGER IF EXISTS chunk_tally_on_update ON datastatus;
CREATE TRIGGER chunk_tally_on_update AFTER UPDATE ON datastatus
    REFERENCING OLD TABLE AS gone NEW TABLE AS written
    FOR EACH STATEMENT EXECUTE FUNCTION dataflow_chunks_written();
DROP TRIGGER IF EXISTS chunk_tally_on_delete ON datastatus;
CREATE TRIGGER chunk_tally_on_delete AFTER DELETE ON datastatus
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION dataflow_chunks_written();
