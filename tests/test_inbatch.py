"""A batch of chunks run as one call (``dataflow.run.inbatch``): a failed batch is split
until only the chunks that fail on their own fail, each with its own reason and log."""

from __future__ import annotations

import threading

from hypothesis import given, settings
from hypothesis import strategies as st

from dataflow.run.inbatch import BatchChunk, BatchRun


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


BATCH_DRAINER = """\
import os, sys, time
from pathlib import Path
from dataflow.run import claims, lifecycle
from dataflow.run.drain import Drain
from dataflow.run.inbatch import BatchChunk, BatchRun
from dataflow.run.inprocess import ThreadRun
from dataflow.run.jobenv import JobEnv
from dataflow.store import open_store

def work(chunks, group):
    part = ",".join(v["dataid"] for v in chunks)
    with open("done.txt", "a") as out:
        out.write(f"{part} {os.getpid()} {time.time()} start\\n")
    try:
        time.sleep(0.1)
        if any(v["dataid"] == "13" for v in chunks):
            raise ValueError("thirteen")
    finally:
        with open("done.txt", "a") as out:
            out.write(f"{part} {os.getpid()} {time.time()} end\\n")

def batch(claimed):
    chunks = [BatchChunk(v, claim.lock.fd, claim.logpath) for claim, v in claimed]
    return BatchRun(work, chunks, group=f"g{claimed[0][0].runid}")

with open_store(Path("dataflow.db")) as store:
    job = lifecycle.load_job(store, "work")
    claims.prepare(store, "work")
    drain = Drain(store, job, JobEnv({}), ["in-process"], parallel=1, batch=4, in_batch=batch,
                  in_process=lambda claim, v: ThreadRun(lambda v: work([v], "one"), v,
                                                        lock_fd=claim.lock.fd,
                                                        log_path=claim.logpath))
    summary = drain.run()
print(summary.ready, summary.failed)
"""


def test_two_processes_draining_in_batches_claim_each_chunk_once(cli, tmp_path):
    import subprocess
    import sys

    from support import history, statuses

    cli.ok("createtables")
    cli.ok("dml", "insert into dataset (datasetid) values ('src'), ('dst')")
    cli.ok(
        "dml",
        "insert into job (jobid, itemtype, datasetid, itemvalue) values ('work', 'IN', 'src', null), "
        "('work', 'OUT', 'dst', null), ('work', 'max_parallel', null, '6')",
    )
    cli.ok(
        "dml",
        "insert into datastatus (dataid, datasetid, jobid, locktype, modified, status) "
        "with recursive s(n) as (select 1 union all select n + 1 from s where n < 30) "
        "select n, 'src', 'feed', 'OUT', now(), 'READY' from s",
    )
    (tmp_path / "drainer.py").write_text(BATCH_DRAINER)
    drains = [
        subprocess.Popen(
            [sys.executable, "drainer.py"],
            cwd=tmp_path,
            env=cli.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    outputs = [drain.communicate(timeout=120) for drain in drains]
    assert [drain.returncode for drain in drains] == [0, 0], outputs
    runs = history(tmp_path, "work")
    assert sorted(int(r[0]) for r in runs) == list(range(1, 31))  # each chunk claimed once
    assert {r[1] for r in runs} == {1}  # a split batch used no attempt
    assert statuses(tmp_path, "work") == {
        str(n): "FAILED" if n == 13 else "READY" for n in range(1, 31)
    }
    assert [r[5] for r in runs if r[5]] == ["ValueError: thirteen"]
    done = [line.split() for line in (tmp_path / "done.txt").read_text().splitlines()]
    ready = {d for part, _, _, what in done if what == "end" for d in part.split(",")}
    assert ready == {str(n) for n in range(1, 31)}
    events = sorted(
        (float(t), len(part.split(",")) * (1 if what == "start" else -1))
        for part, _, t, what in done
    )
    live, most = 0, 0
    for _, step in events:
        live += step
        most = max(most, live)
    assert most <= 6  # max_parallel counts chunks: 6 across both drains, batches of 4
