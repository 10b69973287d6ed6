"""The claim/finish life cycle against a plain in-memory model (hypothesis, stateful).

Three jobs chained by datasets: A (src -> a), B (a -> b), C (a, b -> c). Inputs are
made READY through user SQL, so the trigger-kept claim index is exercised exactly
as `utility dml` would.
"""

from __future__ import annotations

import re
import shutil
import sqlite3
import tempfile
import time
from contextlib import closing
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from dataflow.dataids import natural_key
from dataflow.run.claim import claims, lifecycle, liveness
from dataflow.store import create_store

JOBS = {"A": (("src",), "a"), "B": (("a",), "b"), "C": (("a", "b"), "c")}
RETRIES = {"A": 0, "B": 1, "C": 0}  # B reruns a FAILED chunk once by itself
DATAIDS = ["1", "2", "9", "10", "1.0", "2.0", "10.0", "2025-01-02", "2025-01-10", "shard-3"]


def reference_order(dataid: str) -> list:
    """Natural order, written independently of the code under test."""
    return [int(p) if i % 2 else p for i, p in enumerate(re.split(r"([0-9]+)", dataid))]


class Lifecycle(RuleBasedStateMachine):
    pg: str | None = None  # a PostgreSQL database's URL: the machine runs there instead

    def __init__(self):
        super().__init__()
        self.folder = Path(tempfile.mkdtemp())
        self.store, _ = create_store(self.pg or self.folder / "dataflow.db")
        if self.pg:  # one database for every example: start from empty tables
            self.store.execute("truncate dataset, job, datastatus, candidate, run, runlog, hold")
        for name in ("src", "a", "b", "c"):
            self.store.execute(f"insert into dataset (datasetid) values ('{name}')")
        for jobid, (inputs, output) in JOBS.items():
            for dataset in inputs:
                self.store.execute(
                    f"insert into job values ('{jobid}', 'IN', '{dataset}', null, now())"
                )
            self.store.execute(
                f"insert into job values ('{jobid}', 'OUT', '{output}', null, now())"
            )
            if RETRIES[jobid]:
                self.store.execute(
                    f"insert into job values ('{jobid}', 'retries', null, '{RETRIES[jobid]}', now())"
                )
        self.jobs = {jobid: lifecycle.load_job(self.store, jobid) for jobid in JOBS}
        for jobid in JOBS:
            claims.prepare(self.store, jobid)
        self.src: set[str] = set()
        self.out: dict[tuple[str, str], str] = {}  # (job, dataid) -> status of its OUT row
        self.live: dict[tuple[str, str], object] = {}  # claimed chunk -> its Claim (holds the lock)
        self.retry: dict[tuple[str, str], int] = {}  # retry number of each chunk's last run

    def teardown(self):
        for claim in self.live.values():
            claim.lock.close()
        self.store.close()
        shutil.rmtree(self.folder)

    # -- the model -------------------------------------------------------------------

    def ready(self, dataset: str, dataid: str) -> bool:
        if dataset == "src":
            return dataid in self.src
        producer = next(j for j, (_, out) in JOBS.items() if out == dataset)
        return self.out.get((producer, dataid)) == "READY"

    def claimable(self, jobid: str) -> list[str]:
        inputs, _ = JOBS[jobid]
        return [
            d
            for d in DATAIDS
            if all(self.ready(i, d) for i in inputs)
            and (jobid, d) not in self.live
            and self.rerunnable(jobid, d)
            and not self.being_read(jobid, d)
        ]

    def being_read(self, jobid: str, dataid: str) -> bool:
        """Is a live run of a consumer reading the job's output at ``dataid``?"""
        output = JOBS[jobid][1]
        return any((c, dataid) in self.live for c, (ins, _) in JOBS.items() if output in ins)

    def rerunnable(self, jobid: str, dataid: str) -> bool:
        status = self.out.get((jobid, dataid))
        if status == "FAILED":
            return self.retry[(jobid, dataid)] < RETRIES[jobid]
        return status in (None, "RESUBMIT")

    # -- rules -----------------------------------------------------------------------

    @rule(dataid=st.sampled_from(DATAIDS))
    def source_arrives(self, dataid):
        self.store.execute(
            f"delete from datastatus where datasetid = 'src' and jobid = 'fakejob' and dataid = '{dataid}'"
        )
        self.store.execute(
            "insert into datastatus (dataid, datasetid, jobid, locktype, modified, status) "
            f"values ('{dataid}', 'src', 'fakejob', 'OUT', now(), 'READY')"
        )
        self.src.add(dataid)

    @rule(dataid=st.sampled_from(DATAIDS))
    def source_arrives_from_outside(self, dataid):
        """A producer that is not ours: the driver's own connection, none of our functions."""
        replace = (
            "delete from datastatus where datasetid = 'src' and jobid = 'fakejob' and dataid = {0};"
            "insert into datastatus (dataid, datasetid, jobid, locktype, modified, "
            "status) values ({0}, 'src', 'fakejob', 'OUT', current_timestamp, 'READY')"
        )
        if self.pg:
            import psycopg

            with psycopg.connect(self.pg) as conn:  # one transaction
                for statement in replace.format("%s").split(";"):
                    conn.execute(statement, (dataid,))
        else:
            with closing(
                sqlite3.connect(self.folder / "dataflow.db", isolation_level=None)
            ) as conn:
                conn.execute("begin")
                for statement in replace.format("?").split(";"):
                    conn.execute(statement, (dataid,))
                conn.execute("commit")
        self.src.add(dataid)

    @rule(jobid=st.sampled_from(sorted(JOBS)), count=st.integers(1, 3))
    def claim(self, jobid, count):
        """Up to ``count`` chunks in one transaction (a drain's free slots): the smallest
        claimable ones, each its own claim."""
        expected = sorted(self.claimable(jobid), key=reference_order)[:count]
        result = claims.claim(self.store, self.jobs[jobid], count=count)
        got = [claim.dataid for claim in ([result.claim, *result.more] if result.claim else [])]
        assert got == expected, f"{jobid} claimed {got!r}, model says {expected!r}"
        for claim in [result.claim, *result.more] if result.claim else []:
            # run in this process, as a driver's chunk is (no group)
            liveness.started(self.store, jobid, claim.dataid, claim.runid, claim.token, 0)
            key = (jobid, claim.dataid)
            self.retry[key] = self.retry[key] + 1 if self.out.get(key) == "FAILED" else 0
            self.live[key] = claim
            self.out[key] = "RUNNING"

    @precondition(lambda self: self.live)
    @rule(data=st.data(), success=st.booleans())
    def finish(self, data, success):
        jobid, dataid = data.draw(st.sampled_from(sorted(self.live)))
        status = "READY" if success else "FAILED"
        claim = self.live.pop((jobid, dataid))
        counts = lifecycle.finish(self.store, jobid, dataid, status, runid=claim.runid)
        claim.lock.close()
        liveness.ended(self.store, jobid, dataid, claim.runid)  # nothing of it lives now:
        deadline = time.monotonic() + 10  # a keeper lets the chunk go at its next look
        while liveness.is_live(self.store, jobid, dataid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert counts == (1, len(JOBS[jobid][0]), status)
        self.out[(jobid, dataid)] = status

    @precondition(lambda self: set(self.out) - set(self.live))
    @rule(data=st.data(), status=st.sampled_from(["RESUBMIT", "HOLD", "READY", "FAILED"]))
    def operator_sets(self, data, status):
        jobid, dataid = data.draw(st.sampled_from(sorted(set(self.out) - set(self.live))))
        lifecycle.end_chunk(self.store, jobid, dataid, status)
        self.out[(jobid, dataid)] = status

    # -- what the store must show ----------------------------------------------------

    @invariant()
    def store_matches_model(self):
        rows = self.store.conn.execute(
            "select jobid, dataid, locktype, status, datasetid from datastatus where jobid != 'fakejob'"
        ).fetchall()
        outs = {(j, d): s for j, d, lock, s, _ in rows if lock == "OUT"}
        assert outs == self.out
        held = sorted((j, d, ds) for j, d, lock, _, ds in rows if lock == "IN")
        assert held == sorted((j, d, ds) for j, d in self.live for ds in JOBS[j][0])
        history = self.store.conn.execute(
            "select jobid, dataid, status from run where status = 'RUNNING'"
        ).fetchall()
        assert sorted((j, d) for j, d, _ in history) == sorted(self.live)


TestLifecycle = Lifecycle.TestCase
TestLifecycle.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)


class OnPostgres(Lifecycle):
    pass


@pytest.mark.long  # seconds of a real server's round trips; the SQLite machine is in the fast loop
def test_lifecycle_on_postgres(pg_database, tmp_path, monkeypatch):
    """The same machine on a real PostgreSQL server (fewer examples: each costs more)."""
    monkeypatch.setenv("DATAFLOW_STATE", str(tmp_path))
    OnPostgres.pg = pg_database
    run_state_machine_as_test(
        OnPostgres, settings=settings(max_examples=25, stateful_step_count=30, deadline=None)
    )


@given(
    st.lists(
        st.from_regex(
            r"[a-z é߀]{0,2}(?:[1-9][0-9]{0,3}|0)(?:[.-](?:[1-9][0-9]{0,3}|0)){0,2}", fullmatch=True
        )
    )
)
def test_natural_key_orders_like_people_do(dataids):
    assert sorted(dataids, key=natural_key) == sorted(
        dataids, key=lambda d: (reference_order(d), d)
    )
