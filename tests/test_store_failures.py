"""A drain outlives a store that fails for a while: a busy SQLite file, a PostgreSQL server
that restarts. A run that succeeded is recorded READY; an error that lasts stops the claims,
lets the running jobs end and be recorded, then RunJob exits with one line."""

from __future__ import annotations

import signal
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from dataflow.run.lease.holder import LOG_NAME
from support import ADDRESSES, Cli, rows, start_runjob, two_hosts, wait_for
from support.hosts import _one_job
from support.pgserver import _restart


def _statuses(tmp_path) -> dict[str, str]:
    found = rows(tmp_path, "select dataid, status from datastatus where jobid='work'")
    return dict(found)


def _hold_the_store(path: Path, seconds: float, when: threading.Event) -> threading.Thread:
    """Another writer that keeps the SQLite store locked for ``seconds`` once ``when``."""

    def hold() -> None:
        when.wait()
        conn = sqlite3.connect(path, isolation_level=None, timeout=60)
        conn.execute("BEGIN IMMEDIATE")
        time.sleep(seconds)
        conn.execute("ROLLBACK")
        conn.close()

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    return thread


def _started(tmp_path) -> threading.Event:
    """Set once the first job of the drain has started."""
    event = threading.Event()

    def watch() -> None:
        wait_for(lambda: (tmp_path / "started").exists(), what="the first job")
        event.set()

    threading.Thread(target=watch, daemon=True).start()
    return event


@pytest.mark.slow
def test_a_store_busy_for_longer_than_the_busy_timeout_loses_no_chunk(cli, tmp_path):
    """Fault 8 of "Never twice": a claim or finish that met another writer's long
    transaction ended the whole drain (exit 3); chunks that had succeeded ended FAILED."""
    _one_job(cli, tmp_path, "touch started; sleep 0.5", chunks=6)
    when = _started(tmp_path)
    holder = _hold_the_store(tmp_path / "dataflow.db", 2.5, when)
    env = {"DATAFLOW_BUSY_TIMEOUT": "1"}
    drained = cli.runjob("--all", "--parallel", "2", "./work.sh", env=env)
    holder.join()
    assert drained.code == 0, drained
    assert _statuses(tmp_path) == {str(n): "READY" for n in range(1, 7)}
    warned = [line for line in drained.err.splitlines() if "the store failed for" in line]
    assert len(warned) == 1, drained.err
    assert rows(tmp_path, "select count(*) from run where status = 'READY'") == [(6,)]


@pytest.mark.slow
def test_a_store_that_stays_busy_ends_the_drain_with_one_line_and_loses_nothing(cli, tmp_path):
    """An error that lasts: no more claims, the running jobs end, their ends are tried
    for longer; then RunJob exits 3 with one line. Their chunks are left RUNNING (never
    FAILED for the store's sake) and recovered once the store answers again."""
    _one_job(cli, tmp_path, 'echo "$dataid" >> ledger; touch started; sleep 0.3', chunks=4)
    when = _started(tmp_path)
    holder = _hold_the_store(tmp_path / "dataflow.db", 8, when)
    env = {"DATAFLOW_BUSY_TIMEOUT": "1"}
    drained = cli.runjob("--all", "--parallel", "2", "./work.sh", env=env)
    assert drained.code == 3, drained
    lines = drained.err.splitlines()
    assert lines[-1].startswith("error: ") and "Traceback" not in drained.err, drained.err
    holder.join()
    assert "FAILED" not in _statuses(tmp_path).values()
    running = [d for d, status in _statuses(tmp_path).items() if status == "RUNNING"]
    assert running, "no run was left unrecorded: the store was not busy for long enough"
    recovered = cli.ok("recover").out  # the store answers again: they are recovered
    assert f"{len(running)} abandoned" in recovered, recovered
    cli.ok("resubmit", "work", "--failed")
    assert cli.runjob("--all", "./work.sh").code == 0
    assert _statuses(tmp_path) == {str(n): "READY" for n in range(1, 5)}


@pytest.mark.slow
@pytest.mark.parametrize("down", [0.0, 3.0], ids=["restart", "down for seconds"])
def test_a_drain_outlives_a_server_restart(tmp_path, pg_database, pg_server, down):
    """A PostgreSQL server restarting under a drain: its sessions and the lease holder's are
    cut; the drain waits, reconnects, and every chunk ends READY, once. Stopped for 3 s
    (a restart that takes a while, within half the bound less a heartbeat), the drain's
    connections are refused meanwhile, and it waits for them within its patience (the
    bound), said in one line; a job that runs through it is not fenced. The
    holder says the outage once, and its end, however long it lasts."""
    cli = Cli(tmp_path, pg_database)
    cli.env.update(DATAFLOW_LIVENESS_TIMEOUT="20" if down else "10")
    ADDRESSES[tmp_path] = pg_database
    first = 'if [ "$dataid" = 1 ]; then sleep 5; else sleep 0.2; fi' if down else "sleep 0.5"
    job = f'echo "$dataid" >> ledger; touch started; {first}'
    try:
        _one_job(cli, tmp_path, job, chunks=8)
        runner = start_runjob(cli, "--all", "--parallel", "2", "./work.sh")
        wait_for(lambda: (tmp_path / "started").exists(), what="the first job")
        _restart(pg_server, down=down)
        out, err = runner.communicate(timeout=120)
        assert runner.returncode == 0, (out, err)
        if down:
            assert err.startswith("warning: the store failed for ") and err.count("\n") == 1, err
        assert _statuses(tmp_path) == {str(n): "READY" for n in range(1, 9)}
        assert sorted((tmp_path / "ledger").read_text().split()) == sorted(
            str(n) for n in range(1, 9)
        )
        (log,) = tmp_path.rglob(LOG_NAME)
        said: dict[str, list[str]] = {}  # each holder's lines (the host's, for every worker)
        for line in log.read_text().splitlines():
            holder, what = line.split(" holder ", 1)[1].split(": ", 1)
            said.setdefault(holder, []).append(what.split(" (")[0].split(" after")[0])
        outage = ["store out of reach", "store reached again"]
        assert said and all(lines == outage for lines in said.values()), log.read_text()
    finally:
        ADDRESSES.pop(tmp_path, None)


@pytest.mark.slow
def test_a_job_through_an_outage_past_its_keepers_fence_ends_failed(
    tmp_path, pg_database, pg_server
):
    """The server down for 6 s under a bound of 10 s while a job runs: its keeper gets no
    heartbeat through for half the bound and fences the job, which ends FAILED once the
    server is back (killed, run once): RunJob exits as the job did, 128 + SIGKILL."""
    cli = Cli(tmp_path, pg_database)
    cli.env.update(DATAFLOW_LIVENESS_TIMEOUT="10")
    ADDRESSES[tmp_path] = pg_database
    try:
        _one_job(cli, tmp_path, 'echo "$dataid" >> ledger; touch started; sleep 12')
        runner = start_runjob(cli, "./work.sh")
        wait_for(lambda: (tmp_path / "started").exists(), what="the job")
        _restart(pg_server, down=6.0)
        out, err = runner.communicate(timeout=120)
        assert runner.returncode == 128 + signal.SIGKILL, (out, err)
        assert "Job ./work.sh has failed" in out, out
        assert rows(tmp_path, "select status from run") == [("FAILED",)]
        assert (tmp_path / "ledger").read_text().split() == ["1"]
    finally:
        ADDRESSES.pop(tmp_path, None)


def _cut_sessions(address: str) -> int:
    """``pg_terminate_backend`` of every other session of the store's database (the
    drain's own, its keeper's); how many were cut."""
    import psycopg

    with psycopg.connect(address, autocommit=True) as conn:
        cut = conn.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    return cut[0]


@pytest.mark.slow
def test_a_drain_outlives_its_sessions_being_cut(tmp_path, pg_database):
    """Fault 8 on PostgreSQL: ``pg_terminate_backend`` of the drain's own sessions mid-drain
    (three times): the drain reconnects, and every chunk ends READY, each run once."""
    cli = Cli(tmp_path, pg_database)
    ADDRESSES[tmp_path] = pg_database
    try:
        _one_job(cli, tmp_path, 'echo "$dataid" >> ledger; touch started; sleep 0.4', chunks=8)
        runner = start_runjob(cli, "--all", "--parallel", "2", "./work.sh")
        wait_for(lambda: (tmp_path / "started").exists(), what="the first job")
        cut = 0
        for _ in range(3):
            cut += _cut_sessions(pg_database)
            time.sleep(0.5)
        out, err = runner.communicate(timeout=120)
        assert cut, "no session of the drain was cut"
        assert runner.returncode == 0, (out, err)
        assert _statuses(tmp_path) == {str(n): "READY" for n in range(1, 9)}
        assert rows(tmp_path, "select count(*) from run where status <> 'READY'") == [(0,)]
        assert sorted((tmp_path / "ledger").read_text().split()) == sorted(
            str(n) for n in range(1, 9)
        )
    finally:
        ADDRESSES.pop(tmp_path, None)


def test_ends_the_recorder_cannot_record_are_recorded_by_the_drain(cli, tmp_path):
    """The recorder's own connection cannot be opened (as when no descriptor is left; here
    the store's file is renamed under the drain, whose connection goes on): each end it
    is handed comes back to the drain, which records it; every chunk ends READY."""
    from dataflow.run.claim import claims, lifecycle
    from dataflow.run.claim.jobenv import JobEnv
    from dataflow.run.drain.drain import Drain
    from dataflow.run.lease import keeper
    from dataflow.store import open_store
    from support import ready, register

    cli.ok("createtables")
    register(cli, "work", ["src"], ["dst"])
    ready(cli, "src", *map(str, range(1, 7)))
    job_script = tmp_path / "work.sh"
    job_script.write_text("#!/bin/sh\necho ran\n")
    job_script.chmod(0o755)
    with open_store(tmp_path / "dataflow.db") as store:
        job = lifecycle.load_job(store, "work")
        claims.prepare(store, "work")
        assert store.identity  # read (and kept) while the file has its name
        (tmp_path / "dataflow.db").rename(tmp_path / "moved.db")  # what the recorder opens
        drain = Drain(store, job, JobEnv({}), [str(job_script)], parallel=2, echo=False)
        try:
            summary = drain.run()
        finally:
            keeper.close_all()
        assert (summary.ready, summary.failed, drain.failure) == (6, 0, None)
    (tmp_path / "moved.db").rename(tmp_path / "dataflow.db")
    assert _statuses(tmp_path) == {str(n): "READY" for n in range(1, 7)}


@pytest.mark.long
@pytest.mark.parametrize("drain", [False, True], ids=["one chunk", "a drain"])
def test_a_claim_whose_commit_answer_is_lost_is_given_back(tmp_path, pg_database, pg_server, drain):
    """The connection cut as the answer of a claim's COMMIT comes back (the claim is done
    at the server; the client cannot know): the claim is given back before it is tried
    again, so no chunk is left RUNNING by a run nobody runs. Every chunk ends READY, run
    once, and the history holds no run of the lost claim."""
    from support.hosts import Proxy

    proxy = Proxy(pg_server.port)
    cli = Cli(tmp_path, pg_database.replace(f":{pg_server.port}/", f":{proxy.port}/"))
    ADDRESSES[tmp_path] = pg_database
    chunks = 4 if drain else 1
    try:
        _one_job(cli, tmp_path, 'echo "$dataid" >> ledger', chunks=chunks)
        proxy.lose_commits(1, after=b"INSERT INTO run(")
        args = ["--all", "--parallel", "2"] if drain else []
        done = cli.runjob(*args, "./work.sh")
        assert proxy.lost_count == 1, "no claim's answer was lost"
        assert done.code == 0 and "Traceback" not in done.err, done
        assert _statuses(tmp_path) == {str(n): "READY" for n in range(1, chunks + 1)}, done
        assert sorted((tmp_path / "ledger").read_text().split()) == sorted(
            str(n) for n in range(1, chunks + 1)
        )
        assert rows(tmp_path, "select status, attempt from run") == [("READY", 1)] * chunks
    finally:
        proxy.close()
        ADDRESSES.pop(tmp_path, None)


@pytest.mark.long
def test_a_give_back_tried_again_never_undoes_another_hosts_claim(tmp_path, pg_database, pg_server):
    """Host A's claim of chunk 1 (run N) loses its COMMIT's answer, and so does the give-back
    that follows (done at the server: run N deleted, the run sequence back to N - 1); then
    A's network goes, and the server ends A's holder's session. Host B claims chunk 1: its
    run is numbered N again. When A's network comes back, A tries its undo again (the
    store failed in a way that passes): the chunk's last run is numbered N and RUNNING,
    but it is B's, not A's claim (its token differs). B's run keeps its history row and
    ends READY."""
    import psycopg

    from support.hosts import Proxy, holder_sessions

    proxy = Proxy(pg_server.port)
    proxied = pg_database.replace(f":{pg_server.port}/", f":{proxy.port}/")
    ADDRESSES[tmp_path] = pg_database
    a, b = two_hosts(tmp_path, pg_database, bound=6)
    a.env["DATAFLOW_DB"] = proxied  # A reaches the server through the proxy
    a.env["DATAFLOW_LIVENESS_TIMEOUT"] = "20"  # A's patience: 20 s after the first failure
    running_a = running_b = None
    try:
        _one_job(b, tmp_path, 'echo "$DATAFLOW_HOST" >> ledger; sleep 4', chunks=1)
        # the claim's transaction (its run's INSERT), then the give-back's (its LOCK of run)
        proxy.lose_in_turn(b"INSERT INTO run(", b"LOCK TABLE run IN SHARE ROW", partition=True)
        running_a = start_runjob(a, "./work.sh")
        wait_for(lambda: proxy.lost_count == 2, 30, "the claim's and the give-back's answers lost")
        assert rows(tmp_path, "select count(*) from run") == [(0,)]  # the first undo was done
        with psycopg.connect(pg_database, autocommit=True) as conn:  # A's holder's session
            for pid in holder_sessions(pg_database, "hostA"):
                conn.execute("select pg_terminate_backend(%s)", (pid,))
        running_b = start_runjob(b, "./work.sh")
        wait_for(
            lambda: rows(tmp_path, "select host from run where status = 'RUNNING'") == [("hostB",)],
            20,
            "B's run",
        )
        runid_b = rows(tmp_path, "select runid from run")[0][0]
        proxy.flowing.set()  # A's network is back: its release tries its undo again
        out_b, err_b = running_b.communicate(timeout=60)
        running_a.communicate(timeout=60)
        history = rows(tmp_path, "select runid, host, status from run order by runid")
        assert (runid_b, "hostB", "READY") in history, (history, err_b)
        assert running_b.returncode == 0, (out_b, err_b)
        assert (tmp_path / "ledger").read_text().split() == ["hostB"]  # run once
    finally:
        proxy.close()
        for proc in (running_a, running_b):
            if proc is not None and proc.poll() is None:
                proc.kill()
        ADDRESSES.pop(tmp_path, None)
