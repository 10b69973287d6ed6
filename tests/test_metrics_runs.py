"""/metrics counts each ended run once and keeps the sums (``serve.runhistory``): after
any runs started, ended, deleted or committed late, a scrape tells what a read of every
run tells (a fresh count), while reading only the runs from the oldest live one on."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataflow.serve import metrics, runhistory

pytestmark = pytest.mark.both_stores

steps = st.lists(
    st.one_of(
        st.tuples(st.just("start"), st.sampled_from(["a", "b"]), st.booleans()),
        st.tuples(st.just("end"), st.integers(0, 30), st.sampled_from(["READY", "FAILED"])),
        st.tuples(st.just("abandon"), st.integers(0, 30)),
        st.tuples(st.just("late"), st.integers(0, 30)),  # a claim that commits after a scrape
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
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=steps)
def test_a_scrape_tells_what_a_read_of_every_run_tells(store, store_kind, steps):
    mark = "?" if store_kind == "sqlite" else "%s"
    with store.transaction():
        store.conn.execute("DELETE FROM run")
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
    for step in steps:
        with store.transaction():
            if step[0] == "start":
                runid = (max(runids + holes) if runids or holes else 0) + 1
                if step[2]:  # numbered, committed after the runs numbered later
                    holes.append(runid)
                    runid += 1
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


def test_a_run_numbered_before_a_scrape_and_committed_after_it_is_counted_without_a_recount(
    store, store_kind
):
    """PostgreSQL numbers a run before its claim commits: what one scrape finds ended is
    settled only at the next, so a claim committed in between is read as a live run, not
    found missing below the settled runs (which recounts the whole history)."""
    mark = "?" if store_kind == "sqlite" else "%s"
    kept = _history()
    with store.transaction():
        _run(store, mark, 1, "a", 1)
        store.conn.execute("UPDATE run SET status = 'READY', duration = 2")
    kept.read(store)
    assert kept.settled == 2
    with store.transaction():  # run 3 commits; run 2, numbered first, not yet
        _run(store, mark, 3, "a", 3)
        store.conn.execute("UPDATE run SET status = 'READY', duration = 2 WHERE runid = 3")
    kept.read(store)
    with store.transaction():
        _run(store, mark, 2, "a", 2)
    kept.read(store)
    assert kept.settled == 2  # run 2 is live: nothing above it settles
    with store.transaction():
        store.conn.execute("UPDATE run SET status = 'FAILED', duration = 1 WHERE runid = 2")
    assert _normal(kept.read(store)) == _normal(_history().read(store))
    assert kept.settled == 2  # not recounted from 0 (which settles at once): 4 next time
    kept.read(store)
    assert kept.settled == 4


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
