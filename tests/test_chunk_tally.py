"""`utility status` and /metrics count a job's chunks by status from a summary the store
keeps (SQLite's triggers, PostgreSQL's pending chunks folded by a reader), and tell what
a count of every row tells, whatever wrote the rows: any statement a user types."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

JOBS = {"a": ("src", ["da"]), "b": ("da", ["db1", "db2"])}  # b writes two datasets
STATUSES = ("READY", "RUNNING", "FAILED", "RESUBMIT", "HOLD")
EVERY_ROW = (  # the count before the summary (migration 13 / 8): every OUT row read
    "SELECT jobid, status, COUNT(DISTINCT dataid) FROM datastatus "
    "WHERE locktype = 'OUT' AND jobid IN (SELECT jobid FROM job) GROUP BY jobid, status"
)

jobs = st.sampled_from(["a", "b", "zz"])  # zz: a writer no job registers
datasets = st.sampled_from(["da", "db1", "db2", "dz"])
dataids = st.sampled_from(["1", "2", "3", "2026-01-01"])
statuses = st.sampled_from(STATUSES)
# one statement each, as a user types it in the sqlite3 shell or psql
writes = st.one_of(
    st.tuples(st.just("insert"), datasets, jobs, dataids, st.sampled_from(["OUT", "IN"]), statuses),
    st.tuples(
        st.just("upsert"), st.lists(st.tuples(datasets, dataids), max_size=4), jobs, statuses
    ),
    st.tuples(st.just("set chunk"), jobs, dataids, statuses),
    st.tuples(st.just("set job"), jobs, statuses),
    st.tuples(st.just("set one"), datasets, jobs, dataids, statuses),
    st.tuples(st.just("flip"), jobs, dataids),
    st.tuples(st.just("move"), jobs, dataids, dataids),
    st.tuples(st.just("delete chunk"), jobs, dataids),
    st.tuples(st.just("delete job"), jobs),
)


def _register(store, mark: str) -> None:
    if store.job_ids():
        return
    with store.transaction():
        for jobid, (source, outs) in JOBS.items():
            for itemtype, datasetid in [("IN", source)] + [("OUT", out) for out in outs]:
                store.conn.execute(
                    f"INSERT INTO job(jobid, itemtype, datasetid) VALUES ({mark}, {mark}, {mark})",
                    (jobid, itemtype, datasetid),
                )


def _write(store, mark: str, write: tuple) -> None:
    kind, *args = write
    m = mark
    if kind == "insert":
        sql = (
            "INSERT INTO datastatus(datasetid, jobid, dataid, locktype, status) "
            f"VALUES ({m}, {m}, {m}, {m}, {m}) ON CONFLICT DO NOTHING"
        )
        store.conn.execute(sql, tuple(args))
    elif kind == "upsert":  # some rows new, some there: both halves in one statement
        chunks, jobid, status = args
        if not chunks:
            return
        values = ", ".join([f"({m}, {m}, {m}, 'OUT', {m})"] * len(set(chunks)))
        params = [v for ds, d in sorted(set(chunks)) for v in (ds, jobid, d, status)]
        sql = (
            f"INSERT INTO datastatus(datasetid, jobid, dataid, locktype, status) VALUES {values} "
            "ON CONFLICT (datasetid, jobid, dataid) DO UPDATE SET status = excluded.status, "
            "locktype = excluded.locktype"
        )
        store.conn.execute(sql, params)
    elif kind == "set chunk":
        jobid, dataid, status = args
        sql = f"UPDATE datastatus SET status = {m} WHERE jobid = {m} AND dataid = {m}"
        store.conn.execute(sql, (status, jobid, dataid))
    elif kind == "set job":
        jobid, status = args
        store.conn.execute(f"UPDATE datastatus SET status = {m} WHERE jobid = {m}", (status, jobid))
    elif kind == "set one":
        datasetid, jobid, dataid, status = args
        sql = (
            f"UPDATE datastatus SET status = {m} "
            f"WHERE datasetid = {m} AND jobid = {m} AND dataid = {m}"
        )
        store.conn.execute(sql, (status, datasetid, jobid, dataid))
    elif kind == "flip":  # OUT <-> IN
        sql = (
            "UPDATE datastatus SET locktype = CASE WHEN locktype = 'OUT' THEN 'IN' ELSE 'OUT' END "
            f"WHERE jobid = {m} AND dataid = {m}"
        )
        store.conn.execute(sql, tuple(args))
    elif kind == "move":  # a chunk's rows to another dataid, where no row is in the way
        jobid, dataid, to = args
        sql = (
            f"UPDATE datastatus SET dataid = {m} WHERE jobid = {m} AND dataid = {m} "
            f"AND NOT EXISTS (SELECT 1 FROM datastatus o WHERE o.jobid = {m} AND o.dataid = {m})"
        )
        store.conn.execute(sql, (to, jobid, dataid, jobid, to))
    elif kind == "delete chunk":
        store.conn.execute(
            f"DELETE FROM datastatus WHERE jobid = {m} AND dataid = {m}", tuple(args)
        )
    else:
        store.conn.execute(f"DELETE FROM datastatus WHERE jobid = {m}", tuple(args))


def _every_row(store) -> dict[tuple[str, str], int]:
    return {(job, status): n for job, status, n in store.conn.execute(EVERY_ROW)}


def _summarised(store) -> dict[tuple[str, str], int]:
    return {(r["jobid"], r["status"]): r["chunks"] for r in store.status_counts()}


@pytest.mark.both_stores
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(batches=st.lists(st.lists(writes, max_size=6), min_size=1, max_size=4))
def test_the_summary_tells_what_a_count_of_every_row_tells(store, store_kind, batches):
    mark = "?" if store_kind == "sqlite" else "%s"
    _register(store, mark)
    with store.transaction():
        store.conn.execute("DELETE FROM datastatus")
    for batch in batches:
        with store.transaction():
            for write in batch:
                _write(store, mark, write)
        if store_kind == "postgres":  # read inside a transaction: nothing is folded
            with store.transaction():
                assert _summarised(store) == _every_row(store)
        assert _summarised(store) == _every_row(store)  # folded on PostgreSQL


@pytest.mark.both_stores
def test_a_store_of_older_migrations_gets_its_summary_from_its_rows(store, store_kind):
    """The migration counts the rows a store holds when it is upgraded."""
    mark = "?" if store_kind == "sqlite" else "%s"
    _register(store, mark)
    with store.transaction():
        for n, status in enumerate(["READY", "READY", "FAILED"]):
            for out in ("db1", "db2"):
                store.conn.execute(
                    "INSERT INTO datastatus(datasetid, jobid, dataid, locktype, status) "
                    f"VALUES ({mark}, 'b', {mark}, 'OUT', {mark})",
                    (out, str(n), status),
                )
        store.conn.execute("DELETE FROM chunk_tally")
        if store_kind == "postgres":
            store.conn.execute("DELETE FROM chunk_seen")
            store.conn.execute("DELETE FROM chunk_pending")
    assert _summarised(store) == {}  # the summary is all status reads now
    migration = _summary_migration(store_kind)
    with store.transaction():
        for statement in _statements(store_kind, migration):
            store.conn.execute(statement)
    assert _summarised(store) == _every_row(store) == {("b", "READY"): 2, ("b", "FAILED"): 1}


def _summary_migration(store_kind: str) -> str:
    """The migration that made the summary (SQLite 13, PostgreSQL 8)."""
    if store_kind == "sqlite":
        from dataflow.store.sqlite import schema
    else:
        from dataflow.store.postgres import schema
    (found,) = [m for m in schema.migrations() if "CREATE TABLE IF NOT EXISTS chunk_tally" in m]
    return found


def _statements(store_kind: str, script: str) -> list[str]:
    """The statements of the summary's migration that fill it (its DELETEs and INSERTs)."""
    if store_kind == "sqlite":
        from dataflow.store.sqlite.connection import statements

        found = statements(script)
    else:
        found = [s for s in script.split(";\n") if s.strip()]
    return [s for s in found if s.lstrip("\n").startswith(("DELETE", "INSERT"))]


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
def test_a_reader_that_may_not_write_reads_the_pending_chunks_unfolded(store, store_kind):
    """On PostgreSQL a role that may only read (or a standby) cannot fold: its count is
    the same, the chunks written since the last fold added as they are. (SQLite's
    summary is kept by its writers: nothing to fold.)"""
    _register(store, "%s")
    store.status_counts()  # folded
    with store.transaction():
        for dataid in ("1", "2"):
            _write(store, "%s", ("insert", "da", "a", dataid, "OUT", "FAILED"))
    store.conn.execute("SET default_transaction_read_only = on")
    assert _summarised(store) == _every_row(store) == {("a", "FAILED"): 2}
    assert store.conn.execute("SELECT count(*) FROM chunk_pending").fetchone()[0] == 2


@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)
@pytest.mark.parametrize("chunks", ["many", b"\x00", 1.5])
def test_a_summary_row_a_writer_spoilt_fails_no_reader(store, store_kind, chunks, tmp_path):
    """The store is data: SQLite keeps what a writer puts in chunk_tally.chunks, text
    included. utility status and /metrics read it as a number, and answer."""
    from dataflow.ops import status
    from dataflow.serve import metrics

    _register(store, "?")
    with store.transaction():
        _write(store, "?", ("insert", "da", "a", "1", "OUT", "READY"))
        store.conn.execute("UPDATE chunk_tally SET chunks = ? WHERE jobid = 'a'", (chunks,))
    assert all(isinstance(row["chunks"], int) for row in store.status_counts())
    assert isinstance(status.job_status(store, "a")[0]["ready"], int)
    metrics.read(store, metrics.history(str(tmp_path)))


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
def test_a_summary_count_a_writer_set_at_bigints_end_fails_no_reader(store, store_kind):
    """The store is data: a count at bigint's end, and a chunk written after it, leave
    utility status, /api/status and /metrics answering (they failed: bigint out of range),
    and the pending chunks folded."""
    _register(store, "%s")
    chunks = 2**63 - 1
    with store.transaction():
        store.conn.execute(
            "INSERT INTO chunk_tally(jobid, status, chunks) VALUES ('a', 'READY', %s)", (chunks,)
        )
        for dataid in ("1", "2"):
            _write(store, "%s", ("insert", "da", "a", dataid, "OUT", "READY"))
    store.conn.execute("SET default_transaction_read_only = on")
    assert {r["jobid"]: r["chunks"] for r in store.status_counts()} == {"a": chunks}
    store.conn.execute("SET default_transaction_read_only = off")
    assert {r["jobid"]: r["chunks"] for r in store.status_counts()} == {"a": chunks}
    assert store.conn.execute("SELECT count(*) FROM chunk_pending").fetchone()[0] == 0


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
def test_a_finish_at_every_fold_every_runs_folds_the_pending_chunks(cli, tmp_path, address):
    """chunk_pending grows with each write of datastatus until a reader folds it; a fleet
    that never asks for status would grow it without end. The finish of each run numbered
    a multiple of FOLD_EVERY folds it too, once that finish is committed, in a transaction
    of its own: nothing is left pending, and the counts stay exact."""
    import json

    import psycopg

    from dataflow.store.postgres.store import FOLD_EVERY
    from support import ready, register, rows, script

    register(cli, "work", ["src"], ["dst"])
    ready(cli, "src", "1", "2", "3")
    script(tmp_path, "work.sh", "exit 0")
    with psycopg.connect(address, autocommit=True) as conn:
        conn.execute(f"ALTER TABLE run ALTER COLUMN runid RESTART WITH {FOLD_EVERY - 1}")

    def pending() -> int:
        return rows(tmp_path, "select count(*) from chunk_pending")[0][0]

    assert cli.run_job("./work.sh").exit_code == 0  # run FOLD_EVERY - 1: nothing folded
    before = pending()
    assert before > 1, before
    assert cli.run_job("./work.sh").exit_code == 0  # run FOLD_EVERY
    assert rows(tmp_path, "select max(runid) from run") == [(FOLD_EVERY,)]
    assert pending() == 0  # chunk 2's READY too: folded after the finish's COMMIT
    status = {row["jobid"]: row for row in json.loads(cli.ok("status", "--json").out)}
    assert status["work"]["ready"] == 2, status


@pytest.mark.long  # 200,000 chunks written, and folded once to time it
@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
def test_a_fold_that_fails_never_fails_the_finish_that_asked_for_it(cli, tmp_path, address):
    """A producer wrote 200,000 chunks of another dataset since the last fold (any client
    may write the store), and the database has a statement_timeout that every statement
    of a claim and of a finish keeps well within, but not a fold of them all. Run
    FOLD_EVERY's finish asks for a fold: the server cancels it, and the run is READY all
    the same (the fold is apart from the finish; its pending chunks wait for the next)."""
    import time

    import psycopg

    from dataflow.store.postgres.store import FOLD_EVERY, QUERIES
    from support import ready, register, rows, script

    register(cli, "work", ["src"], ["dst"])
    ready(cli, "src", "1", "2")
    script(tmp_path, "work.sh", "exit 0")
    with psycopg.connect(address, autocommit=True) as conn:
        conn.execute(f"ALTER TABLE run ALTER COLUMN runid RESTART WITH {FOLD_EVERY - 1}")
        conn.execute(
            "INSERT INTO datastatus(datasetid, jobid, dataid, locktype, status, modified) "
            "SELECT 'other', 'producer', g::text, 'OUT', 'READY', now() "
            "FROM generate_series(1, 200000) g"
        )
        with conn.transaction(force_rollback=True):  # how long a fold of them takes
            started = time.monotonic()
            conn.execute(QUERIES.fold_chunk_tally)
            fold_ms = int((time.monotonic() - started) * 1000)
        timeout_ms = max(300, fold_ms // 3)
        conn.execute(f"ALTER DATABASE {conn.info.dbname} SET statement_timeout = {timeout_ms}")
    first = cli.runjob("./work.sh")  # run FOLD_EVERY - 1: nothing folded
    assert first.code == 0, (fold_ms, timeout_ms, first)
    done = cli.runjob("./work.sh")  # run FOLD_EVERY: its finish asks for a fold
    found = rows(tmp_path, "select runid, status from run order by runid")
    assert found == [(FOLD_EVERY - 1, "READY"), (FOLD_EVERY, "READY")], (fold_ms, timeout_ms, done)
    assert done.code == 0, done
    assert rows(tmp_path, "select count(*) from chunk_pending")[0][0] > 200_000  # not folded
