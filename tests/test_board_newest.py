"""The board reads only the dataids it shows (the newest N of each job, from an index)
and shows exactly what a read of every row would: the same columns, the same cells."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataflow.ops import board

JOBS = {"a": ("src", ["da"]), "b": ("da", ["db1", "db2"])}  # b writes two datasets
STATUSES = ("READY", "RUNNING", "FAILED", "RESUBMIT", "HOLD")

dataids = st.one_of(
    st.integers(0, 300).map(str),  # shard numbers
    st.integers(0, 30).map(lambda n: f"{n:03d}"),  # leading zeros: "007" and "7" tie
    st.dates().map(str),  # ISO dates
    st.sampled_from(["x", "a9", "a10", "b1", "2024-01-01T03", "part-2", "é"]),  # no SQL key
    st.text("0123456789ab-", min_size=1, max_size=6),
)
rows = st.lists(
    st.tuples(st.sampled_from(["a", "b", "zz"]), dataids, st.sampled_from(STATUSES), st.booleans()),
    max_size=40,
)


def _register(store, mark: str) -> None:
    if store.job_ids():
        return
    with store.transaction():
        for jobid, (source, outs) in JOBS.items():
            store.conn.execute(
                f"INSERT INTO job(jobid, itemtype, datasetid) VALUES ({mark}, 'IN', {mark})",
                (jobid, source),
            )
            for out in outs:
                store.conn.execute(
                    f"INSERT INTO job(jobid, itemtype, datasetid) VALUES ({mark}, 'OUT', {mark})",
                    (jobid, out),
                )


@pytest.mark.both_stores
@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(written=rows, ran=st.lists(st.integers(0, 39), max_size=20), last=st.integers(1, 6))
def test_the_board_shows_what_a_read_of_every_row_shows(store, store_kind, written, ran, last):
    mark = "?" if store_kind == "sqlite" else "%s"
    _register(store, mark)
    with store.transaction():
        store.conn.execute("DELETE FROM datastatus")
        store.conn.execute("DELETE FROM run")
        for attempt, n in enumerate(ran, start=1):  # runs of some chunks: their last shows
            jobid, dataid = written[n % len(written)][:2] if written else ("a", "1")
            store.conn.execute(
                "INSERT INTO run(jobid, dataid, attempt, status, started, exitcode) "
                f"VALUES ({mark}, {mark}, {mark}, 'FAILED', '2026-01-01 00:00:00+00:00', {mark})",
                (jobid, dataid, attempt, attempt),
            )
        for jobid, dataid, status, both in written:
            outs = JOBS.get(jobid, ("", ["dz"]))[1]  # zz: a writer no job registers
            for out in outs if both else outs[:1]:
                store.conn.execute(
                    "INSERT INTO datastatus(datasetid, jobid, dataid, locktype, status) "
                    f"VALUES ({mark}, {mark}, {mark}, 'OUT', {mark}) ON CONFLICT DO NOTHING",
                    (out, jobid, dataid, status),
                )
    every = store.board()  # the full read: every row of every registered job
    known = sorted({row["dataid"] for row in every}, key=board.column_order)
    grid = board.collect(store, None, last)
    assert grid.dataids == known[-last:]
    if grid.total_dataids is None:  # not counted: more than were read
        assert len(known) > last
    else:
        assert grid.total_dataids == len(known)
    shown = set(known[-last:])
    expected = {(r["jobid"], r["dataid"]): r for r in every if r["dataid"] in shown}
    assert grid.cells == expected
    one = board.collect(store, "b", last)  # --job: that job's own newest dataids
    mine = sorted({r["dataid"] for r in every if r["jobid"] == "b"}, key=board.column_order)
    assert one.dataids == mine[-last:]
