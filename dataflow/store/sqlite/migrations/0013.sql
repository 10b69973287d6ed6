-- 13: `utility status` and /metrics read a job's chunks by status from a summary, not by
-- counting every OUT row of the store (0.15 s of CPU at a million rows). chunk_tally
-- holds, per job and status other than RUNNING, the dataids at which some OUT row of
-- the job has that status (what COUNT(DISTINCT dataid) of those rows gives), kept by
-- plain-SQL triggers in the transaction of each write, ours or any SQLite client's.
-- RUNNING chunks are few and counted where they are read (index
-- datastatus_by_job_status): a claim of a new chunk writes no page more. SQLite
-- serializes its writers, so a row per (job, status) is no queue: a finish already holds
-- the store's write lock. A row is counted where it is the only OUT row of its chunk
-- with its status (the triggers run once per row, seeing the rows written before it).
-- Frozen: never edit a migration once released; a change is a new file.

CREATE TABLE IF NOT EXISTS chunk_tally(
    jobid  TEXT NOT NULL,
    status TEXT NOT NULL,
    chunks INTEGER NOT NULL,
    PRIMARY KEY (jobid, status)
) WITHOUT ROWID;
DELETE FROM chunk_tally;
INSERT INTO chunk_tally(jobid, status, chunks)
SELECT jobid, status, COUNT(DISTINCT dataid) FROM datastatus
WHERE locktype = 'OUT' AND status IS NOT NULL AND status <> 'RUNNING'
GROUP BY jobid, status;
CREATE TRIGGER IF NOT EXISTS chunk_tally_on_insert AFTER INSERT ON datastatus
WHEN NEW.status <> 'RUNNING' AND NEW.locktype = 'OUT' AND NOT EXISTS (
    SELECT 1 FROM datastatus o WHERE o.jobid = NEW.jobid AND o.dataid = NEW.dataid
      AND o.datasetid <> NEW.datasetid AND o.locktype = 'OUT' AND o.status = NEW.status)
BEGIN
    INSERT INTO chunk_tally(jobid, status, chunks) VALUES (NEW.jobid, NEW.status, 1)
    ON CONFLICT(jobid, status) DO UPDATE SET chunks = chunks + 1;
END;
CREATE TRIGGER IF NOT EXISTS chunk_tally_on_delete AFTER DELETE ON datastatus
WHEN OLD.status <> 'RUNNING' AND OLD.locktype = 'OUT' AND NOT EXISTS (
    SELECT 1 FROM datastatus o WHERE o.jobid = OLD.jobid AND o.dataid = OLD.dataid
      AND o.locktype = 'OUT' AND o.status = OLD.status)
BEGIN
    UPDATE chunk_tally SET chunks = chunks - 1 WHERE jobid = OLD.jobid AND status = OLD.status;
END;
CREATE TRIGGER IF NOT EXISTS chunk_tally_on_update_old AFTER UPDATE ON datastatus
WHEN OLD.status <> 'RUNNING' AND OLD.locktype = 'OUT'
  AND (NEW.status IS NOT OLD.status OR NEW.locktype IS NOT 'OUT'
       OR NEW.jobid IS NOT OLD.jobid OR NEW.dataid IS NOT OLD.dataid)
  AND NOT EXISTS (
    SELECT 1 FROM datastatus o WHERE o.jobid = OLD.jobid AND o.dataid = OLD.dataid
      AND o.locktype = 'OUT' AND o.status = OLD.status)
BEGIN
    UPDATE chunk_tally SET chunks = chunks - 1 WHERE jobid = OLD.jobid AND status = OLD.status;
END;
CREATE TRIGGER IF NOT EXISTS chunk_tally_on_update_new AFTER UPDATE ON datastatus
WHEN NEW.status <> 'RUNNING' AND NEW.locktype = 'OUT'
  AND (NEW.status IS NOT OLD.status OR OLD.locktype IS NOT 'OUT'
       OR NEW.jobid IS NOT OLD.jobid OR NEW.dataid IS NOT OLD.dataid)
  AND NOT EXISTS (
    SELECT 1 FROM datastatus o WHERE o.jobid = NEW.jobid AND o.dataid = NEW.dataid
      AND o.datasetid <> NEW.datasetid AND o.locktype = 'OUT' AND o.status = NEW.status)
BEGIN
    INSERT INTO chunk_tally(jobid, status, chunks) VALUES (NEW.jobid, NEW.status, 1)
    ON CONFLICT(jobid, status) DO UPDATE SET chunks = chunks + 1;
END;
