"""A drain spread over worker processes (``RunJob --all --parallel N --workers W``)
against signals and deaths: kill -9 of workers (and of RunJob with them), SIGSTOP of a
worker or of RunJob for longer than the bound, a worker's keeper killed or stopped,
SIGINT, SIGHUP and SIGTERM as the workers start, mid-drain, to one worker or to every
process at once, a worker whose RunJob died as it started. Never twice (the job's own
``flock`` per chunk: see spreading.py), RunJob's exit 128+n or one line, no traceback.
Workers are born with the signals held until their handlers are set, and name their
RunJob (``--runjob PID``): a worker whose RunJob is gone claims nothing."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time

import pytest

from support import (
    BOUND,
    script,
    setting,
    start,
    start_runjob,
    statuses,
    wait_for,
)
from support.hosts import alive, holder_of
from support.spreading import (
    JUDGE,
    SPREAD,
    _bounded,
    _four_held,
    _lines,
    _no_overlap,
    _said_once,
    chunks,
    workers_of,
)

on_postgres = pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)


def _sigmask(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as file:
        for line in file:
            if line.startswith(field + ":"):
                return int(line.split()[1], 16)
    raise AssertionError(field)


def _catches(pid: int, number: int) -> bool:
    return bool(_sigmask(pid, "SigCgt") & (1 << (number - 1)))


def _children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as file:
                    if int(file.read().rpartition(b")")[2].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, ValueError, IndexError):
                continue
    return found


FREEZER = "/sys/fs/cgroup/freezer"


@contextlib.contextmanager
def _frozen(pids: list[int]):
    """The processes frozen (a cgroup freezer: not a job-control stop, which would make
    the kernel send SIGHUP to their process group once it is orphaned) for the block."""
    group = f"{FREEZER}/sweep15-{os.getpid()}"
    try:
        os.mkdir(group)
    except OSError as exc:
        pytest.skip(f"no freezer cgroup here: {exc}")
    try:
        for pid in pids:
            with open(f"{group}/cgroup.procs", "w") as procs:
                procs.write(str(pid))
        with open(f"{group}/freezer.state", "w") as state:
            state.write("FROZEN")
        yield
    finally:
        with open(f"{group}/freezer.state", "w") as state:
            state.write("THAWED")
        with open(f"{group}/cgroup.procs") as procs:
            left = procs.read().split()
        for pid in left:
            with open(f"{FREEZER}/cgroup.procs", "w") as procs, contextlib.suppress(OSError):
                procs.write(pid)
        os.rmdir(group)


@on_postgres
@pytest.mark.long  # a spread drain killed and run again, twice
@pytest.mark.parametrize("victims", ["workers", "runjob_and_workers"])
def test_kill_9_of_every_worker_never_runs_a_chunk_twice(cli, tmp_path, victims):
    """``kill -9`` of each worker's process group (and of RunJob with them) while their
    jobs run: the jobs live on, a second spread drain runs only the chunks nobody started
    and never one beside a live job; once the jobs end, their chunks are recovered
    (abandoned) and run again by a retry; every chunk READY, no overlap."""
    _bounded(cli)
    runjob, pids = _four_held(cli, tmp_path)
    if victims == "runjob_and_workers":
        os.kill(runjob.pid, signal.SIGKILL)
    for pid in pids:
        os.killpg(pid, signal.SIGKILL)
    _, err = runjob.communicate(timeout=60)
    if victims == "workers":
        assert runjob.returncode == 1, err
        assert err.count("\n") == 1 and "was killed by SIGKILL" in err, err
    held = {line.split()[0]: int(line.split()[1]) for line in _lines(tmp_path / "held")}
    assert all(alive(pid) for pid in held.values())  # the jobs live on
    (tmp_path / "hold").unlink()
    again = cli.runjob(*SPREAD)
    assert "Traceback" not in again.err, again
    found = statuses(tmp_path, "work")
    assert {d for d, s in found.items() if s == "RUNNING"} == set(held), found
    assert {d for d, s in found.items() if s == "READY"} == {str(n) for n in range(1, 9)} - set(
        held
    )
    (tmp_path / "go").touch()
    wait_for(lambda: not any(alive(pid) for pid in held.values()), what="the held jobs to end")

    def drained() -> bool:
        done = cli.runjob(*SPREAD)
        assert "Traceback" not in done.err, done
        return set(statuses(tmp_path, "work").values()) == {"READY"}

    wait_for(drained, timeout=120, what="the abandoned chunks to be run again")
    ran = _no_overlap(tmp_path)
    assert sorted(ran) == sorted([*map(str, range(1, 9)), *held])  # the held ones twice


@on_postgres
@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_signal_as_the_workers_start_stops_the_drain_as_one(cli, tmp_path, number):
    """A signal RunJob gets while its workers are still starting (they have not set their
    handlers yet: held here by SIGSTOP until RunJob has passed the signal on) stops the
    drain as a single drain's would: exit 128+n, nothing on stderr, nothing claimed."""
    chunks(cli, 6)
    script(tmp_path, "work.sh", JUDGE + "sleep 0.2")
    for _ in range(20):  # until the workers are caught before their handlers are set
        cli.ok("dml", "delete from datastatus where jobid = 'work'")
        runjob = start_runjob(cli, *SPREAD)
        pids: list[int] = []
        while runjob.poll() is None and len(pids) < 2:
            pids = workers_of(runjob.pid)
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        if len(pids) == 2 and not any(_catches(pid, signal.SIGTERM) for pid in pids):
            break
        for pid in pids:
            os.kill(pid, signal.SIGCONT)
        runjob.communicate(timeout=60)
    else:
        pytest.skip("never caught the workers before their handlers were set")
    os.kill(runjob.pid, number)
    wait_for(lambda: all(_sigmask(pid, "SigPnd") or _sigmask(pid, "ShdPnd") for pid in pids))
    for pid in pids:
        os.kill(pid, signal.SIGCONT)
    out, err = runjob.communicate(timeout=60)
    assert (runjob.returncode, err) == (128 + number, ""), (out, err)
    assert "RUNNING" not in statuses(tmp_path, "work").values()


@on_postgres
@pytest.mark.slow
def test_a_worker_stopped_longer_than_the_bound_never_runs_a_chunk_twice(cli, tmp_path):
    """SIGSTOP of one worker for 2.5 times the liveness bound while it runs a long job
    and holds quick chunks claimed ahead, then SIGCONT; meanwhile its drain's other
    worker, other drains and ``recover`` go on: no chunk runs beside a live run of it,
    every chunk ends READY (a retry runs what was taken from the stopped worker)."""
    _bounded(cli)
    chunks(cli, 120)
    setting(cli, "retries", "2")
    script(tmp_path, "work.sh", JUDGE + "[ $((dataid % 40)) = 1 ] && sleep 20; sleep 0.02")
    runjob = start_runjob(cli, *SPREAD)
    wait_for(lambda: len(_lines(tmp_path / "ledger")) >= 12, what="the drain to be under way")
    pids = workers_of(runjob.pid)
    assert len(pids) == 2
    os.kill(pids[0], signal.SIGSTOP)
    others: list[subprocess.Popen] = []
    try:
        deadline = time.monotonic() + 2.5 * BOUND
        while time.monotonic() < deadline:
            # another drain and a recover at a time, waited for once the worker is woken:
            # a worker stopped between two statements it sent without waiting for their
            # answer holds their locks until a keeper's heartbeat ends its session, a
            # quarter of the bound later (PostgreSQL 11)
            if all(other.poll() is not None for other in others):
                others.append(start_runjob(cli, "--all", "--parallel", "2", "./work.sh"))
                others.append(start(cli, "utility", "recover"))
            time.sleep(0.5)
    finally:
        os.kill(pids[0], signal.SIGCONT)
    for other in others:
        assert "Traceback" not in other.communicate(timeout=120)[1]
    _, err = runjob.communicate(timeout=120)
    assert "Traceback" not in err and err.count("\n") <= 1, err

    def drained() -> bool:
        done = cli.runjob("--all", "--parallel", "4", "./work.sh")
        assert "Traceback" not in done.err, done
        return set(statuses(tmp_path, "work").values()) == {"READY"}

    wait_for(drained, timeout=120, what="every chunk READY")
    _no_overlap(tmp_path)


@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)
def test_kill_9_of_a_worker_on_sqlite_never_runs_a_chunk_twice(cli, tmp_path):
    """``--workers 2`` on SQLite: ``kill -9`` of one worker's group while its job runs;
    the job lives on and holds its chunk; a second drain runs the rest, never it; once
    the job ends its chunk is recovered and run again (retries 1)."""
    runjob, pids = _four_held(cli, tmp_path)
    os.killpg(pids[0], signal.SIGKILL)
    (tmp_path / "hold").unlink()
    (tmp_path / "go").touch()  # the other worker's jobs end, and the drain with them
    _, err = runjob.communicate(timeout=60)
    assert runjob.returncode == 1, err
    assert err.count("\n") == 1 and "was killed by SIGKILL" in err, err

    def drained() -> bool:
        done = cli.runjob(*SPREAD)
        assert "Traceback" not in done.err, done
        return set(statuses(tmp_path, "work").values()) == {"READY"}

    wait_for(drained, timeout=60, what="every chunk READY")
    ran = _no_overlap(tmp_path)
    assert len(ran) <= 8 + 2 and set(ran) == {str(n) for n in range(1, 9)}


@on_postgres
@pytest.mark.slow  # a stopped holder is seen within a quarter of the bound
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGSTOP])
def test_the_holder_of_a_drains_workers_killed_or_stopped_fences_their_runs(cli, tmp_path, how):
    """The host's lease holder, which the drain's workers share, killed (or stopped) while
    their jobs run: the jobs are killed before anyone may take their chunks, RunJob ends
    in one line; a later drain runs what is left, never beside a live run."""
    _bounded(cli)
    chunks(cli, 16)
    setting(cli, "retries", "1")
    script(tmp_path, "work.sh", JUDGE + "sleep 2")
    runjob = start_runjob(cli, *SPREAD)
    wait_for(lambda: len(_lines(tmp_path / "ledger")) >= 4, what="four jobs to start")
    assert workers_of(runjob.pid)
    keeper = holder_of(cli.env["DATAFLOW_STATE"])
    assert keeper is not None
    os.kill(keeper, how)
    try:
        out, err = runjob.communicate(timeout=120)
    finally:
        if how == signal.SIGSTOP:  # (unless a RunJob killed it, as it may)
            with contextlib.suppress(ProcessLookupError):
                os.kill(keeper, signal.SIGCONT)
    _said_once(err)
    assert runjob.returncode != 0, (out, err)

    def drained() -> bool:
        done = cli.runjob(*SPREAD)
        assert "Traceback" not in done.err, done
        return set(statuses(tmp_path, "work").values()) == {"READY"}

    wait_for(drained, timeout=120, what="every chunk READY")
    _no_overlap(tmp_path)


@on_postgres
@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGHUP])
def test_a_signal_mid_drain_reaches_every_workers_jobs_once(cli, tmp_path, number):
    """SIGINT or SIGHUP to RunJob mid-drain: each job under way gets it once, RunJob exits
    128+n with nothing on stderr, the jobs are recorded FAILED, nothing else claimed."""
    chunks(cli, 8)
    script(
        tmp_path,
        "work.sh",
        f"trap 'echo $dataid >> stopped; exit 9' {signal.Signals(number).name[3:]}\n"
        "echo $dataid >> starts; while :; do sleep 0.1; done",
    )
    runjob = start_runjob(cli, *SPREAD)
    wait_for(lambda: len(_lines(tmp_path / "starts")) == 4, what="four jobs to start")
    runjob.send_signal(number)
    _, err = runjob.communicate(timeout=60)
    assert (runjob.returncode, err) == (128 + number, "")
    assert sorted(_lines(tmp_path / "stopped")) == sorted(_lines(tmp_path / "starts"))
    assert sorted(statuses(tmp_path, "work").values()) == ["FAILED"] * 4


@on_postgres
@pytest.mark.long  # waits for every process to end, then for a later drain (> 10 s)
def test_sigterm_to_every_process_at_once_ends_in_one_line(cli, tmp_path):
    """SIGTERM to RunJob, its workers, their keepers and jobs at once (a service manager
    stopping the whole control group): RunJob exits 143, at most one line on stderr, no
    chunk left RUNNING once the processes are gone, and a later drain runs the rest."""
    _bounded(cli)
    chunks(cli, 12)
    setting(cli, "retries", "1")
    script(tmp_path, "work.sh", JUDGE + "sleep 3")
    runjob = start_runjob(cli, *SPREAD)
    wait_for(lambda: len(_lines(tmp_path / "ledger")) == 4, what="four jobs to start")
    everyone = [runjob.pid]
    for worker in workers_of(runjob.pid):
        everyone += [worker, *_children(worker)]
        everyone += [child for pid in _children(worker) for child in _children(pid)]
    for pid in everyone:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    _, err = runjob.communicate(timeout=60)
    _said_once(err)
    assert runjob.returncode == 128 + signal.SIGTERM, err
    wait_for(lambda: not any(alive(pid) for pid in everyone), what="every process to end")

    def drained() -> bool:
        done = cli.runjob(*SPREAD)
        assert "Traceback" not in done.err, done
        return set(statuses(tmp_path, "work").values()) == {"READY"}

    wait_for(drained, timeout=120, what="every chunk READY")
    _no_overlap(tmp_path)


@pytest.mark.long  # a spread drain, one of its workers signalled
@on_postgres
def test_sigterm_to_one_worker_is_said_as_what_it_is(cli, tmp_path):
    """SIGTERM to one worker alone (not RunJob): its jobs are stopped and recorded, the
    other worker drains on, RunJob exits 1 in one line that does not claim chunks were
    left RUNNING when none was."""
    chunks(cli, 12)
    script(tmp_path, "work.sh", JUDGE + "sleep 0.5")
    runjob = start_runjob(cli, *SPREAD)
    wait_for(lambda: len(_lines(tmp_path / "ledger")) >= 4, what="four jobs to start")
    os.kill(workers_of(runjob.pid)[0], signal.SIGTERM)
    out, err = runjob.communicate(timeout=60)
    _said_once(err)
    assert runjob.returncode == 1 and err, (out, err)
    found = statuses(tmp_path, "work")
    assert "RUNNING" not in found.values(), found
    assert "left RUNNING" not in err, err
    assert "a worker of the drain of work was stopped by SIGTERM (not RunJob)" in err


@on_postgres
@pytest.mark.slow
def test_runjob_stopped_longer_than_the_bound_stalls_its_workers_safely(cli, tmp_path):
    """RunJob stopped (SIGSTOP, as ^Z stops it alone: its workers are process groups of
    their own) for twice the bound while its workers drain quick chunks: they fill the
    event pipe and wait; another drain and ``recover`` meanwhile never run a chunk beside
    a live run; once RunJob goes on, every chunk ends READY, no traceback."""
    _bounded(cli)
    chunks(cli, 300)
    setting(cli, "retries", "2")
    script(tmp_path, "work.sh", JUDGE + "sleep 0.01")
    runjob = start_runjob(cli, *SPREAD)
    wait_for(lambda: len(_lines(tmp_path / "ledger")) >= 8, what="the drain to be under way")
    os.kill(runjob.pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + 2 * BOUND
        while time.monotonic() < deadline:
            other = cli.runjob("--all", "--parallel", "2", "--workers", "1", "./work.sh")
            assert "Traceback" not in other.err, other
            time.sleep(0.5)
    finally:
        os.kill(runjob.pid, signal.SIGCONT)
    _, err = runjob.communicate(timeout=300)
    assert "Traceback" not in err and err.count("\n") <= 1, err

    def drained() -> bool:
        done = cli.runjob(*SPREAD)
        assert "Traceback" not in done.err, done
        return set(statuses(tmp_path, "work").values()) == {"READY"}

    wait_for(drained, timeout=120, what="every chunk READY")
    _no_overlap(tmp_path)


@pytest.mark.both_stores
def test_kill_9_of_every_worker_never_runs_a_chunk_beside_its_helper(cli, tmp_path):
    """Jobs that leave a helper in a session of its own, every descriptor closed but the
    judge's (so not the chunk lock's; on SQLite a helper that keeps it), then end while
    their workers are killed (``kill -9``): nothing records them; a later drain never
    runs their chunks while the helpers live, and runs them again (retries) once they
    have ended."""
    _bounded(cli)
    chunks(cli, 4)
    setting(cli, "retries", "1")
    script(
        tmp_path,
        "work.sh",
        JUDGE + "if [ -e hold ]; then\n"
        "  setsid python3 -c 'import os, time\n"
        "os.closerange(3, 9); os.closerange(10, 65536)\n"
        'while not os.path.exists("go"): time.sleep(0.1)\' </dev/null >/dev/null 2>&1 &\n'
        '  echo "$dataid $!" >> helpers\n'
        "  until [ -e end ]; do sleep 0.1; done\n"
        "fi",
    )
    (tmp_path / "hold").touch()
    runjob = start_runjob(cli, *SPREAD)
    wait_for(lambda: len(_lines(tmp_path / "helpers")) == 4, what="four helpers")
    for pid in workers_of(runjob.pid):
        os.killpg(pid, signal.SIGKILL)
    runjob.communicate(timeout=60)
    (tmp_path / "hold").unlink()
    (tmp_path / "end").touch()  # the jobs end; their helpers live on
    helpers = [int(line.split()[1]) for line in _lines(tmp_path / "helpers")]
    for _ in range(3):
        again = cli.runjob(*SPREAD)
        assert "Traceback" not in again.err, again
        assert "RUNNING" in statuses(tmp_path, "work").values() or not all(map(alive, helpers))
    assert len(_no_overlap(tmp_path)) == 4  # nothing ran again beside a helper
    (tmp_path / "go").touch()
    wait_for(lambda: not any(alive(pid) for pid in helpers), what="the helpers to end")

    def drained() -> bool:
        done = cli.runjob(*SPREAD)
        assert "Traceback" not in done.err, done
        return set(statuses(tmp_path, "work").values()) == {"READY"}

    wait_for(drained, timeout=120, what="every chunk READY")
    assert sorted(_no_overlap(tmp_path)) == sorted(["1", "2", "3", "4"] * 2)


@on_postgres
def test_a_worker_whose_runjob_died_as_it_started_claims_nothing(cli, tmp_path):
    """RunJob killed (``kill -9``) while its workers are still starting (frozen here
    before they have looked who their parent is): they claim nothing, as a worker whose
    RunJob is gone later claims nothing more."""
    chunks(cli, 12)
    script(tmp_path, "work.sh", JUDGE + "sleep 0.1")
    for _ in range(20):  # until the workers are caught before their handlers are set
        cli.ok("dml", "delete from datastatus where jobid = 'work'")
        (tmp_path / "ledger").unlink(missing_ok=True)  # (a try they were not caught in ran)
        runjob = start_runjob(cli, *SPREAD)
        pids: list[int] = []
        while runjob.poll() is None and len(pids) < 2:
            pids = workers_of(runjob.pid)
        with _frozen(pids):
            if len(pids) == 2 and not any(_catches(pid, signal.SIGTERM) for pid in pids):
                os.kill(runjob.pid, signal.SIGKILL)
                runjob.wait(timeout=60)  # its output pipes: the workers' too
                break
        runjob.communicate(timeout=60)
    else:
        pytest.skip("never caught the workers before their handlers were set")
    wait_for(lambda: not any(alive(pid) for pid in pids), timeout=60, what="the workers to end")
    runjob.communicate(timeout=60)
    assert _lines(tmp_path / "ledger") == []
    assert statuses(tmp_path, "work") == {}
