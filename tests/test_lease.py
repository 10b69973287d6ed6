"""Never twice, whatever is killed, paused or cut: a run's lease against an adversary.

Each test is one way a chunk was once started again while a process of its previous run
still lived. The job is the judge: it appends its dataid to a ledger and takes a
non-blocking ``flock`` on a per-chunk file that it hands to its children, so a second
run beside a live process of the first writes ``OVERLAP`` into the ledger.

On PostgreSQL two hosts share the store (their own ``DATAFLOW_STATE`` and
``DATAFLOW_HOST``); on SQLite, whose store one host holds, the second "host" is another
RunJob of the same one.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataflow.run.lease.holder import TICK_S, reconnect_wait
from support import (
    ADDRESSES,
    BOUND,
    Cli,
    _admin,
    rows,
    start_runjob,
    statuses,
    wait_for,
    write,
)
from support.hosts import _one_job, alive, keeper_backends
from support.lease import HELPER, JOB, RETRY, WAIT_GO, _holder_of, _ledger, _pid


def _never_taken(host, seconds: float) -> None:
    """For ``seconds``, the other host neither recovers the chunk nor starts it."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert "1 abandoned" not in host.ok("recover").out
        result = host.runjob("./work.sh")
        assert result.code == 0 and "no suitable data" in result.out, result
        time.sleep(0.5)


def _let_go(tmp_path) -> None:
    """Wait until no lease is held on a shared store (a keeper lets a chunk go within a
    tick of its last process's end; on SQLite the lock is the process itself)."""
    if isinstance(ADDRESSES.get(tmp_path), str):
        query = "select count(*) from run where seen is not null"
        wait_for(lambda: rows(tmp_path, query) == [(0,)], what="the lease to end")


def _attempts(tmp_path) -> int:
    return rows(tmp_path, "select count(*) from run where jobid='work'")[0][0]


@pytest.mark.both_stores
@pytest.mark.slow
def test_kill_9_of_runjobs_whole_process_group_leaves_the_lease_with_the_live_job(pair, tmp_path):
    """Fault 1: ``kill -9 -- -<RunJob's group>`` took the keeper with RunJob; the job,
    in its own group, lived on with no lease and host B started the chunk at once."""
    a, b = pair
    _one_job(a, tmp_path, JOB + WAIT_GO)
    a.ok("dml", RETRY)
    runner = start_runjob(a, "./work.sh", start_new_session=True)
    job = _pid(tmp_path, "job.pid")
    os.killpg(runner.pid, signal.SIGKILL)
    runner.wait(timeout=10)
    assert alive(job)
    _never_taken(b, BOUND * 1.5)  # longer than the bound: the lease is renewed
    assert alive(job)
    (tmp_path / "go").touch()
    wait_for(lambda: not alive(job), what="the job to end")
    wait_for(lambda: "1 abandoned" in b.ok("recover").out, timeout=BOUND * 3, what="recovery")
    assert b.runjob("./work.sh").code == 0  # the retry, now that nothing of run 1 lives
    assert [line.split()[0] for line in _ledger(tmp_path)] == ["1", "1"]  # no OVERLAP
    assert _attempts(tmp_path) == 2


@pytest.mark.slow
def test_a_session_ended_by_the_server_is_not_proof_of_death(hosts, tmp_path):
    """Fault 2: ``pg_terminate_backend`` of the keeper's session (the store's own role may
    do it) freed the run lock; host B reclaimed while the job ran to its end."""
    a, b = hosts
    _one_job(a, tmp_path, JOB + WAIT_GO)
    runner = start_runjob(a, "./work.sh")
    job = _pid(tmp_path, "job.pid")
    wait_for(lambda: keeper_backends(a.address), what="the run lock")
    (backend,) = keeper_backends(a.address)
    import psycopg

    with psycopg.connect(a.address, autocommit=True) as conn:  # the store's own role may
        conn.execute("SELECT pg_terminate_backend(%s)", (backend,))
    _never_taken(b, BOUND * 1.5)
    wait_for(lambda: keeper_backends(a.address), what="the keeper to take its lock again")
    assert alive(job)
    (tmp_path / "go").touch()
    assert runner.wait(timeout=60) == 0, runner.stderr.read()
    assert rows(tmp_path, "select status from run where jobid='work'") == [("READY",)]
    assert _ledger(tmp_path) == [f"1 {job}"]


@pytest.mark.slow
def test_a_stopped_keeper_fences_its_runs_before_another_host_may_take_them(hosts, tmp_path):
    """Fault 3: a keeper stopped (SIGSTOP, or starved) let its session lapse while RunJob
    waited; host B reclaimed the chunk while host A's job ran. RunJob now pings its keeper
    and kills every process of its runs when it does not answer."""
    a, b = hosts
    _one_job(a, tmp_path, JOB + HELPER + "\n" + WAIT_GO)
    runner = start_runjob(a, "./work.sh")
    job, helper = _pid(tmp_path, "job.pid"), _pid(tmp_path, "helper.pid")
    keeper = _holder_of(runner)
    os.kill(keeper, signal.SIGSTOP)
    try:
        # every process of the run dies before host B may take the chunk (the bound)
        wait_for(lambda: not alive(job) and not alive(helper), timeout=BOUND, what="the fence")
        assert runner.wait(timeout=60) != 0
    finally:
        with contextlib.suppress(ProcessLookupError):  # RunJob killed it already
            os.kill(keeper, signal.SIGKILL)
    assert not alive(keeper)
    assert _status_failed(tmp_path)  # RunJob, still alive, recorded its run
    (tmp_path / "go").touch()
    a.ok("resubmit", "work", "1")
    assert b.runjob("./work.sh").code == 0
    assert not [line for line in _ledger(tmp_path) if "OVERLAP" in line]


def _status_failed(tmp_path) -> bool:
    return rows(
        tmp_path, "select status from datastatus where jobid='work' and locktype='OUT'"
    ) == [("FAILED",)]


# a process of ours inside a transaction of the store (DATAFLOW_DB) that writes the rows of
# the runs it is given (as a finish does), or takes chunk $TURN's turn (as a finish does
# first) or job $JOB_TURN's (as a claim under max_parallel does first), or locks job
# $CANDIDATES's candidates with their chunks' turns (as a claim does), then stops itself
# there; woken, it says how the transaction ended (a failure: whether it is one that
# passes). $PIPELINE: in psycopg's pipeline mode, stopped after sending its statements
# and before their Sync
STOPPED_INSIDE = """
import os, signal, sys
from dataflow.store import open_store
from dataflow.store.address import locate
store = open_store(locate())
try:
    with store.transaction(**({"pipeline": True} if os.environ.get("PIPELINE") else {})):
        if os.environ.get("TURN"):
            store.chunk_turn(os.environ["TURN"], wait=True)
        elif os.environ.get("JOB_TURN"):
            store.job_turn(os.environ["JOB_TURN"])
        elif os.environ.get("CANDIDATES"):
            store.conn.execute(store.q.candidates, (os.environ["CANDIDATES"], 10))
        else:
            store.note_runs([int(runid) for runid in sys.argv[1:]], "a note")
        print("held", flush=True)
        os.kill(os.getpid(), signal.SIGSTOP)
except Exception as exc:
    print("passing" if store.passing(exc) else repr(exc))
else:
    print("committed")
"""


def _stopped_inside(
    host, *runids: int, pipeline: bool = False, turn="", job_turn="", candidates=""
) -> subprocess.Popen:
    """:data:`STOPPED_INSIDE`, started and stopped inside its transaction."""
    held = {"TURN": turn, "JOB_TURN": job_turn, "CANDIDATES": candidates}
    held.update({"PIPELINE": "1"} if pipeline else {})
    inside = subprocess.Popen(
        [sys.executable, "-c", STOPPED_INSIDE, *map(str, runids)],
        env={**host.env, **held},
        stdout=subprocess.PIPE,
        text=True,
    )
    assert inside.stdout.readline() == "held\n"
    return inside


@pytest.mark.slow
@pytest.mark.parametrize(
    "pipeline", [False, True], ids=["after its statements", "before their Sync"]
)
def test_a_process_stopped_inside_a_transaction_holds_no_run_up(hosts, tmp_path, pipeline):
    """Fault 9: a worker stopped (SIGSTOP) inside its finish's transaction held a run's row;
    the live run's keeper waited behind it to renew the lease, and so, in a queue behind
    the keeper, did every claim. The server now ends a session of ours that idles inside
    a transaction for a quarter of the bound: the run lives on, leased, and ends READY;
    the stopped process, woken, fails in a way that passes (its transaction undone)."""
    a, b = hosts
    _one_job(a, tmp_path, JOB + WAIT_GO)
    runner = start_runjob(a, "./work.sh")
    job = _pid(tmp_path, "job.pid")
    [(runid,)] = rows(tmp_path, "select runid from run where jobid='work'")
    inside = _stopped_inside(a, runid, pipeline=pipeline)
    try:
        _never_taken(b, BOUND * 1.5)  # longer than the bound: the lease is renewed
        assert alive(job)
    finally:
        os.kill(inside.pid, signal.SIGCONT)
    assert inside.communicate(timeout=60)[0] == "passing\n"
    (tmp_path / "go").touch()
    assert runner.wait(timeout=60) == 0, runner.stderr.read()
    assert rows(tmp_path, "select status, reason from run where jobid='work'") == [("READY", None)]
    assert _ledger(tmp_path) == [f"1 {job}"]


@pytest.mark.slow
def test_a_finish_never_waits_long_for_a_process_stopped_inside_a_pipeline(hosts, tmp_path):
    """A process stopped between sending a pipelined statement and its Sync holds what the
    statement took (here a chunk's turn), and the server never ends it (it is not idle in
    its transaction). A run's finish waited for that turn until the process woke, its own
    keeper heartbeating all along. A keeper's heartbeat now ends such a session once it
    has stalled for a quarter of the bound: the finish goes on while the process sleeps."""
    a, _ = hosts
    _one_job(a, tmp_path, JOB + WAIT_GO)
    runner = start_runjob(a, "./work.sh")
    job = _pid(tmp_path, "job.pid")
    inside = _stopped_inside(a, pipeline=True, turn="1")
    try:
        (tmp_path / "go").touch()
        wait_for(lambda: not alive(job), what="the job to end")
        assert runner.wait(timeout=BOUND * 2) == 0, runner.stderr.read()
        assert statuses(tmp_path, "work") == {"1": "READY"}
    finally:
        os.kill(inside.pid, signal.SIGCONT)
    assert inside.communicate(timeout=60)[0] == "passing\n"
    assert _ledger(tmp_path) == [f"1 {job}"]


@pytest.mark.slow
def test_a_claim_never_waits_long_for_a_process_stopped_inside_a_pipeline(hosts, tmp_path):
    """The same with no run alive on the store: a claim under ``max_parallel`` waits for
    the job's turn, which the stopped process took. The keeper its RunJob starts on
    finding work ends that session once it has stalled for a quarter of the bound."""
    a, _ = hosts
    _one_job(a, tmp_path, JOB)
    a.ok("dml", "insert into job (jobid, itemtype, itemvalue) values ('work', 'max_parallel', '1')")
    inside = _stopped_inside(a, pipeline=True, job_turn="work")
    try:
        assert a.runjob("./work.sh").code == 0
        assert statuses(tmp_path, "work") == {"1": "READY"}
    finally:
        os.kill(inside.pid, signal.SIGCONT)
    assert inside.communicate(timeout=60)[0] == "passing\n"


@pytest.mark.slow
def test_an_idle_claim_never_waits_long_for_a_process_stopped_inside_a_pipeline(hosts, tmp_path):
    """The same for a cron tick of a job with nothing to do (found by sweep 20): its
    RunJob starts no keeper, yet its claim waits for the job's turn first, and every tick
    after it did too. A claim waits for the job's turn a quarter of the bound at most,
    then ends the sessions stalled that long and tries again."""
    a, _ = hosts
    _one_job(a, tmp_path, "true")
    a.ok("dml", "delete from datastatus where datasetid = 'src'")  # nothing to do
    a.ok("dml", "insert into job (jobid, itemtype, itemvalue) values ('work', 'max_parallel', '1')")
    inside = _stopped_inside(a, pipeline=True, job_turn="work")
    try:
        result = a.runjob("./work.sh", timeout=BOUND * 2)
        assert result.code == 0 and "no suitable data" in result.out, result
    finally:
        os.kill(inside.pid, signal.SIGCONT)
    assert inside.communicate(timeout=60)[0] == "passing\n"


@pytest.mark.slow
@pytest.mark.parametrize("pipeline", [False, True], ids=["idle", "before their Sync"])
def test_a_host_with_a_longer_bound_may_stall_for_a_quarter_of_its_own(hosts, tmp_path, pipeline):
    """Each host has its own bound, and its sessions may stall inside a transaction for a
    quarter of it. Host B (bound 60 s: 15 s) stopped 4 s before the Sync of its pipeline
    was ended by host A's keeper (bound 6 s) after 1.5 s (found by sweep 20): each session
    now says what it is allowed, and commits when it wakes, as it does when it idled."""
    a, b = hosts
    b.env["DATAFLOW_LIVENESS_TIMEOUT"] = "60"
    _one_job(a, tmp_path, JOB + WAIT_GO)
    runner = start_runjob(a, "./work.sh")  # a live run on host A: its keeper sweeps
    _pid(tmp_path, "job.pid")
    inside = _stopped_inside(b, pipeline=pipeline, turn="9")
    try:
        time.sleep(4)
    finally:
        os.kill(inside.pid, signal.SIGCONT)
        (tmp_path / "go").touch()
    assert inside.communicate(timeout=60)[0] == "committed\n"
    assert runner.wait(timeout=60) == 0


@pytest.mark.slow
@pytest.mark.xfail(
    strict=True,
    reason="the boundary: with no run alive and no RunJob that finds work starting, a "
    "process stopped inside a pipelined claim holds its candidates' chunk turns until it "
    "wakes, and a producer's offer at such a dataid waits for them (guarantees, PostgreSQL)",
)
def test_with_no_run_alive_a_producer_waits_for_a_claim_stopped_inside_a_pipeline(hosts, tmp_path):
    a, _ = hosts
    _one_job(a, tmp_path, "true")
    a.ok("dml", "insert into dataset (datasetid) values ('other'), ('out2')")
    a.ok(
        "dml",
        "insert into job (jobid,itemtype,datasetid) values ('next','IN','other'),"
        " ('next','OUT','out2')",
    )
    inside = _stopped_inside(a, pipeline=True, candidates="work")
    try:
        a.ok("ready", "other", "1", timeout=BOUND * 2)  # (it asserts the exit code)
    finally:
        os.kill(inside.pid, signal.SIGCONT)
    assert inside.communicate(timeout=60)[0] == "passing\n"


@pytest.mark.long  # waits while a writer is stopped
@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)
def test_on_sqlite_a_process_stopped_inside_a_transaction_holds_every_writer_back(cli, tmp_path):
    """The boundary: no server ends a stopped writer's transaction on SQLite. A RunJob
    waits for it, and runs its chunk once it wakes."""
    _one_job(cli, tmp_path, "true")
    inside = _stopped_inside(cli)
    try:
        runner = start_runjob(cli, "./work.sh")
        with pytest.raises(subprocess.TimeoutExpired):
            runner.wait(timeout=3)
        assert statuses(tmp_path, "work") == {}
    finally:
        os.kill(inside.pid, signal.SIGCONT)
    assert inside.communicate(timeout=60)[0] == "committed\n"
    assert runner.wait(timeout=60) == 0, runner.stderr.read()
    assert statuses(tmp_path, "work") == {"1": "READY"}


@pytest.mark.long
def test_a_keeper_killed_takes_every_process_of_its_runs_with_it(hosts, tmp_path):
    """Fault 4: when the keeper died, RunJob killed its runs' process groups only: a helper
    detached into its own session with its descriptors closed lived on without a lease."""
    a, b = hosts
    _one_job(a, tmp_path, JOB + HELPER + "\n" + WAIT_GO)
    runner = start_runjob(a, "./work.sh")
    job, helper = _pid(tmp_path, "job.pid"), _pid(tmp_path, "helper.pid")
    os.kill(_holder_of(runner), signal.SIGKILL)
    wait_for(lambda: not alive(job) and not alive(helper), timeout=BOUND, what="the fence")
    assert runner.wait(timeout=60) != 0
    assert _status_failed(tmp_path)  # RunJob, still alive, recorded its run
    # and, its holder gone, let the run's lease go itself: the chunk is free at once, not
    # once its last heartbeat is older than the bound
    assert rows(tmp_path, "select seen from run") == [(None,)]
    (tmp_path / "go").touch()
    a.ok("resubmit", "work", "1")
    assert b.runjob("./work.sh").code == 0
    assert not [line for line in _ledger(tmp_path) if "OVERLAP" in line]


@pytest.mark.both_stores
@pytest.mark.slow
def test_a_retry_waits_for_the_helper_its_failed_run_left(pair, tmp_path):
    """Fault 5: a drain with ``retries`` on PostgreSQL restarted a chunk whose failed run
    left a live helper: the keeper answered "taken" for a lock it still held itself."""
    a, _ = pair
    _one_job(a, tmp_path, JOB + HELPER + "\nexit 1")
    a.ok("dml", RETRY)
    drained = a.runjob("--all", "./work.sh")
    helper = _pid(tmp_path, "helper.pid")
    assert alive(helper)
    assert drained.code == 1 and _attempts(tmp_path) == 1, drained
    assert "no suitable data" in a.runjob("./work.sh").out
    (tmp_path / "go").touch()
    wait_for(lambda: not alive(helper), what="the helper to end")
    _let_go(tmp_path)
    (tmp_path / "helper.pid").unlink()
    (tmp_path / "go").unlink()
    retried = subprocess.Popen(
        ["bash", "-c", "sleep 1; touch go"], cwd=tmp_path
    )  # the retry's own helper ends soon
    assert a.runjob("./work.sh").code == 1  # the retry ran (and failed again, as written)
    retried.wait()
    assert _attempts(tmp_path) == 2
    assert not [line for line in _ledger(tmp_path) if "OVERLAP" in line]


@pytest.mark.both_stores
@pytest.mark.long
def test_purge_keeps_a_run_whose_helper_lives_and_tokens_are_never_reused(pair, tmp_path):
    """Fault 6: purge deleted the history row of a finished run whose detached helper still
    lived; liveness found the run's token through that row, so after a resubmit the chunk
    ran again beside the helper. And a run number freed by a delete came back."""
    a, _ = pair
    _one_job(a, tmp_path, JOB + HELPER)
    assert a.runjob("./work.sh").code == 0
    helper = _pid(tmp_path, "helper.pid")
    (first,) = rows(tmp_path, "select runid, token from run")
    a.ok("purge", "--days-old", "0")
    assert rows(tmp_path, "select runid, token from run") == [first]  # kept: it lives
    refused = a.utility("resubmit", "work", "1")  # names what lives: the helper
    assert refused.code == 2 and f"(pid {helper} on host hostA; its RunJob" in refused.err
    a.ok("endjob", "work", "1", "RESUBMIT", "--force")
    assert "no suitable data" in a.runjob("./work.sh").out
    (tmp_path / "go").touch()
    wait_for(lambda: not alive(helper), what="the helper to end")
    _let_go(tmp_path)
    a.ok("purge", "--days-old", "0")
    assert rows(tmp_path, "select runid, token from run") == [first]  # the chunk's last run
    a.ok("dml", "delete from run")
    (tmp_path / "helper.pid").unlink()
    assert a.runjob("./work.sh").code == 0
    (second,) = rows(tmp_path, "select runid, token from run")
    assert second[1] != first[1] and len(second[1]) == 32
    assert not [line for line in _ledger(tmp_path) if "OVERLAP" in line]


@pytest.mark.both_stores
@pytest.mark.long
def test_purge_keeps_a_run_whose_helper_lives_though_it_is_not_its_chunks_last(pair, tmp_path):
    """The run whose helper lives is not its chunk's last (a later attempt, written here by
    SQL): only its process keeps it from purge, which deletes it once the helper ended."""
    a, _ = pair
    _one_job(a, tmp_path, JOB + HELPER)
    assert a.runjob("./work.sh").code == 0
    helper = _pid(tmp_path, "helper.pid")
    (first,) = rows(tmp_path, "select runid from run")
    a.ok(
        "dml",
        "insert into run (jobid, dataid, attempt, status, started, ended) "
        "values ('work', '1', 2, 'FAILED', '2026-01-01 00:00:00', '2026-01-01 00:00:01')",
    )
    a.ok("purge", "--days-old", "0")
    assert first in rows(tmp_path, "select runid from run")  # kept: its helper lives
    (tmp_path / "go").touch()
    wait_for(lambda: not alive(helper), what="the helper to end")
    _let_go(tmp_path)
    a.ok("purge", "--days-old", "0")
    assert first not in rows(tmp_path, "select runid from run")


@pytest.mark.both_stores
@pytest.mark.long
def test_a_caller_reading_runjobs_output_never_waits_for_a_helper(pair, tmp_path):
    """Fault 9: the keeper kept RunJob's standard error, so ``out=$(RunJob ...)`` waited
    until a helper the job left had ended."""
    a, _ = pair
    _one_job(a, tmp_path, JOB + HELPER)
    done = subprocess.run(
        ["RunJob", "./work.sh"],
        cwd=tmp_path,
        env=a.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    helper = _pid(tmp_path, "helper.pid")
    assert alive(helper)  # RunJob's output ended while the helper lives on
    (tmp_path / "go").touch()
    wait_for(lambda: not alive(helper), what="the helper to end")


@pytest.mark.slow
def test_a_keeper_that_comes_back_after_its_lease_was_taken_fences_its_run(hosts, tmp_path):
    """RunJob and its keeper both stopped (as a frozen host is) past the bound: host B
    takes the chunk and revokes the lease; when they come back, the keeper's next
    heartbeat finds the lease gone and kills the run, and RunJob's finish is refused."""
    a, b = hosts
    _one_job(a, tmp_path, JOB + WAIT_GO)
    runner = start_runjob(a, "./work.sh")
    job = _pid(tmp_path, "job.pid")
    keeper = _holder_of(runner)
    for pid in (runner.pid, keeper):
        os.kill(pid, signal.SIGSTOP)
    try:
        wait_for(
            lambda: "1 abandoned" in b.ok("recover").out, timeout=BOUND * 4, what="the take-over"
        )
        assert alive(job)  # the boundary: a frozen host's job runs on until it wakes
    finally:
        for pid in (keeper, runner.pid):
            os.kill(pid, signal.SIGCONT)
    wait_for(lambda: not alive(job), timeout=BOUND, what="the fence after waking")
    assert runner.wait(timeout=60) != 0
    assert "was ended elsewhere while it ran" in runner.stderr.read()
    (run,) = rows(tmp_path, "select status, reason from run where jobid='work'")
    assert run == ("FAILED", "abandoned")


def _long_run(a, tmp_path) -> tuple[subprocess.Popen, int]:
    """Host A runs the job until ``go`` exists, under a bound of 120 s; RunJob, and the
    job's pid."""
    a.env["DATAFLOW_LIVENESS_TIMEOUT"] = "120"
    _one_job(a, tmp_path, JOB + WAIT_GO)
    runner = start_runjob(a, "./work.sh")
    return runner, _pid(tmp_path, "job.pid")


@contextlib.contextmanager
def _holder_stopped(runner, tmp_path):
    """RunJob's lease holder stopped (SIGSTOP: it renews nothing), and the run's heartbeat
    set an hour back by hand, older than any bound; the holder woken as the block ends,
    well within a quarter of the bound (RunJob's patience with a silent holder)."""
    holder = _holder_of(runner)
    os.kill(holder, signal.SIGSTOP)
    try:
        write(tmp_path, "update run set seen = now() - interval '1 hour'")
        yield
    finally:
        os.kill(holder, signal.SIGCONT)


@pytest.mark.slow
def test_a_run_whose_heartbeat_is_old_lives_while_its_holder_holds_its_run_lock(hosts, tmp_path):
    """A lease is the run lock *or* a fresh heartbeat: a run whose heartbeat is an hour old
    while its holder's session holds its run lock lives for every host. Host B's
    ``status`` counts it live, its recovery leaves it, its RunJob does not start it; woken,
    the holder renews the lease and the run ends READY, once."""
    a, b = hosts
    runner, job = _long_run(a, tmp_path)
    try:
        with _holder_stopped(runner, tmp_path):
            assert keeper_backends(a.address)  # the stopped holder's session holds the lock
            status = b.ok("status", "work").out
            assert f"1 (pid {runner.pid} on host hostA, last seen 36" in status, status
            assert "0 abandoned" in b.ok("recover").out
            result = b.runjob("./work.sh")
            assert result.code == 0 and "no suitable data" in result.out, result
        (tmp_path / "go").touch()
        assert runner.wait(timeout=60) == 0, runner.stderr.read()
    finally:
        (tmp_path / "go").touch()
        runner.wait(timeout=60)
    assert rows(tmp_path, "select status, reason from run where jobid='work'") == [("READY", None)]
    assert _ledger(tmp_path) == [f"1 {job}"]


@pytest.mark.slow
def test_a_recovery_revokes_the_stale_lease_of_the_run_it_recovers(hosts, tmp_path):
    """Host A's holder stopped, its session ended by the server (its run lock free) and its
    run's heartbeat an hour old: host B's ``recover`` takes the run for dead, and revokes
    its lease as a claim does. Woken, the holder takes its run lock again, finds the lease
    revoked and fences the run; RunJob's finish is refused. Were the lease left, the
    holder would renew it and the recovered run would go on."""
    a, b = hosts
    runner, job = _long_run(a, tmp_path)
    try:
        with _holder_stopped(runner, tmp_path):
            for backend in keeper_backends(a.address):
                _admin(tmp_path, f"SELECT pg_terminate_backend({backend})")
            wait_for(lambda: not keeper_backends(a.address), what="the run lock let go")
            assert "1 abandoned" in b.ok("recover").out
            assert alive(job)  # the boundary: nothing of host A hears of it until it wakes
        wait_for(lambda: not alive(job), timeout=60, what="the fence once the holder wakes")
        assert runner.wait(timeout=60) != 0
        assert "was ended elsewhere while it ran" in runner.stderr.read()
    finally:
        (tmp_path / "go").touch()
        runner.wait(timeout=60)
    assert rows(tmp_path, "select status, reason from run where jobid='work'") == [
        ("FAILED", "abandoned")
    ]


@pytest.mark.both_stores
@pytest.mark.long
def test_copy_store_refuses_a_source_with_a_live_run(pair, tmp_path):
    """Fault 7: copy-store copied RUNNING chunks of live runs; the target saw their locks
    free, took them for dead and ran them again beside the live run."""
    a, _ = pair
    _one_job(a, tmp_path, JOB + WAIT_GO)
    runner = start_runjob(a, "./work.sh")
    _pid(tmp_path, "job.pid")
    target = str(tmp_path / "copy.db")
    refused = a.utility("copy-store", "--to", target)
    assert refused.code == 2 and refused.err.count("\n") == 1, refused
    assert "1 run of this store still live (work 1: pid " in refused.err, refused.err
    (tmp_path / "go").touch()
    assert runner.wait(timeout=60) == 0
    _let_go(tmp_path)
    assert a.ok("copy-store", "--to", target, "--force").out.startswith("copied to ")
    copied = Cli(tmp_path, tmp_path / "copy.db")
    assert "READY" in copied.ok("runs").out


def _reached_at(back: float, noticed: float, fence_after: float, ping_every: float) -> float:
    """When a keeper out of reach asks a server that is back at ``back`` (seconds since its
    last good heartbeat; it noticed the outage at ``noticed``): its waits as the keeper's
    loop makes them, each up to a tick late (the loop looks once a tick)."""
    now, retry = noticed, TICK_S
    while now < back:
        wait = reconnect_wait(retry, now, fence_after, ping_every)
        retry = min(retry * 2, ping_every / 2)
        now += wait + TICK_S
    return now


@given(
    bound=st.floats(2.0, 600.0),
    ping=st.floats(0.0, 1.0),
    noticed=st.floats(0.0, 1.0),
    back=st.floats(0.0, 1.0),
)
def test_a_keeper_out_of_reach_reaches_a_server_back_before_its_fence(bound, ping, noticed, back):
    """However long the outage, a server back two ticks before the keeper's fence (no
    heartbeat for half the bound) is asked before it: its waits, doubled up to half a
    heartbeat's, are a tick once the fence is a heartbeat away. (The server is back within
    the last two heartbeats before the fence: earlier, any wait up to half a heartbeat
    reaches it in time.)"""
    ping_every = max(min(2.0, bound / 6) * (0.1 + 0.9 * ping), TICK_S)  # min(2 s, bound/6)
    fence_after = bound / 2
    noticed *= ping_every  # the first heartbeat that failed: within a heartbeat
    back = max(noticed, fence_after - 2 * TICK_S - back * 2 * ping_every)
    assert _reached_at(back, noticed, fence_after, ping_every) < fence_after
