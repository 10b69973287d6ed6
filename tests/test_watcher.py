"""One watcher thread for many job processes (dataflow/run/process/watcher.py): real processes,
started while others run, each one's output copied whole to its own log (secrets
masked), its exit code and its end reported once; a job past its timeout, or one that
ignores the signal passed on, ended."""

from __future__ import annotations

import os
import queue
import signal
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataflow.run.process import watcher as watcher_module
from dataflow.run.process.runner import Run
from dataflow.run.process.watcher import Watcher

SECRET = "s3cr3t-pw"

jobs = st.lists(
    st.tuples(
        st.integers(0, 3),  # exit code
        st.integers(0, 200_000),  # bytes on stdout (more than a pipe holds)
        st.integers(0, 3_000),  # bytes on stderr
        st.sampled_from(["0", "0.01", "0.05"]),  # seconds it sleeps first
        st.booleans(),  # it writes the secret
    ),
    min_size=1,
    max_size=12,
)


def _job(code: int, out: int, err: int, pause: str, secret: bool) -> list[str]:
    said = f"echo {SECRET};" if secret else ""
    body = (
        f"sleep {pause}; {said} head -c {out} /dev/zero | tr '\\0' o;"
        f" head -c {err} /dev/zero | tr '\\0' e >&2; exit {code}"
    )
    return ["sh", "-c", body]


@settings(max_examples=15, deadline=None)
@given(batches=st.lists(jobs, min_size=1, max_size=3))
def test_many_jobs_on_one_watcher_each_reported_once_with_all_its_output(tmp_path_factory, batches):
    """Batches of jobs started on one watcher while the last batch still runs: every job's
    end is reported once, with its own exit code, its whole output in its own log (the
    secret masked), nothing mixed."""
    folder = tmp_path_factory.mktemp("logs")
    watcher = Watcher()
    ended: queue.Queue = queue.Queue()
    started = []
    for batch in batches:
        for spec in batch:
            log = folder / f"{len(started)}.log"
            run = Run(
                _job(*spec), dict(os.environ), log_path=log, secrets=[SECRET], echo=False,
                watcher=watcher,
            )  # fmt: skip
            run.start()
            number = len(started)
            run.when_ended(lambda outcome, n=number: ended.put((n, outcome)))
            started.append((spec, log))
    reports = [ended.get(timeout=60) for _ in started]
    watcher.close()
    assert sorted(n for n, _ in reports) == list(range(len(started)))
    for n, outcome in reports:
        (code, out, err, _, secret), log = started[n]
        assert outcome.returncode == code and outcome.lost == []
        data = log.read_bytes()  # stdout and stderr, as they were read
        assert SECRET.encode() not in data and data.count(b"***\n") == secret
        assert data.count(b"o") == out and data.count(b"e") == err
        assert len(data) == out + err + 4 * secret
    assert ended.empty()


@pytest.mark.long
def test_a_job_past_its_timeout_is_ended_and_one_that_ignores_sigterm_killed(tmp_path):
    """On one watcher: a job past its timeout gets SIGTERM (124's outcome: timeout set);
    a job that ignores the signal passed on is killed KILL_GRACE_S later; a quick job
    started meanwhile is reported at once, not after them."""
    watcher = Watcher()
    ended: queue.Queue = queue.Queue()
    slow = Run(["sleep", "30"], dict(os.environ), echo=False, timeout=5, watcher=watcher)
    trapped = tmp_path / "stubborn.log"
    stubborn = Run(
        ["sh", "-c", "trap '' TERM; echo trapped; sleep 30 & wait; sleep 30"],
        dict(os.environ), log_path=trapped, echo=False, watcher=watcher,
    )  # fmt: skip
    for name, run in (("slow", slow), ("stubborn", stubborn)):
        run.start()
        run.when_ended(lambda outcome, name=name: ended.put((name, outcome)))
    while not trapped.exists() or not trapped.read_text():  # its trap is set
        time.sleep(0.01)
    stubborn.signal(signal.SIGTERM)
    quick = Run(["true"], dict(os.environ), echo=False, watcher=watcher)
    quick.start()
    quick.when_ended(lambda outcome: ended.put(("quick", outcome)))
    first = ended.get(timeout=30)
    assert first[0] == "quick" and first[1].returncode == 0
    rest = dict(ended.get(timeout=60) for _ in range(2))
    watcher.close()
    assert rest["slow"].timeout == 5 and rest["slow"].exit_code == 124
    assert rest["stubborn"].returncode == -signal.SIGKILL
    assert rest["stubborn"].interrupted == signal.SIGTERM


def test_a_run_without_a_watcher_has_one_of_its_own_that_ends_with_it(tmp_path):
    """A Run given no watcher (a Spark driver's, a check's) is watched by a thread of its
    own, which is gone once the job is: no thread or descriptor left behind."""
    import threading

    before = set(threading.enumerate())
    fds = len(os.listdir("/proc/self/fd"))
    run = Run(
        ["sh", "-c", "echo hi; exit 3"], dict(os.environ), log_path=tmp_path / "l", echo=False
    )
    run.start()
    assert run.wait().returncode == 3

    def left() -> tuple[set, bool]:  # (an earlier test's watcher may still be ending)
        return set(threading.enumerate()) - before, len(os.listdir("/proc/self/fd")) > fds

    deadline = time.monotonic() + 10
    while any(left()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert left() == (set(), False)
    assert (tmp_path / "l").read_text() == "hi\n"


def _next_pid_is(pid: int) -> bool:
    """Make the kernel give ``pid`` to the next process (root only; False if it cannot)."""
    try:
        with open("/proc/sys/kernel/ns_last_pid", "w") as last:
            last.write(str(pid - 1))
        return True
    except OSError:
        return False


def _has_exited(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] == "Z"
    except FileNotFoundError:  # reaped
        return True


@pytest.mark.long  # waits while an exited job's grandchild holds its output
def test_an_exited_job_keeps_its_pid_until_reported_and_its_group_is_never_signalled_after(
    tmp_path, monkeypatch
):
    """A job that exited while a grandchild (its own session) holds its output is still
    watched for a while: its pid is not given to a job started meanwhile, and once it is
    reported a signal passed on to it never reaches a job that has its pid since."""
    if os.geteuid() != 0 or not _next_pid_is(os.getpid()):
        pytest.skip("needs root, to give a new process a chosen pid")
    watcher = Watcher()
    ended: queue.Queue = queue.Queue()

    def start(argv: list[str], name: str) -> Run:
        run = Run(argv, dict(os.environ), echo=False, watcher=watcher)
        run.start()
        run.when_ended(lambda outcome: ended.put((name, outcome)))
        return run

    # watched until its grandchild lets its stdout go (5 s), however slow the machine
    monkeypatch.setattr(watcher_module, "DRAIN_AFTER_EXIT_S", 60.0)
    held = start(["sh", "-c", "setsid sleep 5 & exit 7"], "held")
    pid = held.process.pid
    while not _has_exited(pid):  # (its grandchild holds its stdout)
        time.sleep(0.01)
    meanwhile, until = [], time.monotonic() + 2.5
    while len(meanwhile) < 20 and time.monotonic() < until:
        _next_pid_is(pid)
        meanwhile.append(start(["sleep", "0.2"], "meanwhile").process.pid)
    assert pid not in meanwhile
    reports = [ended.get(timeout=30) for _ in range(len(meanwhile) + 1)]
    assert [outcome.returncode for name, outcome in reports if name == "held"] == [7]
    assert sorted(name for name, _ in reports) == ["held"] + ["meanwhile"] * len(meanwhile)
    for _ in range(20):  # its pid free now: a new job may get it
        _next_pid_is(pid)
        stranger = start(["sleep", "30"], "stranger")
        if stranger.process.pid == pid:
            break
        stranger.signal(signal.SIGKILL)
        ended.get(timeout=30)
    else:
        pytest.skip("the kernel gave the pid to another process each time")
    held.signal(signal.SIGTERM)  # RunJob passing a signal on, late
    time.sleep(0.3)
    assert stranger.process.poll() is None
    stranger.signal(signal.SIGTERM)
    assert ended.get(timeout=30)[1].returncode == -signal.SIGTERM
    watcher.close()
