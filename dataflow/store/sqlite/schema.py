"""The store's schema, as ordered migrations. ``PRAGMA user_version`` = migrations applied.

The three seed tables keep the seed's columns in the seed's order, so the
quickstart's positional and named inserts run unchanged.

``candidate`` is our index of work: (job, dataid) pairs whose inputs were all
READY when last touched and that the job has not produced. Triggers keep it
current for every write, including a user's ``utility dml``, so a claim reads
the smallest candidate instead of stepping over every chunk already done. It
may hold stale pairs (an input was later resubmitted, say); the claim checks
each pair exactly and drops the stale ones.
"""

from __future__ import annotations

import re

_NOW = "(strftime('%Y-%m-%d %H:%M:%f', 'now', 'localtime'))"


def _function_key(dataid: str) -> str:
    """The natural sort key through our SQL function (schema v1-v6: only our process
    could write the tables)."""
    return f"dataflow_natkey({dataid})"


def _digits_key(digits: str) -> str:
    """Plain SQL for the natural key of one run of ASCII digits (see dataids.natural_key)."""
    value = f"(CASE WHEN ltrim({digits}, '0') = '' THEN '0' ELSE ltrim({digits}, '0') END)"
    return f"char(1) || printf('%03d', length({value})) || {value}"


def _plain_key(dataid: str) -> str:
    """The natural sort key in plain SQL, which every SQLite client can run (v7): exact for
    shard numbers and ISO dates, '' for any other dataid. A claim walks candidates by key
    and puts a row whose key is not its dataid's in its place first, so '' (first of all)
    only defers the exact key to the next claim."""
    number = f"({dataid} <> '' AND {dataid} NOT GLOB '*[^0-9]*')"
    date = f"({dataid} GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]')"
    parts = [
        _digits_key(f"substr({dataid}, {at}, {size})") for at, size in ((1, 4), (6, 2), (9, 2))
    ]
    dated = " || '-' || ".join(parts)
    return f"(CASE WHEN {number} THEN {_digits_key(dataid)} WHEN {date} THEN {dated} ELSE '' END)"


def _offer(jobs: str, dataid: str, key=_function_key) -> str:
    """SQL that adds (job, dataid) to ``candidate`` for every job selected by ``jobs``
    (a condition on ``job c``) whose IN datasets are all READY at ``dataid`` and whose
    own OUT rows there are absent, RESUBMIT or FAILED. Daily (``today``) jobs are
    never candidates: the claim computes their one dataid itself."""
    return f"""
    INSERT OR IGNORE INTO candidate(jobid, sortkey, dataid)
    SELECT DISTINCT c.jobid, {key(dataid)}, {dataid} FROM job c
    WHERE {jobs}
      AND NOT EXISTS (SELECT 1 FROM job t WHERE t.jobid = c.jobid
                      AND t.itemtype = 'IN' AND t.datasetid = 'today')
      AND NOT EXISTS (SELECT 1 FROM job i WHERE i.jobid = c.jobid AND i.itemtype = 'IN'
                      AND NOT EXISTS (SELECT 1 FROM datastatus r
                                      WHERE r.datasetid = i.datasetid AND r.dataid = {dataid}
                                        AND r.locktype = 'OUT' AND r.status = 'READY'))
      AND NOT EXISTS (SELECT 1 FROM datastatus o WHERE o.jobid = c.jobid
                      AND o.dataid = {dataid} AND o.locktype = 'OUT'
                      AND o.status NOT IN ('RESUBMIT', 'FAILED'));"""


def _refresh(jobid: str, key=_function_key) -> str:
    """SQL that offers every dataid at which ``jobid``'s first IN dataset is READY."""
    first_input = (
        f"(SELECT datasetid FROM job WHERE jobid = {jobid} AND itemtype = 'IN' "
        "ORDER BY datasetid LIMIT 1)"
    )
    return f"""
    INSERT OR IGNORE INTO candidate(jobid, sortkey, dataid)
    SELECT {jobid}, {key("s.dataid")}, s.dataid FROM datastatus s
    WHERE s.datasetid = {first_input} AND s.locktype = 'OUT' AND s.status = 'READY'
      AND NOT EXISTS (SELECT 1 FROM job t WHERE t.jobid = {jobid}
                      AND t.itemtype = 'IN' AND t.datasetid = 'today')
      AND NOT EXISTS (SELECT 1 FROM job i WHERE i.jobid = {jobid} AND i.itemtype = 'IN'
                      AND NOT EXISTS (SELECT 1 FROM datastatus r
                                      WHERE r.datasetid = i.datasetid AND r.dataid = s.dataid
                                        AND r.locktype = 'OUT' AND r.status = 'READY'))
      AND NOT EXISTS (SELECT 1 FROM datastatus o WHERE o.jobid = {jobid}
                      AND o.dataid = s.dataid AND o.locktype = 'OUT'
                      AND o.status NOT IN ('RESUBMIT', 'FAILED'));"""


def _on_status(new: str, key=_function_key) -> str:
    """Offers made when a datastatus row ``new`` (NEW or OLD) appears or changes:
    its consumers when it is a READY output, its own job when it can be rerun."""
    # The status tests come first: a RUNNING or HOLD row offers nothing, cheaply.
    consumers = _offer(
        f"{new}.status = 'READY' AND c.itemtype = 'IN' AND c.datasetid = {new}.datasetid",
        f"{new}.dataid",
        key,
    )
    itself = _offer(
        f"{new}.status IN ('RESUBMIT', 'FAILED') AND c.jobid = {new}.jobid", f"{new}.dataid", key
    )
    return consumers + itself


_V1 = f"""
CREATE TABLE IF NOT EXISTS dataset(
    datasetid     TEXT NOT NULL PRIMARY KEY,
    hostname      TEXT,
    database      TEXT,
    schemaname    TEXT,
    tablename     TEXT,
    username      TEXT,
    encryptedpass TEXT
);
CREATE TABLE IF NOT EXISTS job(
    jobid     TEXT NOT NULL,
    itemtype  TEXT NOT NULL,
    datasetid TEXT,
    itemvalue TEXT,
    modified  TEXT DEFAULT {_NOW}
);
CREATE INDEX IF NOT EXISTS job_by_jobid ON job(jobid, itemtype);
CREATE INDEX IF NOT EXISTS job_by_dataset ON job(datasetid, itemtype);
-- a dataset is listed once per job, as IN or as OUT, never both
CREATE UNIQUE INDEX IF NOT EXISTS job_dataset_once ON job(jobid, datasetid)
    WHERE itemtype IN ('IN', 'OUT');
CREATE TABLE IF NOT EXISTS datastatus(
    datasetid TEXT NOT NULL,
    jobid     TEXT NOT NULL,
    dataid    TEXT NOT NULL,
    locktype  TEXT,
    status    TEXT,
    modified  TEXT DEFAULT {_NOW},
    PRIMARY KEY (datasetid, jobid, dataid)
);
CREATE INDEX IF NOT EXISTS datastatus_by_chunk ON datastatus(datasetid, dataid);
CREATE INDEX IF NOT EXISTS datastatus_by_job ON datastatus(jobid, dataid);
CREATE INDEX IF NOT EXISTS datastatus_by_modified ON datastatus(modified);
CREATE TABLE IF NOT EXISTS candidate(
    jobid   TEXT NOT NULL,
    sortkey TEXT NOT NULL,
    dataid  TEXT NOT NULL,
    PRIMARY KEY (jobid, sortkey, dataid)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS candidate_on_insert AFTER INSERT ON datastatus
WHEN NEW.locktype = 'OUT' BEGIN {_on_status("NEW")} END;
CREATE TRIGGER IF NOT EXISTS candidate_on_update AFTER UPDATE ON datastatus
WHEN NEW.locktype = 'OUT' BEGIN {_on_status("NEW")} END;
CREATE TRIGGER IF NOT EXISTS candidate_on_delete AFTER DELETE ON datastatus
BEGIN {_offer("c.jobid = OLD.jobid", "OLD.dataid")} END;
CREATE TRIGGER IF NOT EXISTS candidate_on_job_insert AFTER INSERT ON job
BEGIN {_refresh("NEW.jobid")} END;
CREATE TRIGGER IF NOT EXISTS candidate_on_job_update AFTER UPDATE ON job
BEGIN {_refresh("NEW.jobid")} {_refresh("OLD.jobid")} END;
CREATE TRIGGER IF NOT EXISTS candidate_on_job_delete AFTER DELETE ON job
BEGIN {_refresh("OLD.jobid")} END;
"""

# Run history: one row per attempt; the claim of a live run, its end, how it ended.
_V2 = """
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
"""

# Operations: validation results, frozen chunks, fast "last failure" look-ups.
_V3 = """
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
"""


def _retire(new: str, key=_function_key) -> str:
    """SQL that drops the row's own (job, dataid) from ``candidate`` once that output is
    RUNNING, READY or HOLD, so a chunk done by any path (a claim, ``utility dml``, an
    import in any order) never lingers there for a claim to step over."""
    return f"""
    DELETE FROM candidate WHERE {new}.status NOT IN ('RESUBMIT', 'FAILED')
      AND jobid = {new}.jobid AND sortkey = {key(f"{new}.dataid")}
      AND dataid = {new}.dataid;"""


# v4: the OUT-row triggers also retire their own chunk; stale pairs left before go;
# an index for the status view.
_V4 = f"""
DROP TRIGGER IF EXISTS candidate_on_insert;
DROP TRIGGER IF EXISTS candidate_on_update;
CREATE TRIGGER candidate_on_insert AFTER INSERT ON datastatus
WHEN NEW.locktype = 'OUT' BEGIN {_retire("NEW")} {_on_status("NEW")} END;
CREATE TRIGGER candidate_on_update AFTER UPDATE ON datastatus
WHEN NEW.locktype = 'OUT' BEGIN {_retire("NEW")} {_on_status("NEW")} END;
-- runs lists the newest OUT rows; IN rows, written and deleted by every run, stay out
DROP INDEX IF EXISTS datastatus_by_modified;
CREATE INDEX IF NOT EXISTS datastatus_out_by_modified ON datastatus(modified) WHERE locktype = 'OUT';
-- utility status counts chunks per job and status from this index alone; it also finds
-- a job's RUNNING chunks, so the narrower index of v2 goes (one b-tree less per claim)
CREATE INDEX IF NOT EXISTS datastatus_by_job_status ON datastatus(jobid, status, dataid)
    WHERE locktype = 'OUT';
DROP INDEX IF EXISTS datastatus_running;
DELETE FROM candidate WHERE EXISTS (
    SELECT 1 FROM datastatus o WHERE o.jobid = candidate.jobid AND o.dataid = candidate.dataid
      AND o.locktype = 'OUT' AND o.status NOT IN ('RESUBMIT', 'FAILED'));
"""

# v5: datastatus keyed by (jobid, dataid, datasetid), WITHOUT ROWID. A claim's OUT and
# IN rows share one leaf page, a job's rows at a dataid need no index of their own, and
# the dataset look-ups (inputs READY?) need only OUT rows: a claim writes 7 pages to the
# WAL instead of 11 (benchmarks/findings.md). The key is the seed's, in another order.
# The table is rebuilt; legacy_alter_table keeps the rename from rewriting or checking
# the triggers and views that name datastatus (they name it again once it is back).
# store.create puts back indexes and triggers a user added to datastatus.
_V5 = f"""
PRAGMA legacy_alter_table = ON;
CREATE TABLE datastatus_v5(
    datasetid TEXT NOT NULL,
    jobid     TEXT NOT NULL,
    dataid    TEXT NOT NULL,
    locktype  TEXT,
    status    TEXT,
    modified  TEXT DEFAULT {_NOW},
    PRIMARY KEY (jobid, dataid, datasetid)
) WITHOUT ROWID;
INSERT INTO datastatus_v5 SELECT datasetid, jobid, dataid, locktype, status, modified
    FROM datastatus;
DROP TABLE datastatus;
ALTER TABLE datastatus_v5 RENAME TO datastatus;
PRAGMA legacy_alter_table = OFF;
CREATE INDEX datastatus_by_chunk ON datastatus(datasetid, dataid) WHERE locktype = 'OUT';
CREATE INDEX datastatus_out_by_modified ON datastatus(modified) WHERE locktype = 'OUT';
-- locktype is a column too, although always 'OUT': SQLite counts an index as covering
-- only by its columns, and against the key's (jobid ...) it uses only a covering one
CREATE INDEX datastatus_by_job_status ON datastatus(jobid, status, dataid, locktype)
    WHERE locktype = 'OUT';
CREATE TRIGGER candidate_on_insert AFTER INSERT ON datastatus
WHEN NEW.locktype = 'OUT' BEGIN {_retire("NEW")} {_on_status("NEW")} END;
CREATE TRIGGER candidate_on_update AFTER UPDATE ON datastatus
WHEN NEW.locktype = 'OUT' BEGIN {_retire("NEW")} {_on_status("NEW")} END;
CREATE TRIGGER candidate_on_delete AFTER DELETE ON datastatus
BEGIN {_offer("c.jobid = OLD.jobid", "OLD.dataid")} END;
"""

# v6: a run asked to end in RESUBMIT (a cascade reached it while it ran)
_V6 = """
ALTER TABLE run ADD COLUMN rerun TEXT;  -- NULL, or why a rerun was asked of this run
"""

# v7: an open store. The triggers use plain SQL only, so that any SQLite client (the
# sqlite3 shell, Python's sqlite3, Go, Java...) may write datastatus and job and the
# next claim honours it. Keys they cannot compute exactly are completed by the claim.
_V7 = f"""
DROP TRIGGER IF EXISTS candidate_on_insert;
DROP TRIGGER IF EXISTS candidate_on_update;
DROP TRIGGER IF EXISTS candidate_on_delete;
DROP TRIGGER IF EXISTS candidate_on_job_insert;
DROP TRIGGER IF EXISTS candidate_on_job_update;
DROP TRIGGER IF EXISTS candidate_on_job_delete;
CREATE TRIGGER candidate_on_insert AFTER INSERT ON datastatus
WHEN NEW.locktype = 'OUT' BEGIN {_retire("NEW", _plain_key)} {_on_status("NEW", _plain_key)} END;
CREATE TRIGGER candidate_on_update AFTER UPDATE ON datastatus
WHEN NEW.locktype = 'OUT' BEGIN {_retire("NEW", _plain_key)} {_on_status("NEW", _plain_key)} END;
CREATE TRIGGER candidate_on_delete AFTER DELETE ON datastatus
BEGIN {_offer("c.jobid = OLD.jobid", "OLD.dataid", _plain_key)} END;
CREATE TRIGGER candidate_on_job_insert AFTER INSERT ON job
BEGIN {_refresh("NEW.jobid", _plain_key)} END;
CREATE TRIGGER candidate_on_job_update AFTER UPDATE ON job
BEGIN {_refresh("NEW.jobid", _plain_key)} {_refresh("OLD.jobid", _plain_key)} END;
CREATE TRIGGER candidate_on_job_delete AFTER DELETE ON job
BEGIN {_refresh("OLD.jobid", _plain_key)} END;
"""

# v8: a run's token (DATAFLOW_RUN), unique forever: a run number may come back after
# its row is deleted
_V8 = """
ALTER TABLE run ADD COLUMN token TEXT;
"""

MIGRATIONS: tuple[str, ...] = (_V1, _V2, _V3, _V4, _V5, _V6, _V7, _V8)
VERSION = len(MIGRATIONS)
# the tables a migration rebuilds (by its version): indexes and triggers a user made on
# them are put back after it
REBUILDS = {5: "datastatus"}


def ours() -> frozenset[str]:
    """Every index and trigger a migration makes or drops; any other one is a user's."""
    return frozenset(
        re.findall(r"(?:INDEX|TRIGGER) (?:IF (?:NOT )?EXISTS )?(\w+)", "".join(MIGRATIONS))
    )
