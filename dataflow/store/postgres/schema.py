"""The PostgreSQL store's schema, as ordered migrations; table ``dataflow_schema`` holds
how many were applied.

The three seed tables keep the seed's columns in the seed's order (``modified`` is a
``timestamp``, so the seed's ``now()`` works in positional inserts). ``candidate``, our
index of work, is kept current by triggers written in PL/pgSQL and stored in the database
itself, so a write by ``psql`` or any other client is honoured by the next claim exactly
as one of ours (see :mod:`dataflow.store.sqlite.schema` for the rules: the same here).

Writers are not serialized as in SQLite: two transactions that make the inputs of one
chunk READY at the same time could each miss the other's row and offer nothing. The
trigger therefore first takes the offer locks of the chunks a statement wrote
(transaction-level advisory locks); a claim takes a chunk's lock before it checks the
candidate. Since version 2 an offer lock covers one of :data:`OFFER_LOCKS` buckets of
dataids, and the trigger runs once per statement and takes its locks in order: a
statement that writes tens of thousands of chunks (a producer marking a backlog READY,
``copy-store``) holds at most that many locks, where one lock per dataid ran out of
PostgreSQL's shared lock table (64 per connection by default), and two such statements
never deadlock on them.
"""

from __future__ import annotations

# advisory lock spaces (the first of two int4 keys): a chunk's offers, a job's cap
OFFERS, CAP = 1, 2
OFFER_LOCKS = 1024  # buckets of dataids, one offer lock each (version 2)


def offer_lock(dataid: str) -> str:
    """The two keys of the offer lock of the dataid that SQL expression ``dataid`` gives."""
    return f"{OFFERS}, {_bucket(dataid)}"


def _bucket(dataid: str) -> str:
    return f"hashtext({dataid}) & {OFFER_LOCKS - 1}"


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


def _claimable(job: str, dataid: str) -> str:
    """SQL conditions: ``job`` is not daily, its IN datasets are all READY at ``dataid``,
    and its own OUT rows there are absent, RESUBMIT or FAILED."""
    return f"""NOT EXISTS (SELECT 1 FROM job t WHERE t.jobid = {job}
                      AND t.itemtype = 'IN' AND t.datasetid = 'today')
      AND NOT EXISTS (SELECT 1 FROM job i WHERE i.jobid = {job} AND i.itemtype = 'IN'
                      AND NOT EXISTS (SELECT 1 FROM datastatus r
                                      WHERE r.datasetid = i.datasetid AND r.dataid = {dataid}
                                        AND r.locktype = 'OUT' AND r.status = 'READY'))
      AND NOT EXISTS (SELECT 1 FROM datastatus o WHERE o.jobid = {job}
                      AND o.dataid = {dataid} AND o.locktype = 'OUT'
                      AND o.status NOT IN ('RESUBMIT', 'FAILED'))"""


def _offer(jobs: str, dataid: str) -> str:
    """Add (job, dataid) to ``candidate`` for every job selected by ``jobs`` that is
    :func:`_claimable` there (daily jobs never: the claim computes their dataid)."""
    return f"""
    INSERT INTO candidate(jobid, sortkey, dataid)
    SELECT DISTINCT c.jobid, dataflow_natkey({dataid}), {dataid} FROM job c
    WHERE {jobs}
      AND {_claimable("c.jobid", dataid)}
    ON CONFLICT DO NOTHING;"""


def _refresh(jobid: str) -> str:
    """Offer every dataid at which the job's first IN dataset is READY."""
    return f"""
    INSERT INTO candidate(jobid, sortkey, dataid)
    SELECT {jobid}, dataflow_natkey(s.dataid), s.dataid FROM datastatus s
    WHERE s.datasetid = (SELECT datasetid FROM job WHERE jobid = {jobid} AND itemtype = 'IN'
                         ORDER BY datasetid LIMIT 1)
      AND s.locktype = 'OUT' AND s.status = 'READY'
      AND {_claimable(jobid, "s.dataid")}
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


def _take_offer_locks(rows: str) -> str:
    """The offer locks of the dataids of ``rows``, in one order for every statement."""
    return f"""
    PERFORM pg_advisory_xact_lock({OFFERS}, b) FROM (
        SELECT DISTINCT {_bucket("dataid")} AS b FROM {rows} ORDER BY b) AS s;"""


def _offer_rows(rows: str, jobs: str) -> str:
    """:func:`_offer` for every row ``n`` of ``rows`` at once, to the jobs ``c`` that
    ``jobs`` pairs with it. Each check is a subquery on one (job, dataid), so it is an
    index seek whatever the planner guesses of the rows' number (a transition table has
    no statistics; joins planned on guesses walked every row of a job for each row). The
    job's own rows are found without naming their locktype, so that only the key can
    serve: the partial index ``datastatus_by_job_status`` (jobid, status, dataid) would
    seek the job, then walk its rows for the dataid (a store just filled by ``copy-store``
    is planned as if empty, and took 1 ms a row)."""
    return f"""
    INSERT INTO candidate(jobid, sortkey, dataid)
    SELECT DISTINCT c.jobid, dataflow_natkey(n.dataid), n.dataid FROM {rows} n JOIN job c ON {jobs}
    WHERE (SELECT 1 FROM job t WHERE t.jobid = c.jobid AND t.datasetid = 'today'
           AND t.itemtype = 'IN') IS NULL
      AND (SELECT count(*) FROM job i WHERE i.jobid = c.jobid AND i.itemtype = 'IN')
        = (SELECT count(*) FROM job i WHERE i.jobid = c.jobid AND i.itemtype = 'IN'
           AND (SELECT 1 FROM datastatus r WHERE r.datasetid = i.datasetid
                AND r.dataid = n.dataid AND r.locktype = 'OUT' AND r.status = 'READY'
                LIMIT 1) IS NOT NULL)
      AND (SELECT bool_or(o.locktype = 'OUT' AND o.status NOT IN ('RESUBMIT', 'FAILED'))
           FROM datastatus o WHERE o.jobid = c.jobid AND o.dataid = n.dataid) IS NOT TRUE
    ON CONFLICT DO NOTHING;"""


def _withdraw(rows: str) -> str:
    """Take back the candidates of the consumers of the OUT rows ``n`` of ``rows`` where
    no row of their dataset is READY any more (a claim would drop them one at a time:
    after a mass resubmit upstream, thousands of round trips)."""
    return f"""
    DELETE FROM candidate d USING {rows} n JOIN job c ON c.itemtype = 'IN'
                                                     AND c.datasetid = n.datasetid
    WHERE d.jobid = c.jobid AND d.sortkey = dataflow_natkey(n.dataid) AND d.dataid = n.dataid
      AND (SELECT 1 FROM datastatus r WHERE r.datasetid = n.datasetid AND r.dataid = n.dataid
           AND r.locktype = 'OUT' AND r.status = 'READY' LIMIT 1) IS NULL;"""


_OUT = "(SELECT * FROM written WHERE locktype = 'OUT')"

# 2: the trigger on datastatus runs once per statement, over the statement's rows
# (transition tables), set-based, and takes their offer locks first, by bucket of dataids
# and in order: one lock per dataid ran out of shared memory beyond ~6,000 chunks
# written in a transaction, and two bulk statements wait for each other instead of
# deadlocking. It also takes back the candidates of the consumers of an OUT row that is
# no longer READY.
_V2 = f"""
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
        {_take_offer_locks("gone")}
        {_offer_rows("gone", "c.jobid = n.jobid")}
        IF other THEN
            {_withdraw("(SELECT * FROM gone WHERE locktype = 'OUT')")}
        END IF;
        RETURN NULL;
    END IF;
    SELECT bool_or(status = 'READY'), bool_or(status IN ('RESUBMIT', 'FAILED')),
           bool_or(status IS NULL OR status NOT IN ('READY', 'RESUBMIT', 'FAILED'))
    INTO ready, rerun, other FROM written WHERE locktype = 'OUT';
    IF ready IS NULL THEN
        RETURN NULL;  -- IN rows, or none (the other half of an INSERT ... ON CONFLICT)
    END IF;
    {_take_offer_locks(_OUT + " AS w")}
    IF ready OR other THEN
        DELETE FROM candidate d USING {_OUT} n
        WHERE (n.status IS NULL OR n.status NOT IN ('RESUBMIT', 'FAILED'))
          AND d.jobid = n.jobid AND d.sortkey = dataflow_natkey(n.dataid)
          AND d.dataid = n.dataid;
    END IF;
    IF ready THEN
        {_offer_rows(_OUT, "n.status = 'READY' AND c.itemtype = 'IN' AND c.datasetid = n.datasetid")}
    END IF;
    IF rerun THEN
        {_offer_rows(_OUT, "n.status IN ('RESUBMIT', 'FAILED') AND c.jobid = n.jobid")}
    END IF;
    IF TG_OP = 'UPDATE' AND (rerun OR other) THEN  -- a new row was READY nowhere before
        {_withdraw("(SELECT * FROM written WHERE locktype = 'OUT' AND status IS DISTINCT FROM 'READY')")}
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
"""

# v3: a run's lease (its token, unique forever; its heartbeat, renewed by its keeper, and
# how long the heartbeat holds: another host may take the chunk only once it is older)
_V3 = """
ALTER TABLE run ADD COLUMN IF NOT EXISTS token text;
ALTER TABLE run ADD COLUMN IF NOT EXISTS seen timestamptz;
ALTER TABLE run ADD COLUMN IF NOT EXISTS lease double precision;
"""

MIGRATIONS: tuple[str, ...] = (_V1, _V2, _V3)
VERSION = len(MIGRATIONS)
