"""A batch of chunks run as one call (``dataflow.run.spark.inbatch``): a failed batch is split
until only the chunks that fail on their own fail, each with its own reason and log."""

from __future__ import annotations

import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from dataflow.run.spark.inbatch import BatchChunk, BatchRun


def _run(dataids, work, tmp_path, **options):
    chunks = [BatchChunk({"dataid": d}, None, tmp_path / f"{d}.log") for d in dataids]
    batch = BatchRun(work, chunks, group="g", **options)
    views = batch.views()
    batch.start()
    return [view.wait() for view in views]


@settings(max_examples=40, deadline=None)
@given(
    size=st.integers(1, 12),
    poisoned=st.sets(st.integers(0, 11), max_size=4),
)
def test_only_the_chunks_that_fail_alone_fail(tmp_path_factory, size, poisoned):
    tmp_path = tmp_path_factory.mktemp("batch")
    dataids = [f"d{n}" for n in range(size)]
    bad = {f"d{n}" for n in poisoned if n < size}
    calls: list[list[str]] = []

    def work(variables, group):
        part = [v["dataid"] for v in variables]
        calls.append(part)
        print(f"part {' '.join(part)}")
        for dataid in part:
            if dataid in bad:
                raise ValueError(f"chunk {dataid} is poisoned")

    outcomes = _run(dataids, work, tmp_path)
    for dataid, outcome in zip(dataids, outcomes, strict=True):
        if dataid in bad:
            assert not outcome.ok and outcome.error == f"ValueError: chunk {dataid} is poisoned"
        else:
            assert outcome.ok and outcome.error is None
        lines = (tmp_path / f"{dataid}.log").read_text().splitlines()
        assert sum(line.startswith("part ") for line in lines) == sum(dataid in p for p in calls)
    assert calls[0] == dataids  # the whole batch first, in its order
    # each chunk ran at most once per level of halving, and a good chunk once READY
    for dataid in dataids:
        assert sum(dataid in part for part in calls) <= size.bit_length() + 1
    if not bad:
        assert len(calls) == 1


def test_a_part_past_its_timeout_is_cancelled_and_split(tmp_path):
    cancelled: set[str] = set()
    stop = threading.Event()

    def work(variables, group):
        if any(v["dataid"] == "slow" for v in variables):
            stop.wait(60)  # until cancelled, as Spark's cancel of the job group would end it
            stop.clear()
            raise RuntimeError("cancelled")

    def cancel(group):
        cancelled.add(group)
        stop.set()

    outcomes = _run(["a", "slow", "b"], work, tmp_path, cancel=cancel, timeout=0.3)
    assert [o.ok for o in outcomes] == [True, False, True]
    assert outcomes[1].timeout == 0.3  # its own timeout, alone
    assert len(cancelled) == 3  # the batch of 3, its first half (a, slow), then slow alone
    assert "the batch of 3 chunks failed" in (tmp_path / "slow.log").read_text()
