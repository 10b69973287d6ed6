"""Adversarial sweep of the drain spread over worker processes (run/workers.py, RunJob's
side; run/worker.py; run/events.py): ``RunJob --all --parallel N --workers W``.

The judge is the job's own ``flock`` per chunk (as in test_lease): a second run beside a
live process of the first writes ``OVERLAP`` into the ledger.

Attacks that held: (filled in below as they are run)
"""

from __future__ import annotations

import os
import signal

import pytest
from hosts import alive
from test_workers import chunks, workers_of

from support import BOUND, rows, script, setting, start_runjob, statuses, wait_for

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
    chunks(cli, 8)
    setting(cli, "retries", "1")
    script(tmp_path, "work.sh", JUDGE + HELD)
    (tmp_path / "hold").touch()
    runjob = start_runjob(cli, *SPREAD)
    wait_for(lambda: len(_lines(tmp_path / "held")) == 4, what="four jobs to start")
    pids = workers_of(runjob.pid)
    assert len(pids) == 2
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
    for folder, _, files in os.walk(tmp_path):
        for name in files:
            path = os.path.join(folder, name)
            if name.endswith((".db", ".db-wal", ".db-shm")) or name in ("argv", "work.sh"):
                continue
            with open(path, "rb") as file:
                text = file.read()
            for secret in secrets:
                assert secret.encode() not in text, path
    logs = rows(tmp_path, "select count(*) from run where jobid = 'work'")
    assert logs == [(6,)]
