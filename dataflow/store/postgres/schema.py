"""The PostgreSQL store's schema, as ordered migrations; table ``dataflow_schema`` holds
how many were applied.

The three seed tables keep the seed's columns in the seed's order (``modified`` is a
``timestamp``, so the seed's ``now()`` works in positional inserts). ``candidate``, our
index of work, is kept current by triggers written in PL/pgSQL and stored in the database
itself, so a write by ``psql`` or any other client is honoured by the next claim exactly
as one of ours (see :mod:`dataflow.store.sqlite.schema` for the rules: the same here).

Writers are not serialized as in SQLite: two transactions that make the inputs of one
chunk READY at the same time could each miss the other's row and offer nothing. Every
trigger therefore first takes the chunk's offer lock (a transaction-level advisory lock
on its dataid); a claim takes the same lock before it checks a candidate.
"""

from __future__ import annotations

# advisory lock spaces (the first of two int4 keys): a chunk's offers, a job's cap
OFFERS, CAP = 1, 2

_NOW = "localtimestamp"

# The natural sort key of dataflow.dataids.natural_key, in the database: digit runs
# become chr(1) + their length (3 digits) + the digits without leading zeros.
_NATKEY = r"""
CREATE OR REPLACE FUNCTION dataflow_natkey(d text) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE AS $$
DECLARE
    part text;
    digits text;
    result text := '';
BEGIN
    FOR part IN SELECT m[1] FROM regexp_matches(d, '([0-9]+|[^0-9]+)', 'g') AS m LOOP
        IF part ~ '^[0-9]' THEN
            digits := ltrim(part, '0');
            IF digits = '' THEN digits := '0'; END IF;
            result := result || chr(1)
                || CASE WHEN length(digits) < 1000 THEN lpad(length(digits)::text, 3, '0')
                        ELSE length(digits)::text END
                || digits;
        ELSE
            result := result || part;
        END IF;
    END LOOP;
    RETURN result;
END $$;
"""


def _offer(jobs: str, dataid: str) -> str:
    """Add (job, dataid) to ``candidate`` for every job selected by ``jobs`` whose IN
    datasets are all READY at ``dataid`` and whose own OUT rows there are absent,
    RESUBMIT or FAILED (daily jobs never: the claim computes their dataid)."""
    return f"""
    INSERT INTO candidate(jobid, sortkey, dataid)
    SELECT DISTINCT c.jobid, dataflow_natkey({dataid}), {dataid} FROM job c
    WHERE {jobs}
      AND NOT EXISTS (SELECT 1 FROM job t WHERE t.jobid = c.jobid
                      AND t.itemtype = 'IN' AND t.datasetid = 'today')
      AND NOT EXISTS (SELECT 1 FROM job i WHERE i.jobid = c.jobid AND i.itemtype = 'IN'
                      AND NOT EXISTS (SELECT 1 FROM datastatus r
                                      WHERE r.datasetid = i.datasetid AND r.dataid = {dataid}
                                        AND r.locktype = 'OUT' AND r.status = 'READY'))
      AND NOT EXISTS (SELECT 1 FROM datastatus o WHERE o.jobid = c.jobid
                      AND o.dataid = {dataid} AND o.locktype = 'OUT'
                      AND o.status NOT IN ('RESUBMIT', 'FAILED'))
    ON CONFLICT DO NOTHING;"""


def _refresh(jobid: str) -> str:
    """Offer every dataid at which the job's first IN dataset is READY."""
    return f"""
    INSERT INTO candidate(jobid, sortkey, dataid)
    SELECT {jobid}, dataflow_natkey(s.dataid), s.dataid FROM datastatus s
    WHERE s.datasetid = (SELECT datasetid FROM job WHERE jobid = {jobid} AND itemtype = 'IN'
                         ORDER BY datasetid LIMIT 1)
      AND s.locktype = 'OUT' AND s.status = 'READY'
      AND NOT EXISTS (SELECT 1 FROM job t WHERE t.jobid = {jobid}
                      AND t.itemtype = 'IN' AND t.datasetid = 'today')
      AND NOT EXISTS (SELECT 1 FROM job i WHERE i.jobid = {jobid} AND i.itemtype = 'IN'
                      AND NOT EXISTS (SELECT 1 FROM datastatus r
                                      WHERE r.datasetid = i.datasetid AND r.dataid = s.dataid
                                        AND r.locktype = 'OUT' AND r.status = 'READY'))
      AND NOT EXISTS (SELECT 1 FROM datastatus o WHERE o.jobid = {jobid}
                      AND o.dataid = s.dataid AND o.locktype = 'OUT'
                      AND o.status NOT IN ('RESUBMIT', 'FAILED'))
    ON CONFLICT DO NOTHING;"""


_V1 = f"""
CREATE TABLE IF NOT EXISTS dataflow_schema(version integer NOT NULL);
CREATE TABLE IF NOT EXISTS dataset(
    datasetid     text NOT NULL PRIMARY KEY,
    hostname      text,
    database      text,
    schemaname    text,
    tablename     text,
    username      text,
    encryptedpass text
);
CREATE TABLE IF NOT EXISTS job(
    jobid     text NOT NULL,
    itemtype  text NOT NULL,
    datasetid text,
    itemvalue text,
    modified  timestamp DEFAULT {_NOW}
);
CREATE INDEX IF NOT EXISTS job_by_jobid ON job(jobid, itemtype);
CREATE INDEX IF NOT EXISTS job_by_dataset ON job(datasetid, itemtype);
CREATE UNIQUE INDEX IF NOT EXISTS job_dataset_once ON job(jobid, datasetid)
    WHERE itemtype IN ('IN', 'OUT');
CREATE TABLE IF NOT EXISTS datastatus(
    datasetid text NOT NULL,
    jobid     text NOT NULL,
    dataid    text NOT NULL,
    locktype  text,
    status    text,
    modified  timestamp DEFAULT {_NOW},
    PRIMARY KEY (jobid, dataid, datasetid)
);
CREATE INDEX IF NOT EXISTS datastatus_by_chunk ON datastatus(datasetid, dataid)
    WHERE locktype = 'OUT';
CREATE INDEX IF NOT EXISTS datastatus_out_by_modified ON datastatus(modified)
    WHERE locktype = 'OUT';
CREATE INDEX IF NOT EXISTS datastatus_by_job_status ON datastatus(jobid, status, dataid)
    WHERE locktype = 'OUT';
-- natural order is byte order: the "C" collation, whatever the database's
CREATE TABLE IF NOT EXISTS candidate(
    jobid   text NOT NULL,
    sortkey text COLLATE "C" NOT NULL,
    dataid  text COLLATE "C" NOT NULL,
    PRIMARY KEY (jobid, sortkey, dataid)
);
CREATE TABLE IF NOT EXISTS run(
    runid      bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
    jobid      text NOT NULL,
    dataid     text NOT NULL,
    attempt    integer NOT NULL,
    retry      integer NOT NULL DEFAULT 0,
    status     text NOT NULL,
    started    text NOT NULL,
    ended      text,
    duration   double precision,
    exitcode   integer,
    signal     text,
    pid        integer,
    host       text,
    command    text,
    logpath    text,
    reason     text,
    validation text,
    rerun      text
);
CREATE INDEX IF NOT EXISTS run_by_chunk ON run(jobid, dataid, attempt);
CREATE INDEX IF NOT EXISTS run_failures ON run(jobid, runid) WHERE status = 'FAILED';
CREATE INDEX IF NOT EXISTS run_running ON run(jobid, dataid) WHERE status = 'RUNNING';
CREATE TABLE IF NOT EXISTS hold(
    jobid     text NOT NULL,
    dataid    text NOT NULL,
    datasetid text NOT NULL,
    previous  text,
    since     timestamp NOT NULL,
    PRIMARY KEY (jobid, dataid, datasetid)
);
{_NATKEY}
CREATE OR REPLACE FUNCTION dataflow_on_status() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'DELETE' THEN
        PERFORM pg_advisory_xact_lock({OFFERS}, hashtext(OLD.dataid));
        {_offer("c.jobid = OLD.jobid", "OLD.dataid")}
        RETURN NULL;
    END IF;
    IF NEW.locktype IS DISTINCT FROM 'OUT' THEN
        RETURN NULL;
    END IF;
    PERFORM pg_advisory_xact_lock({OFFERS}, hashtext(NEW.dataid));
    IF NEW.status IS NULL OR NEW.status NOT IN ('RESUBMIT', 'FAILED') THEN
        DELETE FROM candidate WHERE jobid = NEW.jobid AND sortkey = dataflow_natkey(NEW.dataid)
            AND dataid = NEW.dataid;
    END IF;
    IF NEW.status = 'READY' THEN
        {_offer("c.itemtype = 'IN' AND c.datasetid = NEW.datasetid", "NEW.dataid")}
    ELSIF NEW.status IN ('RESUBMIT', 'FAILED') THEN
        {_offer("c.jobid = NEW.jobid", "NEW.dataid")}
    END IF;
    RETURN NULL;
END $$;
CREATE OR REPLACE FUNCTION dataflow_on_job() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'DELETE' THEN
        {_refresh("NEW.jobid")}
    END IF;
    IF TG_OP <> 'INSERT' THEN
        {_refresh("OLD.jobid")}
    END IF;
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS candidate_on_status ON datastatus;
CREATE TRIGGER candidate_on_status AFTER INSERT OR UPDATE OR DELETE ON datastatus
    FOR EACH ROW EXECUTE FUNCTION dataflow_on_status();
DROP TRIGGER IF EXISTS candidate_on_job ON job;
CREATE TRIGGER candidate_on_job AFTER INSERT OR UPDATE OR DELETE ON job
    FOR EACH ROW EXECUTE FUNCTION dataflow_on_job();
"""

MIGRATIONS: tuple[str, ...] = (_V1,)
VERSION = len(MIGRATIONS)
