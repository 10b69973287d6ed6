-- 3: operations: validation results, frozen chunks, fast "last failure" look-ups
-- Frozen: never edit a migration once released; a change is a new file.

ALTER TABLE run ADD COLUMN validation TEXT;  -- NULL: no check; 'passed' or 'failed'
-- last failure per job: only FAILED rows, so claiming and succeeding never write it
CREATE INDEX IF NOT EXISTS run_failures ON run(jobid, runid) WHERE status = 'FAILED';
-- utility hold: the statuses a chunk had before it was frozen, restored on release
CREATE TABLE IF NOT EXISTS hold(
    jobid     TEXT NOT NULL,
    dataid    TEXT NOT NULL,
    datasetid TEXT NOT NULL,
    previous  TEXT,           -- NULL: the chunk had no row; release deletes it
    since     TEXT NOT NULL,
    PRIMARY KEY (jobid, dataid, datasetid)
);
