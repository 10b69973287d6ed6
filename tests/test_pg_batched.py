"""PostgreSQL reads and writes the chunks of a claim in one statement for them all (its
reads, its candidates dropped, its rows marked RUNNING, its history rows), and a finish's
rows in one statement. Each must do exactly what the per-chunk form every store has
(``Store``'s own methods) does, whatever the chunks hold: checked on random stores on a
real server, both forms run in the same transaction state (each rolled back)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataflow.store import open_store
from dataflow.store.base import Store

DATAIDS = ["1", "2", "10", "a\nb", "x" * 300]
# a NULL status is refused by both stores (migration 4 here, 9 on SQLite): not a state
STATUSES = ["READY", "RUNNING", "FAILED", "RESUBMIT", "weird"]

chunk = st.fixed_dictionaries(
    {
        "out": st.sampled_from([*STATUSES, "absent"]),  # the job's OUT row (dst)
        "in": st.sampled_from(["absent", "RUNNING", "READY"]),  # its IN row (src)
        "src": st.sampled_from(["absent", "READY", "FAILED"]),  # src's producer's row
        "other": st.sampled_from(["absent", "READY"]),  # a second input's producer
        "runs": st.lists(  # its history: status, lease (None: no heartbeat), rerun
            st.tuples(
                st.sampled_from(["RUNNING", "READY", "FAILED"]),
                st.sampled_from([None, 0.0, 3600.0]),
                st.sampled_from([None, "asked"]),
            ),
            max_size=3,
        ),
    }
)
stores = st.dictionaries(st.sampled_from(DATAIDS), chunk, max_size=len(DATAIDS))
looked_at = st.lists(st.sampled_from([*DATAIDS, "never"]), unique=True, max_size=6)
inputs = st.sampled_from([[], ["src"], ["src", "other"]])
slow_examples = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


class _Undone(Exception):
    """Rolls back what one form wrote."""


def _fill(store, chunks: dict) -> None:
    store.conn.execute("DELETE FROM datastatus")
    store.conn.execute("DELETE FROM run")
    store.conn.execute("DELETE FROM candidate")
    for dataid, facts in chunks.items():
        for datasetid, jobid, locktype, status in (
            ("dst", "work", "OUT", facts["out"]),
            ("src", "work", "IN", facts["in"]),
            ("src", "fakejob", "OUT", facts["src"]),
            ("other", "otherjob", "OUT", facts["other"]),
        ):
            if status != "absent":
                store.conn.execute(
                    "INSERT INTO datastatus(datasetid, jobid, dataid, locktype, status)"
                    " VALUES (%s, %s, %s, %s, %s)",
                    (datasetid, jobid, dataid, locktype, status),
                )
        for attempt, (status, lease, rerun) in enumerate(facts["runs"], 1):
            store.conn.execute(
                "INSERT INTO run(jobid, dataid, attempt, status, started, seen, lease, rerun)"
                " VALUES ('work', %s, %s, %s, '2026-11-28 00:00:00', now(), %s, %s)",
                (dataid, attempt, status, lease, rerun),
            )


@pytest.fixture
def pg(pg_store):
    store = open_store(pg_store)
    with store.transaction():
        store.conn.execute("INSERT INTO dataset(datasetid) VALUES ('src'), ('dst'), ('other')")
        store.conn.execute(
            "INSERT INTO job(jobid, itemtype, datasetid) VALUES ('work', 'IN', 'src'),"
            " ('work', 'OUT', 'dst'), ('down', 'IN', 'dst'), ('down', 'OUT', 'other')"
        )
    yield store
    store.close()


def _facts(found) -> list:
    return [(sorted(rows), last, ready) for rows, last, ready in found]


@slow_examples
@given(chunks=stores, looked=looked_at, wanted=inputs)
def test_the_facts_of_many_chunks_in_one_statement_are_each_chunks_own(pg, chunks, looked, wanted):
    with pg.transaction():
        _fill(pg, chunks)
    with pg.transaction():  # one transaction: the same now() for the leases
        batched = pg.chunk_facts("work", wanted, looked)
        each = Store.chunk_facts(pg, "work", wanted, looked)
    assert _facts(batched) == _facts(each)
    assert [last["dataid"] if last else None for _, last, _ in batched] == [
        d if chunks.get(d, {}).get("runs") else None for d in looked
    ]


def _after(pg, form, claimed: list[str], outputs: list[str]) -> tuple:
    """What ``form`` (a record_claims) leaves in the store, and the runids it returned
    (as the order of the runs they name), the whole rolled back."""
    runs = [
        {"jobid": "work", "dataid": d, "attempt": 9, "retry": 0, "token": f"t{d}"} for d in claimed
    ]
    taken = [
        (pg.conn.execute("SELECT dataflow_natkey(%s)", (d,)).fetchone()[0], d) for d in claimed
    ]
    try:
        with pg.transaction(pipeline=True):
            for key, dataid in taken:
                pg.conn.execute(
                    "INSERT INTO candidate VALUES ('work', %s, %s) ON CONFLICT DO NOTHING",
                    (key, dataid),
                )
            runids = form(pg, "work", taken, outputs, ["src"], runs)
            named = [
                pg.conn.execute("SELECT dataid FROM run WHERE runid = %s", (r,)).fetchone()[0]
                for r in runids
            ]
            state = (
                named,
                sorted(pg.conn.execute("SELECT jobid, sortkey, dataid FROM candidate").fetchall()),
                sorted(
                    pg.conn.execute(
                        "SELECT datasetid, jobid, dataid, locktype, status FROM datastatus"
                    ).fetchall(),
                    key=repr,
                ),
                sorted(
                    pg.conn.execute(
                        "SELECT jobid, dataid, attempt, status, token, lease IS NOT NULL FROM run"
                    ).fetchall(),
                    key=repr,
                ),
            )
            raise _Undone
    except _Undone:
        return state


@slow_examples
@given(
    chunks=stores,
    claimed=st.lists(st.sampled_from(DATAIDS), unique=True, max_size=5),
    outputs=st.sampled_from([[], ["dst"]]),  # none: no trigger drops the candidates
)
def test_the_claims_of_many_chunks_in_one_statement_each_write_what_one_claim_does(
    pg, chunks, claimed, outputs
):
    with pg.transaction():
        _fill(pg, chunks)
    batched = _after(pg, type(pg).record_claims, claimed, outputs)
    each = _after(pg, Store.record_claims, claimed, outputs)
    assert batched == each
    assert batched[0] == claimed  # each runid names its own chunk's run


@slow_examples
@given(chunks=stores, dataid=st.sampled_from(DATAIDS), status=st.sampled_from(STATUSES))
def test_a_finish_in_one_statement_does_what_its_two_did(pg, chunks, dataid, status):
    from dataflow.store.queries.chunks import ChunkQueries

    with pg.transaction():
        _fill(pg, chunks)

    def after(form) -> tuple:
        try:
            with pg.transaction(pipeline=True):
                counts = form(pg, "work", dataid, status)
                state = pg.conn.execute(
                    "SELECT datasetid, jobid, dataid, locktype, status FROM datastatus"
                ).fetchall()
                found = (counts, sorted(state, key=repr))
                raise _Undone
        except _Undone:
            return found

    assert after(type(pg).finish) == after(ChunkQueries.finish)
