"""/metrics counts each ended run once and keeps the sums (``serve.runhistory``): after
any runs started, ended, deleted or committed late, a scrape tells what a read of every
run tells (a fresh count), while reading only the runs from the oldest live one on."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataflow.serve import metrics, runhistory
from dataflow.store import open_store
from dataflow.store.queries.metrics import LOWEST
from dataflow.store.sqlite.connection import connect

pytestmark = pytest.mark.both_stores

steps = st.lists(
    st.one_of(
        st.tuples(st.just("start"), st.sampled_from(["a", "b"]), st.booleans()),
        st.tuples(st.just("end"), st.integers(0, 30), st.sampled_from(["READY", "FAILED"])),
        st.tuples(st.just("abandon"), st.integers(0, 30)),
        st.tuples(st.just("late"), st.integers(0, 30)),  # a claim committed after later ones
        st.tuples(st.just("delete"), st.integers(0, 30)),  # utility deleterun, purge
        st.tuples(st.just("scrape")),
    ),
    max_size=30,
)


def _history() -> runhistory.RunHistory:
    return runhistory.RunHistory(
        abandoned=metrics.ABANDONED,
        durations=metrics.DURATION_BOUNDS,
        latencies=metrics.LATENCY_BOUNDS,
    )


def _normal(rows) -> tuple:
    counts, durations, latencies = rows
    return (
        sorted((r["jobid"], r["started"], r["failed"], r["abandoned"]) for r in counts),
        *(
            sorted((r["jobid"], r["le"], r["runs"], round(r["seconds"], 6)) for r in found)
            for found in (durations, latencies)
        ),
    )


def _run(store, mark, runid, jobid, n):
    store.conn.execute(
        "INSERT INTO run(runid, jobid, dataid, attempt, status, started) "
        f"VALUES ({mark}, {mark}, {mark}, 1, 'RUNNING', '2026-01-01 00:00:00.000000+00:00')",
        (runid, jobid, str(n)),
    )


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=steps)
def test_a_scrape_tells_what_a_read_of_every_run_tells(store, store_kind, steps):
    mark = "?" if store_kind == "sqlite" else "%s"
    with store.transaction():  # a fresh store (hypothesis runs each example on this one)
        store.conn.execute("DELETE FROM run")
        store.conn.execute(f"UPDATE run_mark SET below = {LOWEST}, changes = 0")
        store.conn.execute("DELETE FROM datastatus")
        store.conn.execute("DELETE FROM job")
        for jobid in ("a", "b"):
            store.conn.execute(
                f"INSERT INTO job(jobid, itemtype, datasetid) VALUES ({mark}, 'IN', 'src')",
                (jobid,),
            )
        store.conn.execute(
            "INSERT INTO datastatus(datasetid, jobid, dataid, locktype, status, modified) "
            "SELECT 'src', 'up', dataid, 'OUT', 'READY', '2025-12-31 23:59:00' FROM "
            "(SELECT '0' AS dataid UNION SELECT '1' UNION SELECT '2' UNION SELECT '3') d"
        )
    kept = _history()  # a server's: kept between scrapes
    runids: list[int] = []  # started, in order
    holes: list[int] = []  # runids numbered, not committed yet
    numbered = 0  # PostgreSQL's sequence: a number is never given twice
    for step in steps:
        with store.transaction():
            if step[0] == "start":  # SQLite: one above the highest there is
                runid = (max(runids + holes) if runids or holes else 0) + 1
                if store_kind == "postgres":
                    runid = numbered = max(runid, numbered + 1)
                if step[2]:  # numbered, committed after the runs numbered later
                    holes.append(runid)
                    runid = numbered = runid + 1
                _run(store, mark, runid, step[1], runid % 4)
                runids.append(runid)
            elif step[0] == "late" and holes:
                runid = holes.pop(step[1] % len(holes))
                _run(store, mark, runid, "a", runid % 4)
                runids.append(runid)
            elif step[0] in ("end", "abandon") and runids:
                runid = runids[step[1] % len(runids)]
                status = "FAILED" if step[0] == "abandon" else step[2]
                reason = f"{metrics.ABANDONED} x" if step[0] == "abandon" else None
                store.conn.execute(
                    f"UPDATE run SET status = {mark}, reason = {mark}, duration = {mark}, "
                    f"ended = started WHERE runid = {mark} AND status = 'RUNNING'",
                    (status, reason, float(runid % 7) * 10, runid),
                )
            elif step[0] == "delete" and runids:
                runid = runids.pop(step[1] % len(runids))
                store.conn.execute(f"DELETE FROM run WHERE runid = {mark}", (runid,))
        if step[0] == "scrape":
            # a scrape settles runs once no claim is under way: those numbered before it
            # commit first (as the store's lock, or SQLite's one writer, waits for them)
            with store.transaction():
                for runid in holes:
                    _run(store, mark, runid, "b", runid % 4)
            runids.extend(holes)
            holes.clear()
            assert _normal(kept.read(store)) == _normal(_history().read(store))
    assert _normal(kept.read(store)) == _normal(_history().read(store))


def test_a_scrape_reads_only_the_runs_from_the_oldest_live_one_on(store, store_kind):
    """Once counted, an ended run is not read again: a change by hand below the oldest
    live run is not seen (the documented limit), which shows it is not read."""
    mark = "?" if store_kind == "sqlite" else "%s"
    with store.transaction():
        for runid in (1, 2, 3):
            _run(store, mark, runid, "a", runid)
        store.conn.execute("UPDATE run SET status = 'READY', duration = 2 WHERE runid < 3")
    kept = _history()
    kept.read(store)
    kept.read(store)  # the second scrape settles what the first found ended
    assert kept.settled == 3
    with store.transaction():
        store.conn.execute("UPDATE run SET status = 'FAILED' WHERE runid = 1")
        store.conn.execute("UPDATE run SET status = 'FAILED', duration = 1 WHERE runid = 3")
    counts = {r["jobid"]: r["failed"] for r in kept.read(store)[0]}
    assert counts == {"a": 1}  # run 3 (live when counted) seen failed, run 1 not read
    assert {r["jobid"]: r["failed"] for r in _history().read(store)[0]} == {"a": 2}


def test_a_claim_under_way_during_a_scrape_is_counted_once_it_commits(store, store_kind, address):
    """A claim numbers its run before it commits (PostgreSQL: run 2, while run 3, numbered
    later, commits and ends first), or holds the store's one writer (SQLite), while a
    scrape settles runs: the scrape does not wait for it, settles nothing past it and
    answers; once the claim commits, the next scrape counts its run without counting the
    history again, and settles past it once it has ended."""
    mark = "?" if store_kind == "sqlite" else "%s"
    kept = _history()
    with store.transaction():
        _run(store, mark, 1, "a", 1)
        store.conn.execute("UPDATE run SET status = 'READY', duration = 2")
    kept.read(store)
    assert kept.settled == 2
    claiming = _claim_under_way(store_kind, address, 2)
    try:
        if store_kind == "postgres":
            with store.transaction():
                _run(store, mark, 3, "a", 3)
                store.conn.execute("UPDATE run SET status = 'READY', duration = 2 WHERE runid = 3")
        for _ in range(2):
            assert _normal(kept.read(store)) == _normal(_history().read(store))
            assert kept.settled == 2
    finally:
        claiming()
    counts = kept.read(store)[0]
    started = 3 if store_kind == "postgres" else 2
    assert {r["jobid"]: r["started"] for r in counts} == {"a": started}
    assert kept.settled == 2  # run 2 is live; the history was not counted again from 0
    with store.transaction():
        store.conn.execute("UPDATE run SET status = 'FAILED', duration = 1 WHERE runid = 2")
    assert _normal(kept.read(store)) == _normal(_history().read(store))
    assert kept.settled == started + 1


def _claim_under_way(store_kind: str, address, runid: int):
    """A claim's transaction, on a connection of its own, that has written run ``runid``
    and not committed yet; a function that commits it."""
    if store_kind == "sqlite":
        import sqlite3

        conn = sqlite3.connect(address, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        mark = "?"
    else:
        import psycopg

        conn = psycopg.connect(address)
        mark = "%s"
    conn.execute(
        "INSERT INTO run(runid, jobid, dataid, attempt, status, started) "
        f"VALUES ({mark}, 'a', '2', 1, 'RUNNING', '2026-01-01 00:00:00.000000+00:00')",
        (runid,),
    )

    def commit() -> None:
        conn.execute("COMMIT") if store_kind == "sqlite" else conn.commit()
        conn.close()

    return commit


def test_a_deletion_below_the_settled_runs_counts_them_all_again(store, store_kind):
    """A run deleted below the settled runs (``utility purge``, a ``DELETE`` by hand) is
    counted by the store's triggers: the next scrape counts every run again, and tells
    what a fresh read tells. A mark deleted by hand too: the scrape checks the history's
    count instead."""
    mark = "?" if store_kind == "sqlite" else "%s"
    kept = _history()
    with store.transaction():
        for runid in (1, 2, 3):
            _run(store, mark, runid, "a", runid)
        store.conn.execute("UPDATE run SET status = 'FAILED', duration = 2")
    kept.read(store)
    assert kept.settled == 4
    with store.transaction():
        store.conn.execute("DELETE FROM run WHERE runid = 2")
    assert {r["jobid"]: r["failed"] for r in kept.read(store)[0]} == {"a": 2}
    with store.transaction():
        store.conn.execute("DELETE FROM run_mark")
        store.conn.execute("DELETE FROM run WHERE runid = 3")
    assert {r["jobid"]: r["failed"] for r in kept.read(store)[0]} == {"a": 1}
    assert _normal(kept.read(store)) == _normal(_history().read(store))


def test_a_server_that_may_not_write_the_mark_still_tells_every_run(store, store_kind, address):
    """Settling runs writes the store's mark; a server that may not write it (an SQLite
    file it may only read, a role that may only read) settles what the scrape before
    found ended and checks the history's count at each scrape: it tells what a fresh
    read tells, run after run ended, added and deleted."""
    mark = "?" if store_kind == "sqlite" else "%s"
    reader = open_store(address, readonly=True)
    if store_kind == "postgres":
        reader.conn.execute("SET default_transaction_read_only = on")
    else:  # (the test may write every file: the reader is given a read-only connection)
        reader.conn.close()
        reader.conn = connect(reader.path, "ro")
    try:
        assert reader.settle_runs(LOWEST) is None
        kept = _history()
        changes = [
            "UPDATE run SET status = 'READY', duration = 3 WHERE runid = 1",
            "DELETE FROM run WHERE runid = 2",
            "UPDATE run SET status = 'FAILED', duration = 1 WHERE runid = 3",
        ]
        with store.transaction():
            for runid in (1, 2, 3):
                _run(store, mark, runid, "a", runid)
        for change in ["", *changes]:
            if change:
                with store.transaction():
                    store.conn.execute(change)
            assert _normal(kept.read(reader)) == _normal(_history().read(reader))
        kept.read(reader)  # what the scrape before found ended is settled
        assert kept.settled == 4  # every run ended: settled, the mark never written
        assert store.run_mark() == (LOWEST, 0)
        with store.transaction():  # below the runs it settled, not below the mark
            store.conn.execute("DELETE FROM run WHERE runid = 1")
        _history().read(store)  # a server that may write raises the mark past them
        assert store.run_mark() == (4, 0)
        assert _normal(kept.read(reader)) == _normal(_history().read(reader))
    finally:
        reader.close()


@pytest.mark.parametrize("odd", [-1, -(2**63), 2**62, 2**63 - 2])
def test_a_run_numbered_by_hand_anywhere_is_counted(store, store_kind, odd):
    """The store is data: a run written by hand below 0 or far above the others (live or
    ended) is counted like any other, scrape after scrape, and no scrape fails."""
    mark = "?" if store_kind == "sqlite" else "%s"
    kept = _history()
    with store.transaction():
        for runid in (1, 2, odd):
            _run(store, mark, runid, "a", runid)
        store.conn.execute("UPDATE run SET status = 'READY', duration = 2 WHERE runid = 1")
    for _ in range(3):
        assert {r["jobid"]: r["started"] for r in kept.read(store)[0]} == {"a": 3}
    with store.transaction():
        store.conn.execute(
            "UPDATE run SET status = 'FAILED', duration = 1 WHERE status = 'RUNNING'"
        )
        _run(store, mark, 3, "b", 3)
    for _ in range(3):
        assert _normal(kept.read(store)) == _normal(_history().read(store))
        assert {r["jobid"]: r["started"] for r in kept.read(store)[0]} == {"a": 3, "b": 1}


def test_a_run_numbered_by_hand_at_the_last_runid_fails_no_scrape(store, store_kind):
    """A run at the highest runid a store holds is past every range a scrape reads: the
    others are counted, and the scrape answers."""
    mark = "?" if store_kind == "sqlite" else "%s"
    with store.transaction():
        for runid in (1, 2**63 - 1):
            _run(store, mark, runid, "a", runid)
    kept = _history()
    for _ in range(2):
        assert {r["jobid"]: r["started"] for r in kept.read(store)[0]} == {"a": 1}


def test_a_run_deleted_as_another_commits_late_is_not_taken_for_it(store, store_kind):
    """A run committed after the scrape that settled the runs above it, and a settled run
    deleted meanwhile: the history holds as many runs as were counted, but not those;
    the next scrape counts them all again (hypothesis found it)."""
    mark = "?" if store_kind == "sqlite" else "%s"
    kept = _history()
    with store.transaction():  # run 1 numbered, not committed yet; run 2 ends FAILED
        _run(store, mark, 2, "a", 2)
        store.conn.execute("UPDATE run SET status = 'FAILED', duration = 1 WHERE runid = 2")
    kept.read(store)
    with store.transaction():
        _run(store, mark, 1, "a", 1)
        store.conn.execute("DELETE FROM run WHERE runid = 2")
    assert _normal(kept.read(store)) == _normal(_history().read(store))
    assert {r["jobid"]: r["failed"] for r in kept.read(store)[0]} == {"a": 0}


@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)  # (a sequence never does)
def test_a_runid_sqlite_numbers_again_after_a_deletion_is_counted_when_it_ends(store, store_kind):
    """SQLite numbers a claim's run one above the newest (INTEGER PRIMARY KEY, no
    AUTOINCREMENT): the newest run deleted (``utility deleterun``), the next claim takes
    its runid, below the settled runs. The scrape that counts every run again (the
    deletion) must not settle that live run: once it ends, it is counted as ended."""
    kept = _history()
    with store.transaction():
        for runid in (1, 2, 3):
            _run(store, "?", runid, "a", runid)
        store.conn.execute("UPDATE run SET status = 'READY', duration = 2")
    kept.read(store)
    assert kept.settled == 4
    assert _newest_deleted_then_claimed(store, 3) == 3
    assert _normal(kept.read(store)) == _normal(_history().read(store))
    with store.transaction():
        store.conn.execute("UPDATE run SET status = 'FAILED', duration = 1 WHERE runid = 3")
    assert _normal(kept.read(store)) == _normal(_history().read(store))
    assert {r["jobid"]: r["failed"] for r in kept.read(store)[0]} == {"a": 1}


def test_a_deletion_while_the_runs_could_not_be_settled_is_counted(store, store_kind, address):
    """A scrape that could not settle the runs (a writer held run longer than it waits)
    settles what it found ended without raising the store's mark; a run deleted below
    those, above the mark, fires no count. The next scrape, which raises the mark, must
    still find it gone and tell what a fresh read tells."""
    mark = "?" if store_kind == "sqlite" else "%s"
    with store.transaction():
        for runid in (1, 2, 3):
            _run(store, mark, runid, "a", runid)
        store.conn.execute("UPDATE run SET status = 'FAILED', duration = 2")
    writer = open_store(address)
    try:
        kept = _history()
        with writer.transaction():  # a writer of run under way (utility purge, a claim)
            if store_kind == "postgres":
                writer.conn.execute("LOCK TABLE run IN ROW EXCLUSIVE MODE")
            assert {r["jobid"]: r["failed"] for r in kept.read(store)[0]} == {"a": 3}
        assert kept.settled == 4 and store.run_mark() == (LOWEST, 0)
    finally:
        writer.close()
    with store.transaction():
        store.conn.execute(f"DELETE FROM run WHERE runid = {mark}", (2,))
    assert _normal(kept.read(store)) == _normal(_history().read(store))
    assert {r["jobid"]: r["failed"] for r in kept.read(store)[0]} == {"a": 2}


@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)  # (a sequence never does)
def test_a_run_sqlite_numbers_below_the_settled_runs_is_counted(store, store_kind):
    """Live runs deleted above the mark (claims given back, a ``DELETE`` of their RUNNING
    run; ``utility deleterun``: no count), SQLite numbers the next claim's run below the
    runs a server settled: it is counted, not passed over."""
    kept = _history()
    with store.transaction():  # runs 1, 2 ended; 3, 4, 5 live
        for runid in (1, 2, 3, 4, 5):
            _run(store, "?", runid, "a", runid)
        store.conn.execute("UPDATE run SET status = 'READY', duration = 2 WHERE runid < 3")
    kept.read(store)
    with store.transaction():  # run 4 deleted above the mark, run 3 ends: 5 the oldest live
        store.conn.execute("DELETE FROM run WHERE runid = 4")
        store.conn.execute("UPDATE run SET status = 'READY', duration = 2 WHERE runid = 3")
    kept.read(store)
    assert kept.settled == 5
    assert _newest_deleted_then_claimed(store, 5) == 4
    assert _normal(kept.read(store)) == _normal(_history().read(store))
    assert {r["jobid"]: r["started"] for r in kept.read(store)[0]} == {"a": 4}


def _newest_deleted_then_claimed(store, newest: int) -> int:
    """Run ``newest`` deleted, then a claim's insert, numbered by SQLite; its runid."""
    with store.transaction():
        store.conn.execute("DELETE FROM run WHERE runid = ?", (newest,))
        return store.conn.execute(
            "INSERT INTO run(jobid, dataid, attempt, status, started) "
            "VALUES ('a', '9', 1, 'RUNNING', '2026-01-01 00:00:00.000000+00:00')"
        ).lastrowid
