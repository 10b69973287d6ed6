"""One lease holder per host and store, shared by every RunJob of the host.

Several RunJobs of one simulated host (the same DATAFLOW_HOST and DATAFLOW_STATE) run at
once on a real PostgreSQL store; the holder they share is killed, stopped, or loses its
session, and the chunks must still never run twice. As in test_lease, the job is the
judge: it appends its dataid to a ledger and holds a ``flock`` per chunk, so that a second
run of a chunk beside a live process of the first writes ``OVERLAP`` into the ledger.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
from pathlib import Path

import psycopg
import pytest

from dataflow.run.claim import liveness
from dataflow.run.lease import keeper
from dataflow.store import open_store
from support import (
    ADDRESSES,
    BOUND,
    rows,
    script,
    start_runjob,
    statuses,
    two_hosts,
    wait_for,
    written,
)
from support.hosts import (
    Proxy,
    _one_job,
    alive,
    holder_of,
    holder_sessions,
    keeper_backends,
    processes_of,
)

CHUNKS = 3
JOB = """
exec 9>>"flock.$dataid"
flock -n 9 || echo "OVERLAP $dataid" >> ledger
echo "$dataid $$" >> ledger
echo $$ > "job.$dataid.pid"
until [ -e go ]; do sleep 0.1; done
"""
RETRY = "insert into job (jobid, itemtype, itemvalue) values ('work', 'retries', '1')"


def _ledger(tmp_path: Path) -> list[str]:
    path = tmp_path / "ledger"
    return path.read_text().splitlines() if path.exists() else []


def _overlaps(tmp_path: Path) -> list[str]:
    return [line for line in _ledger(tmp_path) if "OVERLAP" in line]


def _running(host, tmp_path: Path, chunks: int = CHUNKS):
    """``chunks`` RunJobs of host ``host`` at once, RunJob n running chunk n of ``work``
    until ``go``; the RunJobs and their jobs' pids."""
    runners, jobs = [], []
    for n in range(1, chunks + 1):
        runners.append(start_runjob(host, "./work.sh"))
        file = tmp_path / f"job.{n}.pid"
        wait_for(lambda f=file: written(f), what=f"job {n} to start")
        jobs.append(int(file.read_text()))
    return runners, jobs


def _holder(host) -> int:
    state = host.env["DATAFLOW_STATE"]
    wait_for(lambda: holder_of(state), what="the lease holder")
    found = holder_of(state)
    assert found is not None
    return found


def _removed(group: str) -> bool:
    try:
        os.rmdir(group)
    except OSError:
        return False
    return True


def _finished(runners) -> list[int]:
    return [runner.wait(timeout=60) for runner in runners]


@pytest.mark.long
def test_a_hosts_runjobs_share_one_lease_session_and_it_ends_when_idle(hosts, tmp_path):
    """Three RunJobs of host A at once and one of host B: the server sees one lease
    session of each host (its application_name names the host), holding every run lock of
    its host's runs; each chunk runs once. Idle, each host's holder ends, its session and
    its socket with it."""
    a, b = hosts
    for host in (a, b):
        host.env["DATAFLOW_HOLDER_IDLE"] = "1"
    _one_job(a, tmp_path, JOB, chunks=CHUNKS + 1)
    runners, _ = _running(a, tmp_path)
    other = start_runjob(b, "./work.sh")
    wait_for(lambda: written(tmp_path / f"job.{CHUNKS + 1}.pid"), what="host B's job")
    try:
        (session,) = holder_sessions(a.address, "hostA")
        assert len(holder_sessions(a.address, "hostB")) == 1
        assert session in keeper_backends(a.address)
        with psycopg.connect(a.address, autocommit=True) as conn:
            locks = conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1"
                " AND granted AND pid = %s",
                (session,),
            ).fetchone()
        assert locks == (CHUNKS,)  # every run of host A, in its one session
        assert holder_of(a.env["DATAFLOW_STATE"]) != holder_of(b.env["DATAFLOW_STATE"])
    finally:
        (tmp_path / "go").touch()
    assert _finished([*runners, other]) == [0] * (CHUNKS + 1)
    assert sorted(line.split()[0] for line in _ledger(tmp_path)) == [
        str(n) for n in range(1, CHUNKS + 2)
    ]
    assert statuses(tmp_path, "work") == {str(n): "READY" for n in range(1, CHUNKS + 2)}
    for host in (a, b):
        wait_for(lambda h=host: holder_of(h.env["DATAFLOW_STATE"]) is None, what="idle end")
        assert not list(Path(host.env["DATAFLOW_STATE"]).glob("*-holder-*.sock"))
    wait_for(lambda: not holder_sessions(a.address), what="the holders' sessions to end")


@pytest.mark.slow
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGSTOP], ids=["killed", "stopped"])
def test_a_shared_holder_killed_or_stopped_fences_every_runjobs_runs(hosts, tmp_path, how):
    """The holder of three runs killed (``kill -9``) or stopped (SIGSTOP), after the
    RunJob of one of them was killed (its job lives on, its lease the holder's alone):
    every process of every run it held dies within the bound, before host B may take a
    chunk (a stopped holder does not answer its RunJobs' pings within a quarter of the
    bound: they kill it, and every run it listed); host B then runs each chunk again,
    never beside the first run."""
    a, b = hosts
    _one_job(a, tmp_path, JOB, chunks=CHUNKS)
    a.ok("dml", RETRY)
    runners, jobs = _running(a, tmp_path)
    runners[0].kill()  # its job is an orphan now, held by the holder alone
    runners[0].wait(timeout=10)
    assert alive(jobs[0])
    holder = _holder(a)
    os.kill(holder, how)
    try:
        wait_for(lambda: not any(map(alive, jobs)), timeout=BOUND, what="the fence")
        assert all(code != 0 for code in _finished(runners))
    finally:
        with contextlib.suppress(ProcessLookupError):  # its RunJobs killed it already
            os.kill(holder, signal.SIGKILL)
    assert not alive(holder)
    assert statuses(tmp_path, "work") == {"1": "RUNNING", "2": "FAILED", "3": "FAILED"}
    if how == signal.SIGKILL:  # each RunJob saw its holder gone: the fenced run's lease
        held = "select count(*) from run where status = 'FAILED' and seen is not null"
        assert rows(tmp_path, held) == [(0,)]  # is released now, not after the bound
    (tmp_path / "go").touch()
    wait_for(lambda: "1 abandoned" in b.ok("recover").out, timeout=BOUND * 3, what="recovery")

    def all_run_again() -> bool:  # cron's ticks on host B (a lease may be left to lapse)
        assert b.runjob("--all", "./work.sh").code == 0
        return set(statuses(tmp_path, "work").values()) == {"READY"}

    wait_for(all_run_again, timeout=BOUND * 3, what="host B to run every chunk again")
    assert not _overlaps(tmp_path)
    assert sorted(line.split()[0] for line in _ledger(tmp_path)) == sorted(
        [str(n) for n in range(1, CHUNKS + 1)] * 2
    )


@pytest.mark.slow
def test_a_shared_holder_whose_session_is_ended_takes_its_locks_again(hosts, tmp_path):
    """``pg_terminate_backend`` of the lease session of a host running three RunJobs: the
    holder reconnects and takes every run lock again; host B never takes a chunk; every
    run finishes READY, once."""
    a, b = hosts
    _one_job(a, tmp_path, JOB, chunks=CHUNKS)
    runners, jobs = _running(a, tmp_path)
    holder = _holder(a)
    (session,) = holder_sessions(a.address, "hostA")
    with psycopg.connect(a.address, autocommit=True) as conn:  # the store's own role may
        conn.execute("SELECT pg_terminate_backend(%s)", (session,))

    def again() -> bool:
        found = holder_sessions(a.address, "hostA")
        return len(found) == 1 and found[0] != session and found[0] in keeper_backends(a.address)

    wait_for(again, what="the holder to take its locks again")
    result = b.runjob("./work.sh")
    assert result.code == 0 and "no suitable data" in result.out, result
    assert all(map(alive, jobs)) and holder_of(a.env["DATAFLOW_STATE"]) == holder
    (tmp_path / "go").touch()
    assert _finished(runners) == [0] * CHUNKS
    assert sorted(_ledger(tmp_path)) == sorted(f"{n} {jobs[n - 1]}" for n in range(1, CHUNKS + 1))
    assert statuses(tmp_path, "work") == {str(n): "READY" for n in range(1, CHUNKS + 1)}


@pytest.mark.slow
def test_a_runjob_killed_mid_run_leaves_its_run_held_while_its_job_lives(hosts, tmp_path):
    """One of two RunJobs of host A is killed (``kill -9``) while its job runs: the host's
    holder keeps that run's lease (host B does not take the chunk for longer than the
    bound) and the other RunJob's; once the job ends, the lease ends and host B takes the
    chunk again (retries), never beside the first run."""
    a, b = hosts
    _one_job(a, tmp_path, JOB, chunks=2)
    a.ok("dml", RETRY)
    runners, jobs = _running(a, tmp_path, chunks=2)
    holder = _holder(a)
    runners[0].kill()
    runners[0].wait(timeout=10)
    deadline = time.monotonic() + BOUND * 1.5  # longer than the bound: renewed
    while time.monotonic() < deadline:
        result = b.runjob("./work.sh")
        assert result.code == 0 and "no suitable data" in result.out, result
        time.sleep(0.5)
    assert all(map(alive, jobs)) and holder_of(a.env["DATAFLOW_STATE"]) == holder
    (tmp_path / "go").touch()
    assert runners[1].wait(timeout=60) == 0
    wait_for(lambda: not alive(jobs[0]), what="the orphaned job to end")
    query = "select count(*) from run where seen is not null"
    wait_for(lambda: rows(tmp_path, query) == [(0,)], what="the lease to end")
    b.ok("recover")
    assert b.runjob("--all", "./work.sh").code == 0
    assert not _overlaps(tmp_path)
    assert statuses(tmp_path, "work") == {"1": "READY", "2": "READY"}


@pytest.mark.long
def test_a_stopped_idle_holder_is_replaced_by_the_next_runjob(hosts, tmp_path):
    """The host's holder, idle, is stopped (SIGSTOP): the next RunJob, not greeted within
    a quarter of the bound, kills it and starts another, and runs its chunk."""
    a, _ = hosts
    a.env["DATAFLOW_HOLDER_IDLE"] = "600"
    _one_job(a, tmp_path, 'echo "$dataid $$" >> ledger', chunks=2)
    assert a.runjob("./work.sh").code == 0
    stopped = _holder(a)
    os.kill(stopped, signal.SIGSTOP)
    try:
        result = a.runjob("./work.sh")
        assert result.code == 0, result
        assert not alive(stopped)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(stopped, signal.SIGKILL)
    replaced = _holder(a)
    assert replaced != stopped
    assert statuses(tmp_path, "work") == {"1": "READY", "2": "READY"}
    os.kill(replaced, signal.SIGKILL)  # (not left for the test's ten minutes)


@pytest.mark.slow
def test_the_next_holder_fences_the_runs_a_killed_holder_held_alone(hosts, tmp_path):
    """The holder is killed while it holds only the run of a RunJob killed before it (no
    RunJob it serves lives to fence that run): the next holder started on the host kills
    every process of the runs its predecessor listed, as it starts."""
    a, _ = hosts
    _one_job(a, tmp_path, JOB, chunks=2)
    runners, jobs = _running(a, tmp_path, chunks=1)
    runners[0].kill()
    runners[0].wait(timeout=10)
    holder = _holder(a)
    os.kill(holder, signal.SIGKILL)
    wait_for(lambda: not alive(holder), what="the holder to die")
    assert alive(jobs[0])  # nobody it served lives to fence it
    runner = start_runjob(a, "./work.sh")  # chunk 2: starts the next holder
    try:
        wait_for(lambda: not alive(jobs[0]), timeout=BOUND, what="the orphan fenced")
        wait_for(lambda: written(tmp_path / "job.2.pid"), what="chunk 2's job")
        assert _holder(a) != holder
    finally:
        (tmp_path / "go").touch()
    assert runner.wait(timeout=60) == 0
    assert not _overlaps(tmp_path)


@pytest.mark.long
def test_a_holder_short_of_threads_refuses_every_connection_at_once(hosts, tmp_path, monkeypatch):
    """The host's holder, idle, in a cgroup of no more tasks than it has: it cannot start
    a thread for a client, and says so (a '!' greeting) as it closes. The client may send
    its kind after that close (a broken pipe): the refusal is read all the same, each time
    (it was taken for a holder that is ending, and another holder was started beside it,
    waiting out the lock of the living one)."""
    from dataflow.run.lease import holdersocket
    from dataflow.store import open_store

    a, _ = hosts
    a.env["DATAFLOW_HOLDER_IDLE"] = "600"
    _one_job(a, tmp_path, 'echo "$dataid" >> ledger')
    assert a.runjob("./work.sh").code == 0
    holder = _holder(a)
    group = f"/sys/fs/cgroup/pids/holder-{os.getpid()}"
    try:
        os.mkdir(group)
    except OSError as exc:
        os.kill(holder, signal.SIGKILL)
        pytest.skip(f"no pids cgroup here: {exc}")
    outcomes: dict[str, int] = {}
    try:
        with open(f"{group}/cgroup.procs", "w") as procs:
            procs.write(str(holder))
        with open(f"{group}/pids.current") as current, open(f"{group}/pids.max", "w") as cap:
            cap.write(current.read().strip())
        for name, value in a.env.items():
            if name.startswith("DATAFLOW_"):
                monkeypatch.setenv(name, value)
        with open_store(a.address) as store:
            place = holdersocket.Place(store)
            for _ in range(300):
                try:
                    found = holdersocket.connect(place, "requests")
                except holdersocket.Refused as exc:
                    assert "could not start a thread" in str(exc), exc
                    said = "refused"
                else:
                    said = "served" if found else "taken for an ending holder"
                    if found:
                        found[0].close()
                outcomes[said] = outcomes.get(said, 0) + 1
    finally:
        os.kill(holder, signal.SIGKILL)
        wait_for(lambda: not alive(holder), what="the holder to die")
        wait_for(lambda: _removed(group), what="the holder's cgroup to empty")
    assert outcomes == {"refused": 300}


@pytest.mark.long
@pytest.mark.parametrize("work", ["candidates", "clock", "recovered"])
def test_a_holder_slow_to_start_never_leaves_a_claim_idle_inside_its_transaction(
    tmp_path, pg_server, pg_store, work
):
    """No holder lives on host B; its session takes longer to connect than a session of
    ours may idle inside a transaction (a quarter of the bound). B's claim never waits
    for it inside its transaction (the server would end it: a warning, and the claim
    tried again), whether RunJob found candidates before its claim or its claim finds
    work RunJob could not count: the current period of a job run by a clock (no
    candidate row), a chunk of a dead run recovered and retried by the claim itself."""
    proxy = Proxy(pg_server.port)
    a, b = two_hosts(tmp_path, pg_store, BOUND)
    ADDRESSES[tmp_path] = pg_store
    try:
        b.env["DATAFLOW_HOLDER_IDLE"] = "1"
        if work == "clock":
            b.ok("createtables")
            b.ok("register-dataset", "dst")
            b.ok("register-job", "work", "--in", "this_hour", "--out", "dst")
            script(tmp_path, "work.sh", 'echo "$dataid" >> ledger')
        else:
            _one_job(
                b, tmp_path, 'echo "$dataid" >> ledger; [ "$DATAFLOW_HOST" = hostB ] || sleep 300'
            )
        if work == "recovered":  # host A dies running chunk 1, which has a retry left
            b.ok("dml", RETRY)
            runner = start_runjob(a, "./work.sh")
            wait_for(lambda: _ledger(tmp_path), what="host A's job")
            for pid in processes_of(a.env):
                os.kill(pid, signal.SIGKILL)
            runner.wait(timeout=10)
            time.sleep(BOUND + 1)  # its lease lapsed
        b.env["DATAFLOW_DB"] = pg_store.replace(f":{pg_server.port}/", f":{proxy.port}/")
        proxy.delay = BOUND / 4 + 0.7  # (the connect timeout is half the bound)
        done = b.runjob("./work.sh")
        assert done.code == 0 and done.err == "", done
        assert set(statuses(tmp_path, "work").values()) == {"READY"}
        # the claim tried again once the holder was reached is the same claim: its run's
        # history row has the command, as any other's
        ran = json.loads(b.ok("--json", "history", "work").out)
        assert {run["command"] for run in ran if run["host"] == "hostB"} == {"./work.sh"}
    finally:
        proxy.close()
        ADDRESSES.pop(tmp_path, None)


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
def test_runjob_reaches_the_holder_before_its_claim_only_when_work_is_likely(chain, address):
    """While RunJob gets ready to claim (liveness.prepare), it reaches this host's lease
    holder if its job has candidates, so that the claim finds the holder up; for a job
    with none (most cron ticks) it starts no holder."""
    chain.ok("register-dataset", "out")
    chain.ok("register-job", "idle", "--in", "dst", "--out", "out")  # dst has no chunk
    store = open_store(address)
    try:
        liveness.prepare(store, "idle")
        assert keeper.current(store) is None
        liveness.prepare(store, "work")
        assert keeper.current(store) is not None
    finally:
        store.close()
        keeper.close_all()


def test_a_holder_reconnected_for_a_request_heartbeats_first_and_takes_its_run_locks_at_once(
    pg_store,
):
    """In the holder's own process: its session ended, a request reconnects it (as
    serve_requests does); the new session renews the heartbeats before it holds a run
    lock, and whatever the request (a watch asks nothing of the store) the run locks it
    held are taken again at once, not at the next heartbeat."""
    from dataflow.run.lease.holder import State, _request, word

    state = State(pg_store)
    state.connect()
    try:
        chunk = f"{word('work')} {word('1')}"
        assert _request(state, f"hold {chunk}") == "1"
        (first,) = keeper_backends(pg_store)
        with psycopg.connect(pg_store, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(%s)", (first,))
        wait_for(lambda: first not in keeper_backends(pg_store), what="the session ended")
        with pytest.raises(psycopg.Error):
            _request(state, f"hold {word('work')} {word('2')}")
        state.lost(ConnectionError("ended"))
        state.connect()
        assert keeper_backends(pg_store) == []  # heartbeaten, no run lock yet
        assert state.missing == {("work", "1")}
        assert _request(state, f"watch {chunk} 7 token 0") is None
        assert len(keeper_backends(pg_store)) == 1 and not state.missing
    finally:
        state.lost(ConnectionError("done"))
