"""Chaos on a shared store: two hosts drain a 2-job chain while an adversary kills and cuts.

Every 0.3 s the adversary picks one of: ``kill -9`` of a RunJob alone, of a
RunJob's whole process group, of a host's lease holder, of a job; ``pg_terminate_backend`` of a
random session of the store; and once, a restart of the server. Jobs sometimes leave a
detached helper (its own session, its descriptors closed but the ledger's flock). The
judge is the job's own ``flock`` per chunk: a second run beside a live process of the
first writes ``OVERLAP`` in the ledger (only when ``flock`` says the lock is held: one
killed by the adversary, as any process of a job may be, says nothing and is run again).
In the end, after ``recover``, every chunk is READY, none RUNNING, and nothing overlapped.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest

from support import ADDRESSES, rows, script, two_hosts
from support.hosts import environ_of, processes_of
from support.pgserver import _restart

CHUNKS = 200  # x 2 jobs: at least 300 runs
BOUND = 4  # DATAFLOW_LIVENESS_TIMEOUT, seconds
KINDS = ("runjob", "group", "holder", "job", "session")
CHAOS_S = 150  # how long the adversary works (bounded: then the hosts finish the work)
JOB = f"""
echo "try $jobid $dataid $$ $DATAFLOW_HOST $DATAFLOW_RUN $(date +%s.%N)" >> ledger
exec 9>>"flock.$jobid.$dataid"
for try in 1 2 3 4 5 6 7 8 9 10; do  # flock killed (the adversary kills any process of a
    flock -n -E 75 9 && break          # job's) is no verdict: 75 alone is a lock held
    s=$?
    [ $s = 75 ] || [ $try = 10 ] && {{
        echo "OVERLAP $jobid $dataid $$ $DATAFLOW_HOST $(date +%s.%N) $s" >> ledger; break; }}
done
echo "$jobid $dataid $$ $DATAFLOW_HOST $DATAFLOW_RUN $(date +%s.%N)" >> ledger
if [ $((RANDOM % 4)) = 0 ]; then  # a helper that leaves, holding the flock a while
    setsid {sys.executable} -c 'import os, sys, time
os.closerange(3, 9); os.closerange(10, 65536); time.sleep(0.5)
with open("ledger", "a") as ledger:
    print("helper", *sys.argv[1:], os.getpid(), "ends", time.time(), file=ledger)' \
        $jobid $dataid </dev/null >/dev/null 2>&1 &
fi
sleep 0.$((RANDOM % 6))
echo "end $jobid $dataid $$ $(date +%s.%N)" >> ledger
"""
# a host: RunJob of both jobs, again and again, until told to stop; each RunJob in a
# process group of its own, as cron starts it (a kill of its group spares the loop)
LOOP = """
while [ ! -e stop ]; do
    setsid -w RunJob --all --parallel 2 ./A.sh >/dev/null 2>&1
    setsid -w RunJob --all ./B.sh >/dev/null 2>&1
    sleep 0.1
done
"""


def _stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as file:
        return file.read().rsplit(")", 1)[1].split()


def _cmdline(pid: int) -> str:
    with open(f"/proc/{pid}/cmdline", "rb") as file:
        return file.read().replace(b"\0", b" ").decode(errors="replace")


def _who(pid: int) -> str:
    """A process, for a failure's story: its command's end and the chunk it runs."""
    with contextlib.suppress(OSError):
        env = environ_of(pid)
        chunk = b" ".join(env.get(name, b"-") for name in (b"jobid", b"dataid", b"DATAFLOW_HOST"))
        return f"{_cmdline(pid)[-30:]!r} {chunk.decode(errors='replace')}"
    return "(gone)"


def _victims(host) -> dict[str, list[int]]:
    """A host's RunJobs (and their drains' workers), its lease holder and its jobs."""
    found: dict[str, list[int]] = {"runjob": [], "holder": [], "job": []}
    for pid in processes_of(host.env):
        with contextlib.suppress(OSError, IndexError):
            command = _cmdline(pid)
            if "dataflow.run.lease.holderprocess" in command:
                found["holder"].append(pid)
            elif "runjob" in command.lower() or "dataflow.run.drain.worker" in command:
                found["runjob"].append(pid)
            elif "/A.sh" in command or "/B.sh" in command:
                found["job"].append(pid)
    return found


def _terminate_a_session(address: str) -> None:
    import psycopg

    with contextlib.suppress(psycopg.Error), psycopg.connect(address, autocommit=True) as conn:
        pids = [
            pid
            for (pid,) in conn.execute(
                "SELECT pid FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid()"
            )
        ]
        if pids:
            conn.execute("SELECT pg_terminate_backend(%s)", (random.choice(pids),))


@pytest.mark.slow
def test_two_hosts_under_chaos_never_run_a_chunk_twice(tmp_path, pg_database, pg_server):
    hosts = two_hosts(tmp_path, pg_database, BOUND)
    ADDRESSES[tmp_path] = pg_database
    a = hosts[0]
    a.ok("createtables")
    a.ok("dml", "insert into dataset (datasetid) values ('src'), ('mid'), ('dst')")
    a.ok(
        "dml",
        "insert into job (jobid, itemtype, datasetid, itemvalue) values "
        "('A','IN','src',null), ('A','OUT','mid',null), ('B','IN','mid',null), "
        "('B','OUT','dst',null), ('A','retries',null,'1000'), ('B','retries',null,'1000')",
    )
    a.ok("ready", "src", "--from", "1", "--to", str(CHUNKS))
    for name in ("A", "B"):
        script(tmp_path, f"{name}.sh", JOB)
    (tmp_path / "loop.sh").write_text(LOOP)
    loops = [
        subprocess.Popen(["bash", "loop.sh"], cwd=tmp_path, env=host.env, start_new_session=True)
        for host in hosts
    ]
    kills: dict[str, int] = {}
    blows: list[str] = []  # what the adversary killed, and when
    stop = threading.Event()

    def adversary() -> None:
        rng = random.Random(20)
        restart_at = time.monotonic() + 10
        while not stop.wait(0.3):
            if restart_at and time.monotonic() > restart_at:
                _restart(pg_server)
                kills["server restart"] = 1
                restart_at = 0
                continue
            kind = rng.choice(KINDS)
            if kind == "session":
                _terminate_a_session(pg_database)
            else:
                found = _victims(rng.choice(hosts))
                pool = found["runjob" if kind == "group" else kind]
                if not pool:
                    continue
                victim = rng.choice(pool)
                told = f"{kind} {victim} {_who(victim)} {time.time()}"
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    if kind == "group":
                        os.killpg(int(_stat(victim)[2]), signal.SIGKILL)
                    else:
                        os.kill(victim, signal.SIGKILL)
                    blows.append(told)
            kills[kind] = kills.get(kind, 0) + 1

    thread = threading.Thread(target=adversary, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + CHAOS_S
        while time.monotonic() < deadline and _ready(tmp_path) < 2 * CHUNKS:
            time.sleep(1)
    finally:
        stop.set()
        thread.join(timeout=60)
        (tmp_path / "stop").touch()
        for loop in loops:
            try:
                loop.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(loop.pid, signal.SIGKILL)
    # the adversary is gone: what it left is recovered, and the hosts finish the work
    finish = time.monotonic() + 240
    while _ready(tmp_path) < 2 * CHUNKS and time.monotonic() < finish:
        for host in hosts:
            host.ok("recover")
            for job in ("A", "B"):
                host.runjob("--all", "--parallel", "2", f"./{job}.sh")
        time.sleep(0.5)
    ledger = (tmp_path / "ledger").read_text().splitlines()
    overlaps = [line for line in ledger if line.startswith("OVERLAP")]
    runs = rows(tmp_path, "select count(*) from run")[0][0]
    if overlaps:
        pytest.fail("\n".join([*overlaps, str(kills), *_story(tmp_path, ledger, overlaps, blows)]))
    assert _ready(tmp_path) == 2 * CHUNKS, kills
    assert rows(tmp_path, "select count(*) from datastatus where status='RUNNING'") == [(0,)]
    assert runs >= 2 * CHUNKS
    assert all(kills.get(kind, 0) >= 3 for kind in KINDS), kills  # each kind, several times
    assert kills.get("server restart") == 1


def _story(tmp_path, ledger: list[str], overlaps: list[str], blows: list[str]) -> list[str]:
    """What a failure needs read: the ledger's lines and the runs of each chunk that
    overlapped (its ledger lines are numbered: their order is the order they happened),
    and the adversary's blows of the 5 s before each overlap."""
    told = []
    for overlap in overlaps:
        jobid, dataid, _, _, when = overlap.split()[1:6]
        told += [f"blow {blow}" for blow in blows if 0 <= float(when) - float(blow.split()[-1]) < 5]
        told += [
            f"{n}: {line}"
            for n, line in enumerate(ledger)
            if line.split()[:2] == [jobid, dataid]
            or line.split()[1:3] == [jobid, dataid]  # OVERLAP, end, helper
        ]
        told += map(
            str,
            rows(
                tmp_path,
                "select runid, attempt, status, started, ended, pid, host, token, seen, lease,"
                " reason from run where jobid = ? and dataid = ? order by runid",
                jobid,
                dataid,
            ),
        )
    return told


def _ready(tmp_path) -> int:
    """READY chunks of both jobs (a look that the adversary may cut is made again)."""
    import psycopg

    query = "select count(*) from datastatus where locktype='OUT' and status='READY'"
    for _ in range(100):
        with contextlib.suppress(psycopg.OperationalError):
            return rows(tmp_path, query + " and jobid in ('A','B')")[0][0]
        time.sleep(0.5)
    raise AssertionError("the store did not answer for 50 s")
