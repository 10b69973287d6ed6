"""A drain spread over worker processes (``RunJob --all --parallel N`` of a shell job on
a shared store, with several cores): every chunk once, one report, signals passed on,
no claim once RunJob is gone, a worker's death said, nothing secret in a worker's
command line. Real PostgreSQL, real processes."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from dataflow.run.drain import workers
from dataflow.run.drain.events import Event, Tally
from dataflow.run.process.runner import Outcome
from support import (
    history,
    rows,
    script,
    start_runjob,
    statuses,
    wait_for,
)
from support.hosts import alive
from support.pgserver import login_role
from support.spreading import (
    chunks,
    workers_of,
)

on_postgres = pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
cores = pytest.mark.skipif(workers.cores() < 2, reason="a drain spreads over processes on 2+ cores")


@pytest.mark.long  # a spread drain over worker processes, twice
@on_postgres
@cores
def test_every_chunk_once_in_worker_processes_and_one_report(cli, tmp_path):
    chunks(cli, 40)
    token = cli.ok("crypt", "-e", "s3cret", env={"PASSKEY": "pk-7f3a"}).out.strip()
    cli.ok("dml", f"update dataset set encryptedpass='{token}' where datasetid='src'")
    # each job says which process started it, and what that process's command line holds
    script(
        tmp_path,
        "work.sh",
        'echo "$dataid $PPID" >> starts; tr "\\0" " " < /proc/$PPID/cmdline >> argv; echo >> argv\n'
        '[ "$src_password" = s3cret ] || exit 7; sleep 0.2',  # 4 s in one process alone
    )
    ran = cli.runjob("--all", "--parallel", "4", "./work.sh", env={"PASSKEY": "pk-7f3a"})
    assert ran.code == 0, ran
    assert ran.err == ""
    assert statuses(tmp_path, "work") == {str(n): "READY" for n in range(1, 41)}
    started = [line.split() for line in (tmp_path / "starts").read_text().splitlines()]
    assert sorted(int(dataid) for dataid, _ in started) == list(range(1, 41))  # each once
    assert len({parent for _, parent in started}) == min(4, workers.cores())
    argv = (tmp_path / "argv").read_text()
    assert "dataflow.run.drain.worker" in argv and "s3cret" not in argv and "pk-7f3a" not in argv
    assert "work: 40 READY, 0 FAILED in" in ran.out  # one summary, of every worker's runs
    assert len(history(tmp_path, "work")) == 40


@on_postgres
@cores
def test_a_signal_reaches_every_workers_jobs_once(cli, tmp_path):
    chunks(cli, 6)
    script(
        tmp_path,
        "work.sh",
        "trap 'echo $dataid >> stopped; exit 9' TERM; echo $dataid >> starts; "
        "while :; do sleep 0.1; done",
    )
    runjob = start_runjob(cli, "--all", "--parallel", "4", "./work.sh")

    def four_started() -> bool:
        assert runjob.poll() is None, runjob.communicate()
        starts = tmp_path / "starts"
        return starts.exists() and len(starts.read_text().split()) == 4

    wait_for(four_started, what="four jobs to start")
    pids = workers_of(runjob.pid)
    assert len(pids) >= 2
    runjob.send_signal(signal.SIGTERM)
    _, err = runjob.communicate(timeout=60)
    assert runjob.returncode == 128 + signal.SIGTERM, err
    stopped = (tmp_path / "stopped").read_text().split()
    assert sorted(stopped) == sorted((tmp_path / "starts").read_text().split())  # once each
    assert sorted(statuses(tmp_path, "work").values()) == ["FAILED"] * 4  # 2 never claimed
    assert not any(os.path.exists(f"/proc/{pid}") for pid in pids)


@on_postgres
@cores
def test_no_claim_once_runjob_is_gone(cli, tmp_path):
    chunks(cli, 30)
    script(tmp_path, "work.sh", "echo $dataid >> starts; sleep 1")
    runjob = start_runjob(cli, "--all", "--parallel", "2", "./work.sh")
    wait_for(lambda: (tmp_path / "starts").exists(), what="a job to start")
    pids = workers_of(runjob.pid)
    os.kill(runjob.pid, signal.SIGKILL)  # RunJob alone: its workers see their parent go
    runjob.wait()
    wait_for(lambda: not any(alive(pid) for pid in pids), what="the workers to end")
    started = (tmp_path / "starts").read_text().split()
    assert len(started) <= 4  # what each worker ran when RunJob went, or had claimed ahead
    found = statuses(tmp_path, "work")
    assert set(found) == set(started)  # the rest never claimed
    assert set(found.values()) == {"READY"}  # the runs under way ended and were recorded


@on_postgres
@cores
@pytest.mark.long
def test_a_killed_worker_is_said_and_the_other_drains_on(cli, tmp_path):
    chunks(cli, 12)
    script(tmp_path, "work.sh", "echo $dataid >> starts; sleep 0.3")
    runjob = start_runjob(cli, "--all", "--parallel", "2", "./work.sh")
    wait_for(lambda: len(workers_of(runjob.pid)) == 2, what="two workers")
    wait_for(lambda: (tmp_path / "starts").exists(), what="a job to start")
    os.kill(workers_of(runjob.pid)[0], signal.SIGKILL)
    _, err = runjob.communicate(timeout=60)
    assert runjob.returncode == 1
    assert err.count("\n") == 1, err  # one line, no traceback
    assert "a worker of the drain of work was killed by SIGKILL" in err
    assert "'utility recover'" in err
    found = statuses(tmp_path, "work")
    assert list(found.values()).count("RUNNING") <= 1  # the killed worker's job, if any
    assert list(found.values()).count("READY") >= 12 - 2  # the other drained the rest

    def recovered() -> bool:  # once the killed worker's job (its own group) has ended
        cli.runjob("--all", "./work.sh")
        return set(statuses(tmp_path, "work").values()) <= {"READY", "FAILED"}

    wait_for(recovered, what="a later drain to recover the killed worker's chunk")
    assert len(rows(tmp_path, "select 1 from datastatus where jobid='work'")) == 12


def test_tally_counts_what_a_drain_tells():
    tally = Tally()
    launches = [Event("launch", str(n), _claim(n)) for n in range(5)]
    for event in launches:
        tally.count(event)
    assert (tally.summary.started, tally.summary.running) == (5, 5)
    tally.count(Event("ended", "0", _claim(0), Outcome(0), "READY"))
    tally.count(Event("ended", "1", _claim(1), Outcome(3), "FAILED"))
    tally.count(Event("fenced", "2", _claim(2), Outcome(0), "taken"))
    tally.count(Event("cap_full", live=2, cap=2))
    summary = tally.summary
    assert (summary.ready, summary.failed, summary.fenced, summary.running) == (1, 1, 1, 2)
    assert summary.cap_full and summary.last == Outcome(3)


def _claim(runid: int):
    from pathlib import Path

    from dataflow.run.claim.claims import Claim

    return Claim(str(runid), 1, runid, None, Path("log"), "token", ())


@pytest.mark.both_stores
@cores
@pytest.mark.long
def test_workers_names_how_many_processes_on_either_store(cli, tmp_path, store_kind):
    """``--workers 2`` spreads a drain on SQLite too (racing drains are safe there);
    ``--workers 1`` keeps it in RunJob's process, on PostgreSQL too."""
    chunks(cli, 16)  # one process alone would drain them in 2.4 s: the second starts first
    script(tmp_path, "work.sh", 'echo "$dataid $PPID" >> starts; sleep 0.3')
    for processes, parents in (("2", 2), ("1", 1)):
        (tmp_path / "starts").unlink(missing_ok=True)
        cli.ok("dml", "delete from datastatus where jobid = 'work'")
        ran = cli.runjob("--all", "--parallel", "4", "--workers", processes, "./work.sh")
        assert ran.code == 0 and ran.err == "", ran
        started = [line.split() for line in (tmp_path / "starts").read_text().splitlines()]
        assert sorted(int(dataid) for dataid, _ in started) == list(range(1, 17))
        assert len({parent for _, parent in started}) == parents
    assert "work: 16 READY, 0 FAILED in" in ran.out


def test_workers_below_one_is_a_usage_error(cli):
    done = cli.runjob("--all", "--parallel", "2", "--workers", "0", "./work.sh")
    assert done.code == 2 and done.err == "error: --workers needs a number >= 1\n", done


@pytest.mark.long  # waits for a connection refused a moment
@on_postgres
def test_a_worker_refused_a_connection_for_a_moment_waits_for_one(
    cli, tmp_path, address, pg_server
):
    """The server refuses new sessions for a moment as the workers start (its connections
    all taken, a restart): RunJob, connected already, drains through its workers once
    the server takes them, exit 0, every chunk once; the wait is said in one line."""
    import psycopg

    role = f"brief_{os.getpid()}"
    with login_role(address, role, "all", limit=1) as url:  # RunJob's session
        chunks(cli, 6)
        script(tmp_path, "work.sh", "echo $dataid >> ledger")
        runjob = start_runjob(
            cli, "--all", "--parallel", "4", "--workers", "2", "./work.sh", env={"DATAFLOW_DB": url}
        )
        log = Path(pg_server.logfile)  # the workers are refused meanwhile, once at least
        refused = f'too many connections for role "{role}"'
        wait_for(lambda: refused in log.read_text(errors="replace"), what="a worker refused")
        with psycopg.connect(address, autocommit=True) as conn:
            conn.execute(f"alter role {role} connection limit -1")
        out, err = runjob.communicate(timeout=60)
        assert runjob.returncode == 0, (out, err)
        (said,) = err.splitlines()
        assert said.startswith("warning: the store failed for ") and "connections" in said
        assert sorted((tmp_path / "ledger").read_text().split(), key=int) == [
            str(n) for n in range(1, 7)
        ]
