"""Adversarial sweep of four changes: the keeper's retry of a failed request
(run/holder.py), a drain short of descriptors (run/drain.py, runner.make_room), a finish
whose COMMIT is refused after its publish (run/recorder.py, layout.publish/unpublish), and
hostile attempt/retry counts (run/claims.py).

Breaks found (each a test here):

- A drain of quick jobs (claiming ahead) under a hard limit of 24-32 open files stopped
  with ``error: <store>-locks: Too many open files`` and left its started chunks RUNNING:
  a claim that cannot open a chunk's lock was not taken as "short of descriptors".
- Such a claim leaked the locks it took before in the same batch (liveness.take opened
  them outside its try): the drain then passed over its own locked chunks and ended with
  exit 0 and "14 waiting".
- The output copier's epoll selector needs a descriptor: without one, a traceback on
  stderr ("Exception ignored in thread") and nobody read the job's pipes: a job writing
  more than a pipe holds blocked, and RunJob with it, for ever (now a poll selector).
- The "cramped" warning was said at every shrink (up to three lines), not once.
- A drain short of tasks (a pids cgroup: threads and forks; root is held to it, unlike
  RLIMIT_NPROC): "RuntimeError: can't start new thread" traceback from the copier's, the
  run's waiting or the recorder's thread, chunks left RUNNING; the copier's failure came
  after the job was spawned. Fixed: its thread starts before the job, the others fall
  back to the drain's thread.
- status, explain and the board on a run row whose retry is text or bytes (any SQLite
  client): TypeError traceback (RunJob skipped the chunk already). Fixed
  (lifecycle.counted).
- The keeper ignored which run locks its reconnect took again: a store writer holding a
  key at that moment left the keeper believing it held the lock for good. Fixed: taken
  again at each heartbeat, and a hold of such a chunk is answered "not held".
- A finish whose every COMMIT is lost with its session (outcome unknown, the move kept)
  gives up; the run was recovered FAILED (abandoned) with its output still in the chunk,
  and the last READY run's files, moved aside, were left behind. Fixed: recovery puts
  the chunk back (layout.restore).

Attacks that held:

- Keeper sessions ended every 0.1 s under two hosts draining 60 quick chunks: no overlap
  (flock judge), every chunk READY once, no traceback.
- The keeper's retry finding the server refusing connections: RunJob ends in one line,
  exit 3, no hang, nothing RUNNING (the keeper fences at half the bound; its log says
  "store out of reach" at every tick meanwhile: noisy; since, said once an outage).
- A finish whose first COMMIT is lost (a deferred trigger ending its own session) and
  not done: the next try commits READY, the chunk holds the run's output only.
- Attempt/retry counts -1, 1.5, 1e308, 2**63-1, text, bytes (SQLite), -1 and -2**31
  (PostgreSQL; NULL is refused by both schemas): RunJob skips the chunk in one line;
  history, runs, recover, resubmit, hold/release, log, lineage, check, endjob and
  deleterun never traceback. 2**31-2 runs its last attempt (2**31-1 fits).
- Hard limits of 8-16 open files (nothing can start): one error line,
  nothing claimed or left RUNNING. (Left alone: on PostgreSQL at 12 files the keeper's
  "internal error" line reaches RunJob's stderr beside the error line; the job inherits
  the raised soft limit of open files.)
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections import Counter

import pytest
from test_runjob import ready, register

from dataflow import layout
from support import ROOT, _admin, open_files, rows, script

LIMITED = ("warning: cannot run ./work.sh", "warning: cannot claim a chunk")


@pytest.mark.both_stores
@pytest.mark.parametrize("files,pause", [(20, "0.3"), (24, "0.3"), (24, "0"), (28, "0"), (32, "0")])
def test_a_drain_short_of_descriptors_never_hangs_nor_leaves_a_chunk_running(
    cli, tmp_path, files, pause
):
    """``--parallel 4`` under a hard limit of a few dozen files, jobs quick enough to be
    claimed ahead and writing more than a pipe holds: RunJob ends, exit 0, at most one
    warning line and no traceback, every chunk run once and READY."""
    cli.ok("createtables")
    register(cli, "work", ["src"], ["dst"])
    ready(cli, "src", *map(str, range(1, 21)))
    big = 'head -c 100000 /dev/zero | tr "\\0" x'
    script(tmp_path, "work.sh", f'echo "$dataid" >> ran.log; sleep {pause}; {big}')
    done = cli.runjob(
        "--all", "--parallel", "4", "./work.sh", preexec_fn=open_files(files), timeout=120
    )
    assert done.code == 0, done.err
    lines = done.err.splitlines()
    assert len(lines) <= 1 and all(line.startswith(LIMITED) for line in lines), done.err
    ran = Counter((tmp_path / "ran.log").read_text().split())
    assert ran == Counter(str(i) for i in range(1, 21)), (done.out, done.err)
    found = cli.ok("sql", "select distinct status from datastatus where jobid = 'work'")
    assert found.lines[2:] == ["READY"]


def test_a_job_never_starts_with_nobody_to_read_its_output(tmp_path):
    """With no descriptor left, a job is refused before it starts (what reads its output,
    a watcher's thread and the pipe that wakes it, comes first): one clear error, the job
    never run. A job already started needs no descriptor more: its watcher reads all it
    writes (it used epoll, whose descriptor could not be made: a traceback, and the job's
    pipe full)."""
    program = f"""
import os, resource, sys
sys.path.insert(0, {str(ROOT)!r})
from dataflow.errors import ScriptError
from dataflow.run.runner import Run
from dataflow.run.watcher import Watcher
copied = {str(tmp_path / "copied")!r}
watcher = Watcher()
watcher.ready()
job = Run(["sh", "-c", "head -c 300000 /dev/zero"], dict(os.environ), log_path=copied,
          echo=False, watcher=watcher)
job.start()
highest = max(int(fd) for fd in os.listdir("/proc/self/fd"))
resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
while True:  # every descriptor taken
    try:
        os.open("/dev/null", os.O_RDONLY)
    except OSError:
        break
assert job.wait().returncode == 0
while True:  # those the job's end gave back, taken too
    try:
        os.open("/dev/null", os.O_RDONLY)
    except OSError:
        break
try:
    Run(["sh", "-c", "touch {tmp_path / "ran"}"], dict(os.environ), echo=False).start()
except ScriptError as exc:
    print(exc)
"""
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert (tmp_path / "copied").stat().st_size == 300000
    assert "nothing to read its output" in done.stdout and "open files" in done.stdout
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize(
    "column,value", [("retry", "'x'"), ("retry", "X'00'"), ("attempt", "X'00'")]
)
def test_operator_commands_on_a_run_row_whose_count_is_no_count(chain, tmp_path, column, value):
    """A run row whose retry (or attempt) is text or bytes (any SQLite client may write
    them into the typeless column): status, explain and the board say so, without a
    traceback (they compared it with an int: TypeError), as RunJob skips the chunk."""
    chain.ok("dml", "insert into datastatus values ('dst','work','2','OUT','FAILED',now())")
    chain.ok("dml", "insert into job (jobid, itemtype, itemvalue) values ('work', 'retries', '3')")
    counts = {"attempt": "1", "retry": "0", column: value}
    _admin(
        tmp_path,
        "insert into run (jobid, dataid, attempt, retry, status, started)"
        f" values ('work', '2', {counts['attempt']}, {counts['retry']}, 'FAILED', '2026-01-01')",
    )
    for args in (["status"], ["status", "work"], ["explain", "work"], ["history"]):
        done = chain.utility(*args)
        assert done.code == 0 and "Traceback" not in done.err, (args, done.err)
    board = chain.utility("board", "--html", str(tmp_path / "board.html"))
    assert board.code == 0 and "Traceback" not in board.err, board.err
    assert "not a count" in (tmp_path / "board.html").read_text()
    explained = chain.utility("explain", "work", "2")
    assert "Traceback" not in explained.err, explained.err
    assert "attempt or retry is not a count" in explained.out
    script(tmp_path, "work.sh", 'echo "$dataid" >> ran')
    assert chain.runjob("--all", "./work.sh").code == 0
    assert sorted((tmp_path / "ran").read_text().split()) == ["1", "3"]


def _ending_commits(address: str, times: int) -> None:
    """A store writer's deferred trigger that ends the finishing session (its COMMIT's
    answer lost: the transaction is rolled back) the first ``times`` times a run turns
    READY."""
    import psycopg

    with psycopg.connect(address, autocommit=True) as conn:
        conn.execute("CREATE SEQUENCE hostile_count")  # not rolled back with its transaction
        conn.execute(
            "CREATE FUNCTION hostile() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            f" IF nextval('hostile_count') <= {times} THEN"
            "   PERFORM pg_terminate_backend(pg_backend_pid());"
            " END IF; RETURN NULL; END $$"
        )
        conn.execute(
            "CREATE CONSTRAINT TRIGGER hostile AFTER UPDATE ON run DEFERRABLE INITIALLY"
            " DEFERRED FOR EACH ROW WHEN (NEW.status = 'READY') EXECUTE FUNCTION hostile()"
        )


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
def test_a_finish_whose_commit_was_lost_and_not_done_is_recorded_by_its_next_try(
    cli, tmp_path, address
):
    """The finish's first COMMIT ends its session (not committed, its answer lost): the
    move is kept, the next try commits READY; the chunk holds the run's output only."""
    from test_fenced_output import _files, _register

    table = _register(cli, tmp_path)
    assert cli.runjob("./work.sh").code == 0
    (table / "dataid=7" / "mark").write_text("the first run's chunk")
    cli.ok("resubmit", "work", "7")
    _ending_commits(address, 1)
    done = cli.runjob("./work.sh")
    assert done.code == 0, done
    assert _files(table / "dataid=7") == {"part.csv": "here\n"}
    assert rows(tmp_path, "select status from run order by attempt") == [("READY",), ("READY",)]
    assert list((table / layout.ATTEMPTS).rglob("*")) in (
        [],
        [table / layout.ATTEMPTS / "dataid=7"],
    )


@pytest.mark.slow
@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
def test_a_finish_whose_every_commit_is_lost_leaves_no_output_of_a_failed_run(
    cli, tmp_path, address
):
    """Every COMMIT of the finish ends its session (never committed): RunJob gives up
    (one line, non-zero), and once the run is recovered FAILED the chunk must hold what
    its last READY run made, not the output of a run the store says failed."""
    from test_fenced_output import _files, _register

    table = _register(cli, tmp_path)
    assert cli.runjob("./work.sh").code == 0
    (table / "dataid=7" / "mark").write_text("the first run's chunk")
    cli.ok("resubmit", "work", "7")
    _ending_commits(address, 10_000)
    done = cli.runjob("./work.sh", timeout=300)
    assert done.code != 0 and "Traceback" not in done.err, done
    cli.ok("recover")
    assert rows(tmp_path, "select status from run order by attempt")[-1] != ("READY",)
    assert _files(table / "dataid=7") == {"mark": "the first run's chunk", "part.csv": "here\n"}


@pytest.mark.slow
def test_a_keeper_takes_again_the_run_locks_a_hostile_writer_held_at_its_reconnect(hosts, tmp_path):
    """The server ends the keeper's session while it holds the run locks of three live
    runs, and a store writer takes advisory locks of the same keys before the keeper
    reconnects; once the writer lets them go, the keeper holds them again (its lease
    held the chunks meanwhile: host B never runs one of them)."""
    import time

    import psycopg
    from test_hosts import _one_job
    from test_lease import JOB, WAIT_GO, _ledger

    from dataflow.store.postgres.claims import run_key
    from hosts import keeper_backends
    from support import BOUND, start_runjob, wait_for

    a, b = hosts
    _one_job(a, tmp_path, JOB + WAIT_GO, chunks=3)
    # one process, one keeper: the one whose session is ended
    runner = start_runjob(a, "--all", "--parallel", "3", "--workers", "1", "./work.sh")
    wait_for(lambda: len(_ledger(tmp_path)) == 3, what="three live runs")
    wait_for(lambda: keeper_backends(a.address), what="the run locks")
    (backend,) = keeper_backends(a.address)
    keys = [run_key("work", str(d)) for d in (1, 2, 3)]
    with psycopg.connect(a.address, autocommit=True) as hostile:
        hostile.execute("SELECT pg_terminate_backend(%s)", (backend,))
        wait_for(
            lambda: all(
                hostile.execute("SELECT pg_try_advisory_lock(%s)", (k,)).fetchone()[0] for k in keys
            ),
            what="the hostile locks",
        )
        seen = rows(tmp_path, "select max(seen) from run")[0][0]
        wait_for(  # the keeper reconnected: its heartbeat goes on
            lambda: rows(tmp_path, "select min(seen) from run")[0][0] > seen,
            what="a heartbeat",
        )
        assert b.runjob("--all", "./work.sh").code == 0  # nothing for B: leases held
    time.sleep(BOUND / 2)  # a few heartbeats of the keeper's
    held = wait_for(
        lambda: len(keeper_backends(a.address)) == 1, timeout=BOUND, what="the locks again"
    )
    assert held is not False
    (tmp_path / "go").touch()
    assert runner.wait(timeout=60) == 0
    assert sorted(line.split()[0] for line in _ledger(tmp_path)) == ["1", "2", "3"]


@pytest.mark.slow
def test_keeper_sessions_ended_again_and_again_under_two_draining_hosts(hosts, tmp_path):
    """Both hosts drain 60 quick chunks two at a time while every keeper's session is
    ended every 0.1 s (their requests fail and are retried on a new session): no chunk
    runs beside another run of itself, every chunk ends READY once."""
    import threading

    import psycopg
    from test_hosts import _one_job
    from test_lease import JOB, _ledger

    from hosts import keeper_backends
    from support import start_runjob

    a, _ = hosts
    _one_job(a, tmp_path, JOB + "sleep 0.1", chunks=60)
    stop, ended = threading.Event(), []

    def end_sessions() -> None:
        with psycopg.connect(a.address, autocommit=True) as conn:
            while not stop.wait(0.1):
                for backend in keeper_backends(a.address):
                    conn.execute("SELECT pg_terminate_backend(%s)", (backend,))
                    ended.append(backend)

    ender = threading.Thread(target=end_sessions)
    ender.start()
    try:
        runners = [start_runjob(host, "--all", "--parallel", "2", "./work.sh") for host in hosts]
        codes = [runner.wait(timeout=240) for runner in runners]
    finally:
        stop.set()
        ender.join()
    errors = [runner.stderr.read() for runner in runners]
    assert "Traceback" not in "".join(errors), errors
    assert all(c == 0 or len(e.splitlines()) == 1 for c, e in zip(codes, errors, strict=True)), (
        errors
    )
    ledger = _ledger(tmp_path)
    assert not [line for line in ledger if "OVERLAP" in line], ledger
    for host in hosts:  # what a drain that gave up left: its next run finishes the work
        host.runjob("--all", "./work.sh")
    found = rows(tmp_path, "select dataid, status from run where jobid = 'work'")
    assert len(ended) >= 5  # sessions were ended under the drains
    assert sorted(d for d, s in found if s == "READY") == sorted(str(i) for i in range(1, 61))


@pytest.mark.slow
def test_a_keeper_whose_retry_finds_the_server_refusing_ends_the_drain_in_one_line(
    tmp_path, pg_server, pg_store
):
    """Host A reaches the store through a proxy that stops accepting connections, then
    its keeper's session is ended: the keeper's retry cannot connect. RunJob ends in one
    line, non-zero, without hanging; nothing is left RUNNING."""
    from test_hosts import _one_job
    from test_lease import JOB, _ledger

    from hosts import Proxy, keeper_backends
    from support import ADDRESSES, BOUND, start_runjob, two_hosts, wait_for

    proxy = Proxy(pg_server.port)
    a, b = two_hosts(tmp_path, pg_store, BOUND)
    ADDRESSES[tmp_path] = pg_store
    try:
        a.env["DATAFLOW_DB"] = pg_store.replace(f":{pg_server.port}/", f":{proxy.port}/")
        _one_job(b, tmp_path, JOB + "until [ -e go ]; do sleep 0.1; done", chunks=6)
        runner = start_runjob(a, "--all", "--parallel", "2", "--workers", "1", "./work.sh")
        wait_for(lambda: len(_ledger(tmp_path)) == 2, what="two live runs")
        wait_for(lambda: keeper_backends(pg_store), what="the run locks")
        (backend,) = keeper_backends(pg_store)
        proxy.server.close()  # new connections refused; those open go on
        import psycopg

        with psycopg.connect(pg_store, autocommit=True) as conn:
            conn.execute("SELECT pg_terminate_backend(%s)", (backend,))
        (tmp_path / "go").touch()  # the runs end; the drain's next claim asks the keeper
        code = runner.wait(timeout=120)
        err = runner.stderr.read()
        assert code != 0 and len(err.splitlines()) == 1 and err.startswith("error: "), err
        assert "RUNNING" not in {s for (s,) in rows(tmp_path, "select status from run")}
    finally:
        proxy.close()
        ADDRESSES.pop(tmp_path, None)


PIDS = "/sys/fs/cgroup/pids"


@pytest.mark.both_stores
@pytest.mark.parametrize("tasks", [8, 10, 12, 16])
@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_drain_short_of_tasks_never_tracebacks_nor_leaves_a_chunk_running(
    cli, tmp_path, tasks, workers, store_kind
):
    """RunJob in a cgroup of at most ``tasks`` tasks (its threads count; root is held to
    it, unlike RLIMIT_NPROC): a thread or a fork that cannot start. It ended in a
    RuntimeError traceback (can't start new thread), its chunks left RUNNING. Now: no
    traceback, nothing RUNNING once it ends, no chunk run twice; in one process or
    spread over two (each of which may say once what it could not start)."""
    import os
    import time

    group = f"{PIDS}/sweep13-{os.getpid()}-{tasks}-{store_kind}"
    try:
        os.mkdir(group)
    except OSError as exc:
        pytest.skip(f"no pids cgroup here: {exc}")
    try:
        with open(f"{group}/pids.max", "w") as limit:
            limit.write(str(tasks))
        cli.ok("createtables")
        register(cli, "work", ["src"], ["dst"])
        ready(cli, "src", *map(str, range(1, 13)))
        job = tmp_path / "work.sh"  # a job that forks nothing (Python, not through Spark)
        job.write_text(
            "#!/usr/bin/env python3\nimport os, time\n"
            "with open('ran.log', 'a') as f: f.write(os.environ['dataid'] + '\\n')\n"
            "time.sleep(0.3)\n"
        )
        job.chmod(0o755)

        def enter() -> None:
            with open(f"{group}/cgroup.procs", "w") as procs:
                procs.write(str(os.getpid()))

        done = cli.runjob(
            "--all",
            "--parallel",
            "4",
            "--workers",
            workers,
            "./work.sh",
            preexec_fn=enter,
            timeout=120,
        )
    finally:
        for _ in range(100):  # what is left in the group (a keeper letting go) is ended
            with open(f"{group}/cgroup.procs") as procs:
                left = procs.read().split()
            if not left:
                break
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), 9)
            time.sleep(0.1)
        os.rmdir(group)
    assert "Traceback" not in done.err, done.err
    assert done.code == 0 or len(done.err.splitlines()) <= 2 * int(workers), done.err
    ran = Counter((tmp_path / "ran.log").read_text().split()) if done.code == 0 else None
    assert ran is None or ran == Counter(str(i) for i in range(1, 13))
    if (tmp_path / "ran.log").exists():
        twice = [d for d, n in Counter((tmp_path / "ran.log").read_text().split()).items() if n > 1]
        assert twice == []
    found = cli.ok("sql", "select distinct status from datastatus where jobid = 'work'")
    assert "RUNNING" not in found.lines[2:], done.err
