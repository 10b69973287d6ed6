-- 2: run history: one row per attempt; the claim of a live run, its end, how it ended
-- Frozen: never edit a migration once released; a change is a new file.

CREATE TABLE IF NOT EXISTS run(
    runid    INTEGER PRIMARY KEY,
    jobid    TEXT NOT NULL,
    dataid   TEXT NOT NULL,
    attempt  INTEGER NOT NULL,            -- 1, 2, ... for this (job, dataid)
    retry    INTEGER NOT NULL DEFAULT 0,  -- automatic retries since the last fresh start
    status   TEXT NOT NULL,               -- RUNNING, READY or FAILED
    started  TEXT NOT NULL,
    ended    TEXT,
    duration REAL,                        -- seconds
    exitcode INTEGER,
    signal   TEXT,
    pid      INTEGER,
    host     TEXT,
    command  TEXT,
    logpath  TEXT,
    reason   TEXT
);
CREATE INDEX IF NOT EXISTS run_by_chunk ON run(jobid, dataid, attempt);
-- live runs are few; recovery and the max_parallel count look only at them
CREATE INDEX IF NOT EXISTS datastatus_running ON datastatus(jobid, dataid)
    WHERE status = 'RUNNING' AND locktype = 'OUT';
