"""The parts of the one-driver drain that need no Spark: finding the entry point without
running the script, chunk runs in threads (each its own log, failure, timeout and lock)
and the events the driver sends RunJob."""

from __future__ import annotations

import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataflow.run.claim import claims
from dataflow.run.claim.claims import Claim
from dataflow.run.drain.events import Event, decode, encode
from dataflow.run.process import locks
from dataflow.run.process.runner import Outcome
from dataflow.run.spark import inprocess
from dataflow.run.spark.inprocess import ThreadRun
from dataflow.run.spark.sparksubmit import has_entry_point


@pytest.mark.parametrize(
    ("source", "found"),
    [
        ("def run(spark, job):\n    pass\n", True),
        ("import os\n\ndef run(spark, job, extra=1):\n    pass\n", True),
        ("def run(*args):\n    pass\n", True),
        ("def run(spark):\n    pass\n", False),  # not the entry point's shape
        ("if True:\n    def run(spark, job):\n        pass\n", False),  # not at top level
        ("async def run(spark, job):\n    pass\n", False),
        ("run = lambda spark, job: None\n", False),
        ("def run(spark, job):\n  pass\n  oops(\n", False),  # spark-submit will say why
        ("raise SystemExit('executed')\ndef run(spark, job):\n    pass\n", True),
    ],
)
def test_the_entry_point_is_found_without_running_the_script(tmp_path, source, found):
    script = tmp_path / "job.py"
    script.write_text(source)
    assert has_entry_point(str(script)) is found
    assert has_entry_point(str(tmp_path / "job.sh")) is False
    assert has_entry_point(str(tmp_path / "missing.py")) is False


def chunk(tmp_path: Path, name: str, work, **kw) -> ThreadRun:
    return ThreadRun(work, {"dataid": name}, log_path=tmp_path / f"{name}.log", **kw)


def test_chunks_in_threads_at_once_each_write_their_own_log(tmp_path):
    both = threading.Barrier(2, timeout=10)

    def work(variables):
        both.wait()  # both chunks are running at once
        for i in range(200):
            print(f"chunk {variables['dataid']} line {i}")
            print(f"chunk {variables['dataid']} err {i}", file=sys.stderr)
        if variables["dataid"] == "b":
            raise KeyError("no such shard: 'b'")

    runs = [chunk(tmp_path, name, work, secrets=["hunter2"]) for name in ("a", "b")]
    for run in runs:
        run.start()
    a, b = (run.wait() for run in runs)
    assert a.ok and a.error is None
    assert not b.ok and b.returncode == 1 and b.reason == "KeyError: \"no such shard: 'b'\""
    for name in ("a", "b"):
        log = (tmp_path / f"{name}.log").read_text()
        other = "b" if name == "a" else "a"
        assert log.count(f"chunk {name} line") == 200 and log.count(f"chunk {name} err") == 200
        assert f"chunk {other}" not in log
    assert "Traceback" in (tmp_path / "b.log").read_text()
    print("after the chunks: not routed")  # the test's own thread writes where it did


def test_secrets_are_masked_and_exits_end_as_a_process_would(tmp_path):
    def work(variables):
        print(f"password is hunter2, dataid {variables['dataid']}")
        code = {"zero": 0, "none": None, "three": 3, "text": "load: shard 7 is bad"}
        raise SystemExit(code[variables["dataid"]])

    outcomes = {}
    for name in ("zero", "none", "three", "text"):
        run = chunk(tmp_path, name, work, secrets=["hunter2"])
        run.start()
        outcomes[name] = run.wait()
        assert "hunter2" not in (tmp_path / f"{name}.log").read_text()
        assert "password is ***" in (tmp_path / f"{name}.log").read_text()
    assert outcomes["zero"].ok and outcomes["none"].ok
    assert outcomes["three"].returncode == 3 and outcomes["three"].reason == "exit code 3"
    assert outcomes["text"].reason == "load: shard 7 is bad"
    assert "load: shard 7 is bad" in (tmp_path / "text.log").read_text()


def test_a_timeout_cancels_and_a_chunk_that_ignores_it_keeps_its_lock(tmp_path, monkeypatch):
    monkeypatch.setattr(inprocess, "GIVE_UP_S", 0.5)
    lockfile = tmp_path / "locks"
    cancelled, release = threading.Event(), threading.Event()

    def obeys(variables):
        cancelled.wait(10)
        raise RuntimeError("job group cancelled")

    lock = locks.ChunkLock(lockfile, "job", "1")
    assert lock.try_acquire()
    run = chunk(tmp_path, "1", obeys, cancel=cancelled.set, timeout=0.3, lock_fd=lock.fd)
    run.start()
    outcome = run.wait()
    assert outcome.timeout == 0.3 and outcome.reason == "timeout after 0.3 s" and not outcome.ok
    lock.close()
    assert not locks.is_held(lockfile, "job", "1")  # its thread ended: the lock is free

    def ignores(variables):  # pure Python that no Spark cancel reaches
        release.wait(30)

    lock = locks.ChunkLock(lockfile, "job", "2")
    assert lock.try_acquire()
    run = chunk(tmp_path, "2", ignores, timeout=0.3, lock_fd=lock.fd)
    run.start()
    started = time.monotonic()
    outcome = run.wait()  # given up: the chunk ends FAILED
    assert outcome.reason == "timeout after 0.3 s" and time.monotonic() - started < 5
    lock.close()  # the drain lets go...
    assert locks.is_held(lockfile, "job", "2")  # ...but the code still runs: nobody may take it
    release.set()
    deadline = time.monotonic() + 10
    while locks.is_held(lockfile, "job", "2") and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not locks.is_held(lockfile, "job", "2")


def test_a_signal_stops_the_chunk_as_interrupted(tmp_path):
    stopped = threading.Event()

    def work(variables):
        stopped.wait(10)
        raise RuntimeError("cancelled")

    run = chunk(tmp_path, "1", work, cancel=stopped.set)
    run.start()
    run.signal(15)
    outcome = run.wait()
    assert outcome.reason == "interrupted by SIGTERM" and outcome.exit_code == 143


dataids = st.text(st.characters(codec="utf-8", exclude_characters="\0"), max_size=30)


@given(dataid=dataids, reason=st.one_of(st.none(), st.text(max_size=40)))
def test_events_reach_runjob_as_the_driver_sent_them(dataid, reason):
    claim = Claim(dataid, 2, 41, None, f"/logs/{dataid!r}.2.log", "store:41", ())
    outcome = Outcome(1, 2.5, None, None, None, ("log: No space left on device",), reason)
    for event in (
        Event("launch", dataid, claim),
        Event("ended", dataid, claim, outcome, "FAILED", (1, 1)),
        Event("cap_full", live=3, cap=3),
        Event("unusable", "bad\udcff" + dataid, status=claims.UNNAMEABLE),
    ):
        assert decode(encode(event)) == event
