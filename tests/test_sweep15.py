"""Adversarial sweep of the drain spread over worker processes (run/workers.py, RunJob's
side; run/worker.py; run/events.py): ``RunJob --all --parallel N --workers W``, on the
real PostgreSQL test server and on SQLite, with real processes and signals.

The judge is the job's own ``flock`` per chunk (as in test_lease): a second run beside a
live process of the first writes ``OVERLAP`` into the ledger.

Breaks found (each a test here, fixed):

- A signal RunJob passed on while a worker was still starting (before it set its
  handlers) killed the worker: RunJob exited 1 with "a worker ... was killed by SIGTERM",
  not 128+n, and SIGINT printed "Fatal Python error" and a KeyboardInterrupt traceback.
  Now workers are born with the signals held (RunJob blocks them around the fork) until
  their handlers are set; a signal that came meanwhile stops the drain as it begins.
- A line in a worker's event pipe that is not an event (a job of the same user writing
  into /proc/$PPID/fd/N) was a JSONDecodeError traceback in RunJob, its workers stopped.
  Now: the drain goes on, RunJob ends with one error line, exit 1.
- A worker whose next job could not start for want of descriptors while the ends of its
  last runs were still being recorded gave up at once: those ends were never told, and
  RunJob's summary said "0 READY" of chunks READY in the store (drain.py: it now waits
  for them, as for runs under way).
- ``python -m dataflow.run.worker`` put RunJob's working folder first on the module path:
  a ``dataflow`` package there (another checkout, another version) ran as the worker (and
  as a folder drain's RunJobs). Now ``python -P`` (runner.python_command), unless that
  folder holds this very toolkit.
- A worker whose RunJob was killed (``kill -9``) while the worker was still starting
  took the process that adopted it for RunJob, and drained every chunk alone. RunJob
  now names itself (``--runjob PID``): such a worker claims nothing.
- SIGTERM to one worker alone was said as "exited with 143; the chunks it left RUNNING
  are marked FAILED...", though it had stopped and recorded its jobs; now said as that.
- A line of valid JSON shaped like an event but of the wrong types (an ``outcome`` whose
  duration is text) was a ValueError traceback in RunJob's report, or reported as it
  was (dataid ``['1']``). events.decode now checks each field's type as encode writes
  it (properties: every event goes through the pipe as it is; any other JSON is refused
  or an event RunJob can count).
- A spread drain whose job has no alerts setting of its own (the store-wide default
  applies) was stopped at its first failure, exit 3 ("cannot use the store ...
  terminating connection"), when the server had ended RunJob's session, idle while its
  workers drained (idle_session_timeout): the pager read the setting over it. Now the
  pager reads again over a new session, and a store that stays down costs the alert (a
  warning line), never the drain (alerts.py).

Attacks that held:

- ``kill -9`` of every worker's process group, and of RunJob with them, while their jobs
  run: the jobs live on, a second spread drain runs only the others, the abandoned
  chunks are recovered once the jobs end and rerun (retries), no overlap; one line,
  exit 1. The same for one worker on SQLite (``--workers 2``), and (both stores) for
  jobs that left helpers in sessions of their own and ended unrecorded: their chunks
  never run again while the helpers live.
- SIGSTOP of a worker for 2.5 times the bound (a long job, chunks claimed ahead) while
  other drains and ``recover`` run; SIGSTOP of RunJob for twice the bound (its workers
  fill the event pipe and wait); a worker's keeper killed or stopped (its jobs fenced,
  the other worker drains on): no overlap, every chunk READY in the end, no traceback.
- Every session of the database, or the keepers' alone, ended by the server every 0.2 s
  during a spread drain of 60 chunks: every chunk READY once, no traceback.
- SIGINT and SIGHUP mid-drain reach each job once (exit 128+n); SIGTERM to RunJob,
  workers, keepers and jobs at once (a service manager) ends in at most one line, 143.
- Jobs writing megabytes of binary, closing or dup'ing stdout/stderr, printing lines
  shaped like events: nothing reaches RunJob's output or the event pipe.
- No store password, passkey or decrypted password in any process's command line, in a
  log or output (a job printing its password is masked), nor the store's password or
  the passkey in a job's environment, nor the passkey in a worker's; a failing job's
  last words (a traceback naming the password) are told and recorded masked.
- A role short of connections (CONNECTION LIMIT 1-6) and hard limits of 12-32 open files
  (both stores): at most one warning and one error line, nothing run twice, a later
  drain finishes the rest. A reader that leaves (``| head -1``): the drain goes on.
- Dataids with a newline, quotes, non-ASCII and 5000 characters; nothing claimable (IN
  rows held, a retry delay, no chunk) said as RunJob's own drain says it; a
  ``max_parallel 1`` cap across two workers; arguments shaped like a worker's options
  and a ``--validate`` check; two spread drains racing; dataids a client wrote as
  numbers: each chunk once. Jobs that leave helpers in sessions of their own: RunJob's
  output ends with RunJob, and no chunk runs again beside them.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time

import pytest
from test_workers import chunks, workers_of

from hosts import alive
from support import (
    BIN,
    BOUND,
    host_policy,
    http_receiver,
    rows,
    script,
    setting,
    start,
    start_runjob,
    statuses,
    wait_for,
)

on_postgres = pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
# the job: one flock per chunk, held by every process it starts (descriptor 9)
JUDGE = """
exec 9>>"flock.$dataid"
flock -n 9 || echo "OVERLAP $dataid" >> ledger
echo "$dataid $$" >> ledger
"""
# it waits for the file go when the file hold was there as it started
HELD = 'if [ -e hold ]; then echo "$dataid $$" >> held; until [ -e go ]; do sleep 0.1; done; fi'
SPREAD = ("--all", "--parallel", "4", "--workers", "2", "./work.sh")


def _lines(path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _bounded(cli) -> None:
    cli.env["DATAFLOW_LIVENESS_TIMEOUT"] = str(BOUND)


def _no_overlap(tmp_path) -> list[str]:
    """The ledger's dataids, in order; no line of it says OVERLAP."""
    ledger = _lines(tmp_path / "ledger")
    assert not [line for line in ledger if line.startswith("OVERLAP")], ledger
    return [line.split()[0] for line in ledger]


def _four_held(cli, tmp_path):
    """A spread drain of 8 chunks (retries 1) whose first four jobs are running and held
    (until the file go): RunJob, and its two workers' pids."""
    chunks(cli, 8)
    setting(cli, "retries", "1")
    script(tmp_path, "work.sh", JUDGE + HELD)
    (tmp_path / "hold").touch()
    runjob = start_runjob(cli, *SPREAD)
    wait_for(lambda: len(_lines(tmp_path / "held")) == 4, what="four jobs to start")
    pids = workers_of(runjob.pid)
    assert len(pids) == 2
    return runjob, pids


def _said_once(err: str) -> None:
    """At most one warning line and one error line, nothing else (no traceback)."""
    lines = err.splitlines()
    assert all(line.startswith(("warning: ", "error: ")) for line in lines), err
    assert sum(line.startswith("warning: ") for line in lines) <= 1, err
    assert sum(line.startswith("error: ") for line in lines) <= 1, err


def _sigmask(pid: int, field: str) -> int:
    with open(f"/proc/{pid}/status") as file:
        for line in file:
            if line.startswith(field + ":"):
                return int(line.split()[1], 16)
    raise AssertionError(field)


def _catches(pid: int, number: int) -> bool:
    return bool(_sigmask(pid, "SigCgt") & (1 << (number - 1)))


@on_postgres
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
def test_garbage_on_the_event_pipe_is_one_line(cli, tmp_path):
    """A job that writes into its worker's event pipe (/proc/$PPID/fd/N, the same user):
    RunJob ends in one line on stderr, never a traceback, and its chunks are recorded."""
    chunks(cli, 4)
    script(
        tmp_path,
        "work.sh",
        JUDGE + "n=$(tr '\\0' '\\n' < /proc/$PPID/cmdline | sed -n '/^--events$/{n;p;}')\n"
        'printf "not json\\n{\\"kind\\": 7}\\n\\xff\\xfe\\n" > /proc/$PPID/fd/$n',
    )
    done = cli.runjob(*SPREAD)
    assert done.code == 1 and done.err.count("\n") == 1, done
    assert "sent a line that is not an event" in done.err and "'not json'" in done.err
    assert "work: 4 READY, 0 FAILED in" in done.out  # the drain went on
    assert sorted(_no_overlap(tmp_path)) == ["1", "2", "3", "4"]


@on_postgres
def test_a_run_on_line_in_the_event_pipe_is_one_line_and_bounded(cli, tmp_path):
    """A job that pours 8 MB without a newline into its worker's event pipe: RunJob ends
    in one line and the drain goes on (RunJob holds at most workers.LINE_MAX bytes of such
    a line; it held the whole line, however long, copied again at every read)."""
    chunks(cli, 2)
    script(
        tmp_path,
        "work.sh",
        JUDGE + "n=$(tr '\\0' '\\n' < /proc/$PPID/cmdline | sed -n '/^--events$/{n;p;}')\n"
        '[ "$dataid" = 1 ] && head -c 8000000 /dev/zero | tr "\\0" x > /proc/$PPID/fd/$n\n'
        "true",
    )
    done = cli.runjob(*SPREAD)
    assert done.code == 1 and done.err.count("\n") == 1, done
    assert "sent a line that is not an event" in done.err and "'xxxx" in done.err
    # (the worker's next event, glued to the run-on line, is lost to the report)
    assert statuses(tmp_path, "work") == {"1": "READY", "2": "READY"}
    assert sorted(_no_overlap(tmp_path)) == ["1", "2"]


FORGED = [  # shaped like events, of the wrong types
    '{"kind": "ended", "dataid": "1", "claim": ["1", 1, 1, "log", "t"], "outcome": [0, "x"],'
    ' "status": "READY", "counts": [1, 1], "live": 0, "cap": null}',
    '{"kind": "launch", "dataid": "1", "claim": ["1", "one", [], "log", "t"], "outcome": null,'
    ' "status": "", "counts": [0, 0], "live": 0, "cap": null}',
    '{"kind": "ended", "dataid": ["1"], "claim": ["1", 1, 1, "log", "t"], "outcome": [1, 0.1],'
    ' "status": "FAILED", "counts": ["a"], "live": 0, "cap": null}',
]


@pytest.mark.parametrize(
    "forged",
    [
        FORGED[0],
        FORGED[1],
        FORGED[2],
    ],
)
@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)
def test_an_event_of_the_wrong_types_is_one_line(cli, tmp_path, forged):
    """A job that writes a line shaped like an event, but of the wrong types, into its
    worker's event pipe: one error line, never a traceback; the drain goes on."""
    chunks(cli, 2)
    (tmp_path / "forged").write_text(forged + "\n")
    script(
        tmp_path,
        "work.sh",
        JUDGE + "n=$(tr '\\0' '\\n' < /proc/$PPID/cmdline | sed -n '/^--events$/{n;p;}')\n"
        "cat forged > /proc/$PPID/fd/$n",
    )
    done = cli.runjob(*SPREAD)
    assert done.code == 1 and done.err.count("\n") == 1, done
    assert "sent a line that is not an event" in done.err
    assert sorted(_no_overlap(tmp_path)) == ["1", "2"]


@on_postgres
def test_hostile_output_never_reaches_runjob(cli, tmp_path):
    """Jobs that write megabytes of binary to stdout and stderr, close them, or dup them
    onto other descriptors: RunJob's own output is its report, every chunk READY once."""
    chunks(cli, 8)
    script(
        tmp_path,
        "work.sh",
        JUDGE + "case $((dataid % 4)) in\n"
        "0) head -c 5000000 /dev/urandom; head -c 5000000 /dev/urandom >&2 ;;\n"
        "1) exec >&- 2>&-; sleep 0.2 ;;\n"
        "2) exec 3>&1 4>&2 1>&- 2>&-; head -c 300000 /dev/urandom >&3; printf '\\0\\n' >&4 ;;\n"
        '3) printf \'%s\\n\' \'{"kind": "error", "message": "x", "code": 9}\' ;;\n'
        "esac",
    )
    done = cli.runjob(*SPREAD, timeout=300)
    assert done.code == 0 and done.err == "", done.err[-2000:]
    assert len(done.out) < 2000 and "kind" not in done.out, done.out[-2000:]
    assert "work: 8 READY, 0 FAILED in" in done.out
    assert sorted(_no_overlap(tmp_path), key=int) == [str(n) for n in range(1, 9)]


@on_postgres
def test_no_secret_in_any_command_line_nor_log(cli, tmp_path, address):
    """The store's password (in its URL), the passkey and a decrypted password are in no
    command line of RunJob's processes (workers, keepers, jobs), and in no log or output,
    though a job prints its password."""
    url = address.replace("@", ":St0rePw-91@", 1)  # the test server trusts its sessions
    chunks(cli, 6)
    token = cli.ok("crypt", "-e", "Dataset-Pw-55", env={"PASSKEY": "pk-Zq81"}).out.strip()
    cli.ok("dml", f"update dataset set encryptedpass='{token}' where datasetid='src'")
    script(
        tmp_path,
        "work.sh",
        'echo "password is $src_password"; echo "$src_password" >&2\n'
        "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done >> argv\n"
        "env >> envs; tr '\\0' '\\n' < /proc/$PPID/environ >> worker-envs\n"
        "sleep 0.3",
    )
    done = cli.runjob(*SPREAD, env={"PASSKEY": "pk-Zq81", "DATAFLOW_DB": url})
    assert done.code == 0, done
    assert "work: 6 READY" in done.out
    secrets = ("St0rePw-91", "Dataset-Pw-55", "pk-Zq81")
    argv = (tmp_path / "argv").read_text()
    assert "dataflow.run.worker" in argv
    for secret in secrets:
        assert secret not in argv and secret not in done.out + done.err
    # the job's environment: its dataset's password, not the store's nor the passkey;
    # its worker's: no passkey
    envs, worker_envs = (tmp_path / "envs").read_text(), (tmp_path / "worker-envs").read_text()
    assert "src_password=Dataset-Pw-55" in envs and "DATAFLOW_DB=" in envs
    assert "St0rePw-91" not in envs and "pk-Zq81" not in envs + worker_envs
    for folder, _, files in os.walk(tmp_path):
        for name in files:
            path = os.path.join(folder, name)
            if name.endswith((".db", ".db-wal", ".db-shm")) or name in (
                "argv",
                "work.sh",
                "envs",
                "worker-envs",
            ):
                continue
            with open(path, "rb") as file:
                text = file.read()
            for secret in secrets:
                assert secret.encode() not in text, path
    logs = rows(tmp_path, "select count(*) from run where jobid = 'work'")
    assert logs == [(6,)]


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


@on_postgres
@pytest.mark.slow
@pytest.mark.parametrize("whose", ["every", "keepers"])
def test_sessions_ended_by_the_server_cost_a_spread_drain_nothing(cli, tmp_path, address, whose):
    """Every session of the store's database but the test's own (or the keepers' alone,
    found by their backend's advisory locks) ended by the server every 0.2 s while a
    spread drain runs 60 quick chunks: every chunk READY once, no overlap, no traceback."""
    import threading

    import psycopg

    chunks(cli, 60)
    script(tmp_path, "work.sh", JUDGE + "sleep 0.05")
    which = {
        "every": "datname = current_database()",
        "keepers": "pid in (select pid from pg_locks where locktype = 'advisory')",
    }[whose]
    ended = [0]
    stop = threading.Event()

    def ender() -> None:
        with psycopg.connect(address, autocommit=True) as conn:
            while not stop.wait(0.2):
                found = conn.execute(
                    f"select count(pg_terminate_backend(pid)) from pg_stat_activity "
                    f"where {which} and pid <> pg_backend_pid() and datname = current_database()"
                ).fetchone()
                ended[0] += found[0]

    thread = threading.Thread(target=ender)
    thread.start()
    try:
        done = cli.runjob(*SPREAD, timeout=300)
    finally:
        stop.set()
        thread.join()
    assert ended[0] > 0
    assert "Traceback" not in done.err, done.err
    if done.code == 0:
        assert set(statuses(tmp_path, "work").values()) == {"READY"}
    else:  # a store that fails for longer than its patience: one line, exit 3
        assert done.code == 3 and done.err.count("\n") == 1, done
    ran = _no_overlap(tmp_path)
    assert len(ran) == len(set(ran))  # each chunk once


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
@pytest.mark.slow  # a worker that cannot connect waits out the store's patience
@pytest.mark.parametrize("limit", [1, 2, 3, 4, 6])
def test_a_role_short_of_connections_ends_in_one_line(cli, tmp_path, address, limit):
    """The store's role may hold ``limit`` sessions (``CONNECTION LIMIT``: what a server
    short of max_connections says too): RunJob of a spread drain ends, no traceback, at
    most one warning line (the store failed for a while) and one error line; what it
    claimed is READY or recovered by a later drain."""
    import psycopg

    role = f"lim_{os.getpid()}_{limit}"
    with psycopg.connect(address, autocommit=True) as conn:
        conn.execute(f"create role {role} login connection limit {limit}")
        conn.execute(f"grant all on all tables in schema public to {role}")
        conn.execute(f"grant all on all sequences in schema public to {role}")
        conn.execute(f"grant all on schema public to {role}")
        conn.execute(f"grant all on all functions in schema public to {role}")
    try:
        chunks(cli, 12)
        script(tmp_path, "work.sh", JUDGE + "sleep 0.1")
        url = address.replace("://", f"://{role}@").split("@", 1)
        url = url[0] + "@" + url[1].split("@", 1)[1]
        done = cli.runjob(*SPREAD, env={"DATAFLOW_DB": url}, timeout=300)
        _said_once(done.err)
        assert done.code in (0, 1, 3), done
        again = cli.runjob(*SPREAD)
        assert again.code == 0, again
        assert set(statuses(tmp_path, "work").values()) == {"READY"}
        ran = _no_overlap(tmp_path)
        assert len(ran) == len(set(ran)) == 12, ran
    finally:
        with psycopg.connect(address, autocommit=True) as conn:
            conn.execute(f"drop owned by {role}")
            conn.execute(f"drop role {role}")


@pytest.mark.parametrize(
    "store_kind,files",
    [(kind, files) for kind in ("sqlite", "postgres") for files in (12, 16, 20, 24, 32)],
    indirect=["store_kind"],
)
def test_a_spread_drain_short_of_descriptors_ends_in_one_line(cli, tmp_path, files):
    """RunJob and its workers under a hard limit of a few dozen open files: at most one
    warning or error line, no traceback, nothing left RUNNING without a process."""
    from support import open_files

    chunks(cli, 12)
    script(tmp_path, "work.sh", JUDGE + 'sleep 0.05; head -c 100000 /dev/zero | tr "\\0" x')
    done = cli.runjob(*SPREAD, preexec_fn=open_files(files), timeout=300)
    _said_once(done.err)
    ran = len(_lines(tmp_path / "ledger"))
    summary = [line for line in done.out.splitlines() if "work: " in line]
    assert not summary or f"work: {ran} READY, 0 FAILED" in summary[0], (done, ran)
    again = cli.runjob(*SPREAD)
    assert again.code == 0, again
    assert set(statuses(tmp_path, "work").values()) == {"READY"}
    ran = _no_overlap(tmp_path)
    assert len(ran) == len(set(ran)) == 12, ran


@on_postgres
def test_a_reader_that_leaves_costs_a_spread_drain_nothing(cli, tmp_path):
    """``RunJob ... | head -1``: RunJob's output is a pipe nobody reads any more; the
    drain goes on, every chunk READY once, exit 0, nothing on stderr."""

    chunks(cli, 12)
    script(tmp_path, "work.sh", JUDGE + "sleep 0.2")
    done = cli.sh(f"{BIN}/RunJob {' '.join(SPREAD)} | head -1; echo rc ${{PIPESTATUS[0]}}")
    assert done.out.endswith("rc 0\n") and done.err == "", done
    assert set(statuses(tmp_path, "work").values()) == {"READY"}
    assert sorted(_no_overlap(tmp_path), key=int) == [str(n) for n in range(1, 13)]


@pytest.mark.both_stores
def test_dataids_a_pipe_line_cannot_hold_whole(cli, tmp_path):
    """Dataids with a newline, a quote, a backslash, non-ASCII, 5000 characters (an event
    longer than a pipe writes at once): each run once, READY, told in RunJob's report."""
    chunks(cli, 1)
    cli.ok("dml", "delete from datastatus")
    odd = ["a\nb", 'q"uo\\te', "caf\u00e9-\u65e5\u672c", "x" * 5000, "{}", "1e3"]
    for dataid in odd:
        _insert_ready(tmp_path, dataid)
    # a file a run (two jobs appending to one file may interleave: printf writes "a\n" first)
    script(tmp_path, "work.sh", 'printf "%s" "$dataid" > "$(mktemp ran.XXXXXX)"')
    done = cli.runjob(*SPREAD)
    assert done.code == 0 and done.err == "", done
    assert f"work: {len(odd)} READY, 0 FAILED" in done.out
    ran = [path.read_text() for path in tmp_path.glob("ran.*")]
    assert sorted(ran) == sorted(odd)
    assert set(statuses(tmp_path, "work").values()) == {"READY"}


def _insert_ready(tmp_path, dataid: str) -> None:
    """A READY chunk of src (bound parameters: any text)."""
    from support import ADDRESSES

    address = ADDRESSES.get(tmp_path, tmp_path / "dataflow.db")
    sql = "insert into datastatus values ('src','fakejob',?,'OUT','READY','2026-01-01')"
    if isinstance(address, str):
        import psycopg

        with psycopg.connect(address) as conn:
            conn.execute(sql.replace("?", "%s"), (dataid,))
    else:
        import sqlite3

        with sqlite3.connect(address) as conn:
            conn.execute(sql, (dataid,))


@pytest.mark.both_stores
@pytest.mark.parametrize("state", ["none", "consumed", "delayed"])
def test_nothing_to_claim_is_said_as_a_single_drain_says_it(cli, tmp_path, state):
    """Chunks counted as waiting that no worker can claim (an IN row of the job held on
    each; FAILED with a retry delay not yet passed) or none at all: the spread drain says
    what the drain in RunJob says, with its exit code."""
    import re

    chunks(cli, 4)
    script(tmp_path, "work.sh", "exit 3")
    if state == "consumed":
        for n in range(1, 5):
            cli.ok(
                "dml", f"insert into datastatus values ('src','work','{n}','IN','RUNNING',now())"
            )
    elif state == "delayed":
        setting(cli, "retries", "2")
        setting(cli, "retry_delay", "3600")
        assert cli.runjob(*SPREAD).code == 1  # every chunk FAILED, a retry left
    elif state == "none":
        cli.ok("dml", "delete from datastatus")
    said = {}
    for processes in ("1", "2"):
        done = cli.runjob("--all", "--parallel", "4", "--workers", processes, "./work.sh")
        assert "Traceback" not in done.err
        text = re.sub(r"\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d [AP]M \S* ?\d{4}", "DATE", done.out)
        said[processes] = (done.code, re.sub(r"in [\d.]+ s \([\d.]+/s\)", "in S", text), done.err)
    assert said["2"] == said["1"], said


@on_postgres
def test_a_cap_holds_across_workers(cli, tmp_path):
    """``max_parallel 1`` under ``--parallel 4 --workers 2``: never two jobs at once (a
    flock every job takes), every chunk READY once, the cap said once."""
    chunks(cli, 10)
    setting(cli, "max_parallel", "1")
    script(
        tmp_path,
        "work.sh",
        JUDGE + 'exec 8>>cap.lock; flock -n 8 || echo "CAP $dataid" >> ledger; sleep 0.1',
    )
    done = cli.runjob(*SPREAD, timeout=300)
    assert done.code == 0 and done.err == "", done
    assert "CAP" not in (tmp_path / "ledger").read_text()
    assert sorted(_no_overlap(tmp_path), key=int) == [str(n) for n in range(1, 11)]
    assert done.out.count("max_parallel") <= 1, done.out


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


def _keeper_of(worker: int) -> int:
    """The keeper a worker forked (its child in a session of its own)."""
    found = [pid for pid in _children(worker) if os.getsid(pid) == pid]
    assert len(found) == 1, found
    return found[0]


@on_postgres
@pytest.mark.slow  # a stopped keeper is seen within a quarter of the bound
@pytest.mark.parametrize("how", [signal.SIGKILL, signal.SIGSTOP])
def test_a_workers_keeper_killed_or_stopped_fences_its_runs_only(cli, tmp_path, how):
    """The keeper of one worker killed (or stopped) while its jobs run: that worker's
    jobs are killed before anyone may take their chunks, the other worker drains on,
    RunJob ends in one line; a later drain runs what is left, never beside a live run."""
    _bounded(cli)
    chunks(cli, 16)
    setting(cli, "retries", "1")
    script(tmp_path, "work.sh", JUDGE + "sleep 2")
    runjob = start_runjob(cli, *SPREAD)
    wait_for(lambda: len(_lines(tmp_path / "ledger")) >= 4, what="four jobs to start")
    worker = workers_of(runjob.pid)[0]
    keeper = _keeper_of(worker)
    os.kill(keeper, how)
    try:
        out, err = runjob.communicate(timeout=120)
    finally:
        if how == signal.SIGSTOP:
            os.kill(keeper, signal.SIGCONT)
    _said_once(err)
    assert runjob.returncode != 0, (out, err)

    def drained() -> bool:
        done = cli.runjob(*SPREAD)
        assert "Traceback" not in done.err, done
        return set(statuses(tmp_path, "work").values()) == {"READY"}

    wait_for(drained, timeout=120, what="every chunk READY")
    _no_overlap(tmp_path)


@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)
def test_a_dataflow_package_in_the_jobs_folder_is_not_the_workers(cli, tmp_path):
    """RunJob (its installed entry point) run in a folder that holds a ``dataflow``
    package of its own (another checkout, another version): its workers run the
    toolkit RunJob runs, not that folder's (``python -m`` puts the working folder first
    on the module path)."""
    import sys

    runjob = os.path.join(os.path.dirname(sys.executable), "RunJob")
    if not os.path.exists(runjob):
        pytest.skip("no installed RunJob entry point")
    chunks(cli, 6)
    script(tmp_path, "work.sh", JUDGE + "sleep 0.2")
    planted = tmp_path / "dataflow" / "run"
    planted.mkdir(parents=True)
    (tmp_path / "dataflow" / "__init__.py").write_text("")
    (planted / "__init__.py").write_text("")
    (planted / "worker.py").write_text("open('shadowed', 'w').write('yes')\n")
    done = cli(runjob, *SPREAD)
    assert not (tmp_path / "shadowed").exists()
    assert done.code == 0 and done.err == "", done
    assert sorted(_no_overlap(tmp_path), key=int) == [str(n) for n in range(1, 7)]


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
@pytest.mark.slow  # waits for every process to end, then for a later drain (> 10 s)
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


@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)
def test_a_jobs_arguments_and_check_reach_it_as_in_a_single_drain(cli, tmp_path):
    """Arguments that look like a worker's own options (``--job``, ``--events``, ``--``,
    ``-h``) and a ``--validate`` check: the job in a worker gets what it gets in RunJob's
    own drain, and the check fails what it fails."""
    chunks(cli, 6)
    script(tmp_path, "work.sh", 'printf "%s|" "$@" >> "args.$dataid"')
    script(tmp_path, "check.sh", "[ $((dataid % 3)) != 0 ]")
    args = ["--job", "other", "--events", "1", "--", "-h", "--parallel", "9", ""]
    for processes in ("1", "2"):
        cli.ok("dml", "delete from datastatus where jobid = 'work'")
        for n in range(1, 7):
            (tmp_path / f"args.{n}").unlink(missing_ok=True)
        done = cli.runjob(
            "--all",
            "--parallel",
            "4",
            "--workers",
            processes,
            "--validate",
            "./check.sh",
            "./work.sh",
            *args,
        )
        assert done.code == 1 and done.err == "", done
        assert "work: 4 READY, 2 FAILED" in done.out
        for n in range(1, 7):
            assert (tmp_path / f"args.{n}").read_text() == "|".join(args) + "|", processes
        assert statuses(tmp_path, "work") == {
            str(n): "FAILED" if n % 3 == 0 else "READY" for n in range(1, 7)
        }


@on_postgres
def test_racing_spread_drains_run_each_chunk_once(cli, tmp_path):
    """Two spread drains of the same job at once (two cron lines that overlap): every
    chunk READY once, no overlap, one history row each."""
    chunks(cli, 80)
    script(tmp_path, "work.sh", JUDGE + "sleep 0.02")
    first = start_runjob(cli, *SPREAD)
    second = cli.runjob(*SPREAD, timeout=300)
    out, err = first.communicate(timeout=300)
    assert (first.returncode, err, second.code, second.err) == (0, "", 0, ""), (out, second)
    assert sorted(_no_overlap(tmp_path), key=int) == [str(n) for n in range(1, 81)]
    assert rows(tmp_path, "select count(*) from run where jobid = 'work'") == [(80,)]


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
def test_dataids_written_as_numbers_are_told_as_any_other(cli, tmp_path):
    """Chunks whose dataid a client wrote as a number (``values (..., 5, ...)``; SQLite's
    seed columns have no type): a spread drain runs and reports them as RunJob's own."""
    chunks(cli, 1)
    cli.ok("dml", "delete from datastatus")
    values = ", ".join(f"('src','fakejob',{n},'OUT','READY',now())" for n in (5, 7, 12, 30))
    cli.ok("dml", f"insert into datastatus values {values}")
    script(tmp_path, "work.sh", JUDGE)
    done = cli.runjob(*SPREAD)
    assert done.code == 0 and done.err == "", done
    assert "work: 4 READY, 0 FAILED" in done.out
    assert sorted(_no_overlap(tmp_path), key=int) == ["5", "7", "12", "30"]


@on_postgres
def test_a_caller_reading_a_spread_drains_output_never_waits_for_a_helper(cli, tmp_path):
    """Jobs that each leave a helper in a session of its own (descriptors kept): RunJob of
    a spread drain ends while they live (its output and the event pipes are nobody
    else's), and a second drain never runs their chunks beside them."""
    chunks(cli, 4)
    script(
        tmp_path,
        "work.sh",
        JUDGE + "setsid bash -c 'until [ -e go ]; do sleep 0.1; done' &\necho \"$!\" >> helpers",
    )
    done = cli.runjob(*SPREAD, timeout=120)  # a pipe held open by a helper: a timeout
    assert done.code == 0 and done.err == "", done
    helpers = [int(pid) for pid in _lines(tmp_path / "helpers")]
    assert len(helpers) == 4 and all(alive(pid) for pid in helpers)
    cli.ok("dml", "update datastatus set status = 'RESUBMIT' where jobid = 'work'")
    again = cli.runjob(*SPREAD)
    assert "Traceback" not in again.err, again
    (tmp_path / "go").touch()
    wait_for(lambda: not any(alive(pid) for pid in helpers), what="the helpers to end")
    _no_overlap(tmp_path)


def _events():
    from pathlib import Path

    from hypothesis import strategies as st

    from dataflow.run.claims import Claim
    from dataflow.run.events import Event
    from dataflow.run.runner import Outcome

    text = st.text(
        st.characters(codec="utf-8") | st.characters(min_codepoint=0xDC80, max_codepoint=0xDCFF)
    )
    count = st.integers(-(2**63), 2**63 - 1)
    claims = st.builds(
        lambda d, a, r, p, t: Claim(d, a, r, None, Path(p), t, ()), text, count, count, text, text
    )
    seconds = st.floats(allow_nan=False, allow_infinity=False)
    outcomes = st.builds(
        Outcome,
        count,
        seconds,
        st.none() | seconds,
        st.none() | count,
        st.none() | st.sampled_from(["passed", "failed"]),
        st.lists(text).map(tuple),
        st.none() | text,
        st.none() | text,
        st.none() | text,
    )
    kinds = st.sampled_from(
        ["launch", "ending", "ended", "fenced", "store", "cap_full", "unusable"]
    )
    return st.builds(
        Event,
        kinds,
        text,
        st.none() | claims,
        st.none() | outcomes,
        text,
        st.tuples(count, count),
        count,
        st.none() | count,
    )


def _json():
    from hypothesis import strategies as st

    scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
    return st.recursive(scalars, lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner))


def test_events_go_through_the_pipe_as_they_are():
    """Every event a worker may write is read back as it was (its claim less the lock,
    which stays in the worker)."""
    from hypothesis import given, settings

    from dataflow.run.events import decode, encode

    @settings(max_examples=300, deadline=None)
    @given(_events())
    def check(event):
        read = decode(encode(event))
        claim = event.claim and event.claim._replace(lock=None)
        assert read == event._replace(claim=claim)

    check()


def test_any_other_line_is_refused_or_an_event_of_the_right_types():
    """A line another process wrote into the pipe, shaped like an event or not: refused
    (ValueError, LookupError) or an event RunJob can count, never another error."""
    import json

    from hypothesis import given, settings
    from hypothesis import strategies as st

    from dataflow.run.events import Tally, decode

    keys = ["kind", "dataid", "claim", "outcome", "status", "counts", "live", "cap"]
    shaped = st.fixed_dictionaries({key: _json() for key in keys})

    @settings(max_examples=200, deadline=None)
    @given(_json() | shaped)
    def check(fields):
        try:
            event = decode(json.dumps(fields))
        except (ValueError, LookupError):
            return
        Tally().count(event)
        assert isinstance(event.dataid, str) and isinstance(event.status, str)

    check()


@on_postgres
@pytest.mark.parametrize("where", ["job", "store-wide"])
def test_alerts_of_a_spread_drain_outlive_runjobs_idle_session(cli, tmp_path, address, where):
    """RunJob's own session idles while its workers drain; the server ends it (as an
    idle_session_timeout would). A failure's alert (the job's setting, or the store-wide
    default that RunJob reads from the store) is still sent, the drain is not stopped,
    and RunJob ends as the drain did: exit 1, no error line (a warning that the store
    failed for a while: the workers' sessions were ended too)."""
    import psycopg

    cli.env["DATAFLOW_ALERT_TIMEOUT"] = "60"
    host_policy(tmp_path, '[alerts]\ntargets = ["json://127.0.0.1"]\n')
    chunks(cli, 6)
    script(tmp_path, "work.sh", JUDGE + "until [ -e go ]; do sleep 0.1; done; [ $dataid != 3 ]")
    with http_receiver(lambda _, __, body: json.loads(body)) as receiver:
        receiver.url = f"json://127.0.0.1:{receiver.server_address[1]}/hook"  # type: ignore[attr-defined]
        job = "work" if where == "job" else "*"
        cli.ok(
            "dml",
            f"insert into job (jobid, itemtype, itemvalue) values ('{job}', 'alerts', '{receiver.url}')",
        )
        runjob = start_runjob(cli, *SPREAD)
        wait_for(lambda: len(_lines(tmp_path / "ledger")) == 4, what="four jobs to start")
        with psycopg.connect(address, autocommit=True) as conn:
            conn.execute(
                "select pg_terminate_backend(pid) from pg_stat_activity"
                " where datname = current_database() and pid <> pg_backend_pid()"
            )
        (tmp_path / "go").touch()
        out, err = runjob.communicate(timeout=120)
        assert runjob.returncode == 1, (out, err)  # the workers' ended sessions: a warning
        assert all(line.startswith("warning: the store failed for") for line in err.splitlines())
        assert "work: 5 READY, 1 FAILED" in out
        assert [got["title"] for got in receiver.got] == ["dataflow: work 3 FAILED"]


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
def test_a_worker_whose_runjob_died_as_it_started_claims_nothing(cli, tmp_path):
    """RunJob killed (``kill -9``) while its workers are still starting (frozen here
    before they have looked who their parent is): they claim nothing, as a worker whose
    RunJob is gone later claims nothing more."""
    chunks(cli, 12)
    script(tmp_path, "work.sh", JUDGE + "sleep 0.1")
    for _ in range(20):  # until the workers are caught before their handlers are set
        cli.ok("dml", "delete from datastatus where jobid = 'work'")
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


@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)
def test_a_failing_jobs_last_words_never_show_its_password(cli, tmp_path):
    """A job that fails with a Python traceback naming its decrypted password: the
    report (the last line of the traceback, told by the worker), the history and the log
    show it masked, in a worker as in RunJob's own drain."""
    chunks(cli, 2)
    token = cli.ok("crypt", "-e", "Dataset-Pw-55", env={"PASSKEY": "pk-Zq81"}).out.strip()
    cli.ok("dml", f"update dataset set encryptedpass='{token}' where datasetid='src'")
    script(
        tmp_path,
        "work.sh",
        "echo 'Traceback (most recent call last):' >&2\n"
        'echo "ValueError: login refused for password $src_password" >&2; exit 1',
    )
    for processes in ("1", "2"):
        cli.ok("dml", "delete from datastatus where jobid = 'work'")
        done = cli.runjob(
            "--all",
            "--parallel",
            "2",
            "--workers",
            processes,
            "./work.sh",
            env={"PASSKEY": "pk-Zq81"},
        )
        assert done.code == 1 and "ValueError: login refused" in done.out, done
        assert "Dataset-Pw-55" not in done.out + done.err, processes
        history = rows(tmp_path, "select * from run where jobid = 'work'")
        assert "Dataset-Pw-55" not in repr(history), processes
    for folder, _, files in os.walk(tmp_path / "state"):
        for name in files:
            with open(os.path.join(folder, name), "rb") as file:
                assert b"Dataset-Pw-55" not in file.read(), name
