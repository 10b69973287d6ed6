-- 11: what an operator reads of any host from one place.
-- runlog: the last part of each run's log (its masked output), written by the host that
-- runs it every few seconds while it runs and once at its end; `utility log` on any host
-- reads it. Deleted with its run (purge, or any client's DELETE).
-- action: who did what to which chunk by hand (the CLI: the OS user; the live board: the
-- label of its write token and the client's address), newest last.
-- Frozen: never edit a migration once released; a change is a new file.

CREATE TABLE IF NOT EXISTS runlog(
    runid   INTEGER PRIMARY KEY,  -- the run's row in run
    updated TEXT NOT NULL,
    size    INTEGER NOT NULL,     -- bytes the run's log held then, in all
    kept    INTEGER NOT NULL,     -- bytes of it kept below: its last ones
    done    INTEGER NOT NULL DEFAULT 0 CHECK (done IN (0, 1)),  -- 1: the run had ended
    body    BLOB NOT NULL         -- those bytes, zlib-compressed
);
CREATE TRIGGER IF NOT EXISTS runlog_with_run AFTER DELETE ON run BEGIN
    DELETE FROM runlog WHERE runid = OLD.runid;
END;

CREATE TABLE IF NOT EXISTS action(
    actionid INTEGER PRIMARY KEY,
    acted    TEXT NOT NULL,
    host     TEXT NOT NULL,       -- where the command ran, or the server
    who      TEXT NOT NULL,       -- the OS user, or the write token's label
    client   TEXT,                -- the client's address (the board); NULL: the CLI
    action   TEXT NOT NULL,       -- resubmit, hold, release, recover, end ...
    jobid    TEXT,
    dataid   TEXT,
    detail   TEXT
);
CREATE INDEX IF NOT EXISTS action_by_chunk ON action(jobid, dataid);
