"""The claim/finish life cycle against a plain in-memory model (hypothesis, stateful).

Three jobs chained by datasets: A (src -> a), B (a -> b), C (a, b -> c). Inputs are
made READY through user SQL, so the trigger-kept claim index is exercised exactly
as `utility dml` would.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from dataflow import lifecycle
from dataflow.dataids import natural_key
from dataflow.store import Store

JOBS = {"A": (("src",), "a"), "B": (("a",), "b"), "C": (("a", "b"), "c")}
DATAIDS = ["1", "2", "9", "10", "1.0", "2.0", "10.0", "2025-01-02", "2025-01-10", "shard-3"]


def reference_order(dataid: str) -> list:
    """Natural order, written independently of the code under test."""
    return [int(p) if i % 2 else p for i, p in enumerate(re.split(r"([0-9]+)", dataid))]


class Lifecycle(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.folder = Path(tempfile.mkdtemp())
        self.store, _ = Store.create(self.folder / "dataflow.db")
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
        self.jobs = {jobid: lifecycle.load_job(self.store, jobid) for jobid in JOBS}
        self.src: set[str] = set()
        self.out: dict[tuple[str, str], str] = {}  # (job, dataid) -> status of its OUT row
        self.live: set[tuple[str, str]] = set()

    def teardown(self):
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
            and self.out.get((jobid, d)) in (None, "RESUBMIT")
        ]

    # -- rules -----------------------------------------------------------------------

    @rule(dataid=st.sampled_from(DATAIDS))
    def source_arrives(self, dataid):
        self.store.execute(
            "insert or replace into datastatus (dataid, datasetid, jobid, locktype, modified, status) "
            f"values ('{dataid}', 'src', 'fakejob', 'OUT', now(), 'READY')"
        )
        self.src.add(dataid)

    @rule(jobid=st.sampled_from(sorted(JOBS)))
    def claim(self, jobid):
        expected = min(self.claimable(jobid), key=reference_order, default=None)
        got = lifecycle.claim(self.store, self.jobs[jobid])
        assert got == expected, f"{jobid} claimed {got!r}, model says {expected!r}"
        if got is not None:
            self.live.add((jobid, got))
            self.out[(jobid, got)] = "RUNNING"

    @precondition(lambda self: self.live)
    @rule(data=st.data(), success=st.booleans())
    def finish(self, data, success):
        jobid, dataid = data.draw(st.sampled_from(sorted(self.live)))
        status = "READY" if success else "FAILED"
        updated, released = lifecycle.finish(self.store, jobid, dataid, status)
        assert (updated, released) == (1, len(JOBS[jobid][0]))
        self.live.discard((jobid, dataid))
        self.out[(jobid, dataid)] = status

    @precondition(lambda self: set(self.out) - self.live)
    @rule(data=st.data(), status=st.sampled_from(["RESUBMIT", "HOLD", "READY", "FAILED"]))
    def operator_sets(self, data, status):
        jobid, dataid = data.draw(st.sampled_from(sorted(set(self.out) - self.live)))
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


TestLifecycle = Lifecycle.TestCase
TestLifecycle.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)


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
