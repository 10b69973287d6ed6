"""The offer rule, written once, and rendered into both stores' triggers.

``candidate`` is our index of work: the (job, dataid) pairs a claim looks at, in natural
order. The judge of a claim is Python (``run.claim.lifecycle.claimable``, which checks each
candidate exactly and drops a stale one); the triggers only *offer* a pair that may pass,
so that a claim reads the smallest candidate instead of stepping over every chunk done.
They are written in the database itself, so that a write by the ``sqlite3`` shell,
``psql`` or any other client is offered exactly as one of ours.

The rule: a job is offered a dataid when it reads no clock dataset (the claim computes a
clock job's dataid itself), each of its IN datasets has a READY row at that dataid, and
its own OUT rows there are absent or may be rerun (:data:`RERUNNABLE`). The rule's facts
are the constants below; its conditions are written here twice, as a *row* form (SQLite
runs a trigger per row: plain SQL any SQLite client can run) and a *set* form
(PostgreSQL runs a trigger per statement over its rows at once; each check a subquery on
one (job, dataid), an index seek whatever the planner guesses of a transition table).
The natural key: :func:`dataflow.dataids.natural_key` in Python, :func:`plain_key` in
SQLite's plain SQL (exact for shard numbers and ISO dates, '' for any other dataid, put
right by the claim), ``dataflow_natkey`` in PL/pgSQL, all from the same marker and width.

Migrations are frozen, so a change of the rule is a new migration per store: change this
module, then ``python -m dataflow.store.offers sqlite`` (or ``postgres``) prints the
statements to put in the next migration file. ``tests/test_offers.py`` checks that the
newest migration holding each of these statements is what this module writes.
"""

from __future__ import annotations

import sys

from ..dataids import KEY_MARK, KEY_WIDTH

CLOCK = "today"  # the clock dataset whose jobs the triggers never offer
READY = "READY"
RERUNNABLE = ("RESUBMIT", "FAILED")  # an OUT row with one of these may run again
OFFERS = 1  # PostgreSQL: the advisory lock space (first int4 key) of a chunk's offers
OFFER_LOCKS = 1024  # PostgreSQL: buckets of dataids, one offer lock each


def _listed(*statuses: str) -> str:
    return "(" + ", ".join(f"'{status}'" for status in statuses) + ")"


_RERUN = _listed(*RERUNNABLE)


def offer_lock(dataid: str) -> str:
    """PostgreSQL: the two keys of the offer lock of the dataid that SQL expression
    ``dataid`` gives; every datastatus trigger takes it, and so does a claim."""
    return f"{OFFERS}, {_bucket(dataid)}"


def _bucket(dataid: str) -> str:
    return f"hashtext({dataid}) & {OFFER_LOCKS - 1}"


# -- the natural key ----------------------------------------------------------------------


def _digits_key(digits: str) -> str:
    """Plain SQL for the natural key of one run of ASCII digits: its length without the
    leading zeros (at least one digit), then its digits without them ("0" for none)."""
    trimmed = f"ltrim({digits}, '0')"
    return (
        f"char({KEY_MARK}) || printf('%0{KEY_WIDTH}d', max(length({trimmed}), 1))"
        f" || coalesce(nullif({trimmed}, ''), '0')"
    )


def _date_key(date: str) -> str:
    """Plain SQL for the natural key of an ISO date (``YYYY-MM-DD``, checked): each part
    is an integer (``+ 0``), which SQLite writes without leading zeros."""
    parts = [f"substr({date}, {at}, {size}) + 0" for at, size in ((1, 4), (6, 2), (9, 2))]
    marked = "-".join([f"%s%0{KEY_WIDTH}d%d"] * 3)
    values = ", ".join(f"char({KEY_MARK}), length({part}), {part}" for part in parts)
    return f"printf('{marked}', {values})"


def plain_key(dataid: str) -> str:
    """The natural key of SQL expression ``dataid`` in plain SQL, which every SQLite client
    can run: exact for shard numbers and ISO dates, '' for any other dataid. A claim walks
    candidates by key and puts a row whose key is not its dataid's in its place first, so
    '' (first of all) only defers the exact key to the next claim. Every connection parses
    it at each of its uses in the triggers (eleven): short, it costs each start less."""
    number = f"{dataid} <> '' AND {dataid} NOT GLOB '*[^0-9]*'"
    date = f"{dataid} GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]'"
    return (
        f"(CASE WHEN {number} THEN {_digits_key(dataid)}"
        f" WHEN {date} THEN {_date_key(dataid)} ELSE '' END)"
    )


def _function_key(dataid: str) -> str:
    return f"dataflow_natkey({dataid})"


def natkey() -> str:
    """PostgreSQL's natural key, a function the board's index and the claim call too."""
    return rf"""CREATE OR REPLACE FUNCTION dataflow_natkey(d text) RETURNS text
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
            result := result || chr({KEY_MARK})
                || CASE WHEN length(digits) < {10**KEY_WIDTH} THEN lpad(length(digits)::text, {KEY_WIDTH}, '0')
                        ELSE length(digits)::text END
                || digits;
        ELSE
            result := result || part;
        END IF;
    END LOOP;
    RETURN result;
END $$;"""


# -- the rule, row by row (SQLite; PostgreSQL's job trigger) ------------------------------


def _row_rule(job: str, dataid: str) -> str:
    """The rule's conditions for ``job`` at ``dataid`` (SQL expressions), as NOT EXISTS."""
    return f"""NOT EXISTS (SELECT 1 FROM job t WHERE t.jobid = {job}
                      AND t.itemtype = 'IN' AND t.datasetid = '{CLOCK}')
      AND NOT EXISTS (SELECT 1 FROM job i WHERE i.jobid = {job} AND i.itemtype = 'IN'
                      AND NOT EXISTS (SELECT 1 FROM datastatus r
                                      WHERE r.datasetid = i.datasetid AND r.dataid = {dataid}
                                        AND r.locktype = 'OUT' AND r.status = '{READY}'))
      AND NOT EXISTS (SELECT 1 FROM datastatus o WHERE o.jobid = {job}
                      AND o.dataid = {dataid} AND o.locktype = 'OUT'
                      AND o.status NOT IN {_RERUN})"""


# A pair offered already is left as it is. Not SQLite's INSERT OR IGNORE: the conflict
# clause of the statement that fired a trigger overrides the trigger's own, so a user's
# upsert of a datastatus row (INSERT ... ON CONFLICT DO UPDATE) made an offer made already
# fail on candidate's key (SQLite migration 14); an upsert clause is the trigger's alone.
SKIP_OFFERED = "\n    ON CONFLICT DO NOTHING;"


def _offer(jobs: str, dataid: str, sqlite: bool) -> str:
    """Offer ``dataid`` to every job ``c`` that ``jobs`` selects and the rule lets pass."""
    key = plain_key if sqlite else _function_key
    return f"""
    INSERT INTO candidate(jobid, sortkey, dataid)
    SELECT DISTINCT c.jobid, {key(dataid)}, {dataid} FROM job c
    WHERE {jobs}
      AND {_row_rule("c.jobid", dataid)}{SKIP_OFFERED}"""


def _refresh(jobid: str, sqlite: bool) -> str:
    """Offer the job every dataid at which its first IN dataset is READY."""
    key = plain_key if sqlite else _function_key
    first = f"(SELECT datasetid FROM job WHERE jobid = {jobid} AND itemtype = 'IN'"
    ready = f"s.locktype = 'OUT' AND s.status = '{READY}'"
    where = (
        f"s.datasetid = {first} ORDER BY datasetid LIMIT 1) AND {ready}"
        if sqlite
        else f"s.datasetid = {first}\n                         ORDER BY datasetid LIMIT 1)\n"
        f"      AND {ready}"
    )
    return f"""
    INSERT INTO candidate(jobid, sortkey, dataid)
    SELECT {jobid}, {key("s.dataid")}, s.dataid FROM datastatus s
    WHERE {where}
      AND {_row_rule(jobid, "s.dataid")}{SKIP_OFFERED}"""


def _retire(new: str) -> str:
    """Drop the row's own (job, dataid) once that output may not run again (RUNNING,
    READY, HOLD), so a chunk done by any path never lingers for a claim to step over."""
    return f"""
    DELETE FROM candidate WHERE {new}.status NOT IN {_RERUN}
      AND jobid = {new}.jobid AND sortkey = {plain_key(f"{new}.dataid")}
      AND dataid = {new}.dataid;"""


def _on_status(new: str) -> str:
    """SQLite: what a datastatus row ``new`` that appears or changes offers: its consumers
    when it is a READY output, its own job when it may run again. The status tests come
    first: a RUNNING or HOLD row offers nothing, cheaply."""
    consumers = f"{new}.status = '{READY}' AND c.itemtype = 'IN' AND c.datasetid = {new}.datasetid"
    itself = f"{new}.status IN {_RERUN} AND c.jobid = {new}.jobid"
    mine = f"{new}.dataid"
    return _retire(new) + " " + _offer(consumers, mine, True) + _offer(itself, mine, True)


def sqlite() -> str:
    """SQLite's triggers of the rule: the statements of its newest rule migration."""
    status = "BEGIN {} END;".format(_on_status("NEW"))
    drops = "".join(
        f"DROP TRIGGER IF EXISTS candidate_on_{name};\n"
        for name in ("insert", "update", "delete", "job_insert", "job_update", "job_delete")
    )
    refresh_new, refresh_old = _refresh("NEW.jobid", True), _refresh("OLD.jobid", True)
    return f"""{drops}CREATE TRIGGER candidate_on_insert AFTER INSERT ON datastatus
WHEN NEW.locktype = 'OUT' {status}
CREATE TRIGGER candidate_on_update AFTER UPDATE ON datastatus
WHEN NEW.locktype = 'OUT' {status}
CREATE TRIGGER candidate_on_delete AFTER DELETE ON datastatus
BEGIN {_offer("c.jobid = OLD.jobid", "OLD.dataid", True)} END;
CREATE TRIGGER candidate_on_job_insert AFTER INSERT ON job
BEGIN {refresh_new} END;
CREATE TRIGGER candidate_on_job_update AFTER UPDATE ON job
BEGIN {refresh_new} {refresh_old} END;
CREATE TRIGGER candidate_on_job_delete AFTER DELETE ON job
BEGIN {refresh_old} END;
"""


# -- the rule, a statement's rows at once (PostgreSQL) ------------------------------------


def _take_offer_locks(rows: str) -> str:
    """The offer locks of the dataids of ``rows``, in one order for every statement (two
    bulk statements wait for each other instead of deadlocking)."""
    return f"""
    PERFORM pg_advisory_xact_lock({OFFERS}, b) FROM (
        SELECT DISTINCT {_bucket("dataid")} AS b FROM {rows} ORDER BY b) AS s;"""


def _offer_rows(rows: str, jobs: str) -> str:
    """:func:`_offer` for every row ``n`` of ``rows`` at once, to the jobs ``c`` that
    ``jobs`` pairs with it. The job's own rows are found without naming their locktype,
    so that only the key can serve (the partial index on (jobid, status, dataid) would
    seek the job, then walk its rows for the dataid)."""
    return f"""
    INSERT INTO candidate(jobid, sortkey, dataid)
    SELECT DISTINCT c.jobid, dataflow_natkey(n.dataid), n.dataid FROM {rows} n JOIN job c ON {jobs}
    WHERE (SELECT 1 FROM job t WHERE t.jobid = c.jobid AND t.datasetid = '{CLOCK}'
           AND t.itemtype = 'IN') IS NULL
      AND (SELECT count(*) FROM job i WHERE i.jobid = c.jobid AND i.itemtype = 'IN')
        = (SELECT count(*) FROM job i WHERE i.jobid = c.jobid AND i.itemtype = 'IN'
           AND (SELECT 1 FROM datastatus r WHERE r.datasetid = i.datasetid
                AND r.dataid = n.dataid AND r.locktype = 'OUT' AND r.status = '{READY}'
                LIMIT 1) IS NOT NULL)
      AND (SELECT bool_or(o.locktype = 'OUT' AND o.status NOT IN {_RERUN})
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
           AND r.locktype = 'OUT' AND r.status = '{READY}' LIMIT 1) IS NULL;"""


_OUT = "(SELECT * FROM written WHERE locktype = 'OUT')"
_NOT_READY = f"(SELECT * FROM written WHERE locktype = 'OUT' AND status IS DISTINCT FROM '{READY}')"
_READY_ROWS = f"n.status = '{READY}' AND c.itemtype = 'IN' AND c.datasetid = n.datasetid"


def on_statuses() -> str:
    """PostgreSQL's trigger function of datastatus: a statement's rows at once."""
    return f"""CREATE OR REPLACE FUNCTION dataflow_on_statuses() RETURNS trigger LANGUAGE plpgsql AS $$
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
    SELECT bool_or(status = '{READY}'), bool_or(status IN {_RERUN}),
           bool_or(status IS NULL OR status NOT IN {_listed(READY, *RERUNNABLE)})
    INTO ready, rerun, other FROM written WHERE locktype = 'OUT';
    IF ready IS NULL THEN
        RETURN NULL;  -- IN rows, or none (the other half of an INSERT ... ON CONFLICT)
    END IF;
    {_take_offer_locks(_OUT + " AS w")}
    IF ready OR other THEN
        DELETE FROM candidate d USING {_OUT} n
        WHERE (n.status IS NULL OR n.status NOT IN {_RERUN})
          AND d.jobid = n.jobid AND d.sortkey = dataflow_natkey(n.dataid)
          AND d.dataid = n.dataid;
    END IF;
    IF ready THEN
        {_offer_rows(_OUT, _READY_ROWS)}
    END IF;
    IF rerun THEN
        {_offer_rows(_OUT, f"n.status IN {_RERUN} AND c.jobid = n.jobid")}
    END IF;
    IF TG_OP = 'UPDATE' AND (rerun OR other) THEN  -- a new row was READY nowhere before
        {_withdraw(_NOT_READY)}
    END IF;
    RETURN NULL;
END $$;"""


def on_job() -> str:
    """PostgreSQL's trigger function of job: row by row."""
    return f"""CREATE OR REPLACE FUNCTION dataflow_on_job() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP <> 'DELETE' THEN
        {_refresh("NEW.jobid", False)}
    END IF;
    IF TG_OP <> 'INSERT' THEN
        {_refresh("OLD.jobid", False)}
    END IF;
    RETURN NULL;
END $$;"""


def postgres() -> str:
    """PostgreSQL's functions of the rule: the natural key, and the trigger functions of
    datastatus (per statement) and job (per row)."""
    return f"{natkey()}\n{on_statuses()}\n{on_job()}\n"


if __name__ == "__main__":
    if sys.argv[1:] not in (["sqlite"], ["postgres"]):
        sys.exit("usage: python -m dataflow.store.offers sqlite|postgres")
    print(sqlite() if sys.argv[1] == "sqlite" else postgres(), end="")
