"""Several hosts, one PostgreSQL store: never twice, never stuck, whatever dies.

A host is simulated by its own lock and log folder (``DATAFLOW_STATE``) and host name
(``DATAFLOW_HOST``); the store is a real PostgreSQL server, reached directly or through
a TCP proxy that can stop forwarding without closing anything (a network partition).
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest

from dataflow.run.claim import claims, lifecycle
from dataflow.run.lease import keeper
from dataflow.store import open_store
from support import BOUND, _admin, rows, script, start_runjob, wait_for, written
from support.hosts import (
    Proxy,
    _one_job,
    alive,
    environ_of,
    holder_of,
    keeper_backends,
    processes_of,
)
from support.stress import CHUNKS, JOBS, LOOP, OUTPUT, STALL_S, finished


def _recovered_by(host, since: float, bound: float) -> bool:
    """Does ``utility recover`` on ``host`` recover the chunk once ``bound`` seconds have
    passed since ``since``? One look, after the bound: the store's verdict, however long
    a loaded machine takes to start the command that asks for it."""
    time.sleep(max(0.0, since + bound - time.monotonic()))
    return "1 abandoned" in host.ok("recover").out


def _status(tmp_path, dataid="1"):
    found = rows(
        tmp_path,
        "select status from datastatus where jobid='work' and dataid=? and locktype='OUT'",
        dataid,
    )
    return found[0][0] if found else None


def _psql(host) -> list[str]:
    """``psql`` on the host's store, one statement to follow: a client that is not ours."""
    return ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", host.env["DATAFLOW_DB"], "-c"]


def _stat(pid: int) -> list[str]:
    with open(f"/proc/{pid}/stat") as file:
        return file.read().rsplit(")", 1)[1].split()


def _targets(pid: int) -> dict[int, str]:
    return {int(fd): os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")}


@pytest.mark.long
def test_the_holder_runs_in_its_own_session_and_keeps_nothing_of_runjob(hosts, tmp_path):
    """The host's lease holder, started by the first RunJob that needs it, is a new
    interpreter in a session and process group of its own, so that no signal to RunJob's
    group reaches it; it keeps none of RunJob's descriptors (not a chunk lock, not the
    store's connection, not RunJob's standard output or error: a caller reading them would
    wait for it) and nothing of a run's environment; its socket is its user's alone."""
    a, _ = hosts
    _one_job(a, tmp_path, "echo $$ > job.pid; sleep 300")
    runner = start_runjob(a, "./work.sh", env={"DATAFLOW_RUN": "outer", "jobid": "outer"})
    try:
        wait_for(lambda: written(tmp_path / "job.pid"), what="the job to start")
        job = int((tmp_path / "job.pid").read_text())
        holder = holder_of(a.env["DATAFLOW_STATE"])
        assert holder and holder != runner.pid
        with open(f"/proc/{holder}/cmdline", "rb") as file:
            assert b"dataflow.run.lease.holderprocess" in file.read()  # not a fork of RunJob
        assert not {b"DATAFLOW_RUN", b"jobid"} & environ_of(holder).keys()
        # process group and session (fields 5 and 6 of stat): neither is RunJob's
        assert _stat(holder)[2:4] == [str(holder), str(holder)]
        assert _stat(runner.pid)[2] != str(holder)
        targets = _targets(holder)
        runjob = _targets(runner.pid)
        assert targets[0] == targets[1] == os.devnull
        assert targets[2].endswith("/holder.log")
        others = [t for fd, t in targets.items() if fd > 2]
        lock = [t for t in others if t.endswith(".lock")]
        assert len(lock) == 1 and "-holder-" in lock[0]  # its own lock file, nothing else
        assert not [t for t in others if t not in lock and not t.startswith("socket:")], targets
        assert not set(others) & set(runjob.values())
        assert not set(others) & set(_targets(job).values())
        (sock,) = Path(a.env["DATAFLOW_STATE"]).glob("*-holder-*.sock")
        assert stat.S_IMODE(sock.stat().st_mode) == 0o600
    finally:
        runner.send_signal(signal.SIGTERM)
        runner.wait(timeout=60)


@pytest.mark.slow
def test_kill_9_of_every_process_of_a_host_is_recovered_by_another(
    hosts, tmp_path, pg_store, pg_server
):
    """A host that dies closes nothing: host A reaches the store through a proxy that
    stops forwarding before its processes are killed, so the server keeps the keeper's
    session (and its run lock) open, as it would for a power cut. Only the liveness bound
    frees the chunk."""
    a, b = hosts
    proxy = Proxy(pg_server.port)
    try:
        a.env["DATAFLOW_DB"] = pg_store.replace(f":{pg_server.port}/", f":{proxy.port}/")
        _one_job(b, tmp_path, "echo $$ > job.pid; sleep 300")
        runner = start_runjob(a, "./work.sh")
        wait_for(lambda: written(tmp_path / "job.pid"), what="the job to start on host A")
        assert _status(tmp_path) == "RUNNING"
        assert "1 abandoned" not in b.ok("recover").out  # alive: host B leaves it alone
        killed = processes_of(a.env)
        assert len(killed) >= 3  # RunJob, its keeper, the job
        proxy.flowing.clear()  # the host goes: what it had open stays open at the server
        for pid in killed:
            os.kill(pid, signal.SIGKILL)
        died = time.monotonic()
        runner.wait(timeout=10)
        assert keeper_backends(pg_store)  # the keeper's session outlives it
        assert _recovered_by(b, died, BOUND + 2)  # pings 1 s apart
        assert _status(tmp_path) == "FAILED"
        (run,) = rows(tmp_path, "select status, reason, host from run where jobid='work'")
        assert run == ("FAILED", "abandoned", "hostA")
    finally:
        proxy.close()


@pytest.mark.slow
def test_kill_9_of_runjob_alone_never_lets_another_host_start_the_chunk(hosts, tmp_path):
    a, b = hosts
    _one_job(
        a, tmp_path, "echo $$ > job.pid; until [ -e go ]; do sleep 0.1; done; echo orphan done"
    )
    # a chunk wrongly taken for dead would be FAILED, and with a retry left, run again
    a.ok("dml", "insert into job (jobid,itemtype,itemvalue) values ('work','retries','1')")
    runner = start_runjob(a, "./work.sh")
    wait_for(lambda: written(tmp_path / "job.pid"), what="the job to start on host A")
    runner.send_signal(signal.SIGKILL)
    runner.wait(timeout=10)
    orphan = int((tmp_path / "job.pid").read_text())
    for host in (b, a):  # several looks, over longer than the bound
        for _ in range(3):
            result = host.runjob("./work.sh")
            assert result.code == 0, result
            assert "no suitable data" in result.out, result.out
            assert "1 abandoned" not in host.ok("recover").out
            time.sleep(BOUND / 3)
    assert alive(orphan)
    (tmp_path / "go").touch()
    wait_for(lambda: not alive(orphan), what="the orphan to end")
    wait_for(lambda: "1 abandoned" in b.ok("recover").out, timeout=BOUND, what="release")
    attempts = rows(tmp_path, "select count(*), max(host) from run where jobid='work'")
    assert attempts == [(1, "hostA")]  # nobody ran it a second time


@pytest.mark.slow
def test_a_network_partition_fences_the_job_and_frees_the_chunk_within_the_bound(
    hosts, tmp_path, pg_store, pg_server
):
    a, b = hosts
    proxy = Proxy(pg_server.port)
    try:
        a.env["DATAFLOW_DB"] = pg_store.replace(f":{pg_server.port}/", f":{proxy.port}/")
        _one_job(b, tmp_path, "echo $$ > job.pid; while :; do date +%s.%N > beat; sleep 0.1; done")
        runner = start_runjob(a, "./work.sh")
        wait_for(lambda: (tmp_path / "beat").exists(), what="the job to start on host A")
        job = int((tmp_path / "job.pid").read_text())
        proxy.flowing.clear()  # host A is cut off: nothing passes, nothing closes
        # the bound after the keeper's last ping (1 s apart)
        assert _recovered_by(b, time.monotonic(), BOUND + 2)
        assert not alive(job), "host A's job still runs after host B took its chunk"
        last_beat = float((tmp_path / "beat").read_text() or 0)
        assert time.time() - last_beat > 0.5  # it stopped before, not just now
        proxy.flowing.set()  # the network heals: A's late result must not overwrite
        runner.wait(timeout=60)
        assert runner.returncode != 0
        assert _status(tmp_path) == "FAILED"
        (run,) = rows(tmp_path, "select status, reason from run where jobid='work'")
        assert run == ("FAILED", "abandoned")
    finally:
        proxy.close()


@pytest.mark.long
def test_a_claim_in_progress_hides_only_the_chunk_it_looks_at(hosts, tmp_path, pg_store):
    """Host A's claim is looking at its first candidate (its transaction is open) when host
    B's RunJob starts: B takes the next chunk instead of saying there is nothing to do."""
    from dataflow.run.claim import claims, lifecycle
    from dataflow.store import open_store

    a, b = hosts
    _one_job(a, tmp_path, "true", chunks=3)
    with open_store(pg_store) as store, store.transaction():
        job = lifecycle.load_job(store, "work")
        assert next(claims._choose(store, job))[0][1] == "1"  # A's claim looks at chunk 1
        result = b.runjob("./work.sh")
        assert result.code == 0, result
        assert "no suitable data" not in result.out, result.out
    done = rows(
        tmp_path,
        "select dataid, status from datastatus where jobid='work' and locktype='OUT'",
    )
    assert done == [("2", "READY")]


@pytest.mark.slow
def test_two_hosts_sixteen_processes_run_every_chunk_exactly_once(hosts, tmp_path):
    a, b = hosts
    a.ok("createtables")
    a.ok("dml", "insert into dataset (datasetid) values ('src'), ('a'), ('b'), ('c')")
    for jobid, inputs in JOBS.items():
        for dataset in inputs:
            a.ok(
                "dml",
                f"insert into job (jobid,itemtype,datasetid) values ('{jobid}','IN','{dataset}')",
            )
        a.ok(
            "dml",
            f"insert into job (jobid,itemtype,datasetid) values ('{jobid}','OUT','{OUTPUT[jobid]}')",
        )
        script(tmp_path, f"{jobid}.sh", 'echo "$jobid $dataid $DATAFLOW_HOST" >> ran.log')
    a.ok("ready", "src", "--from", "1", "--to", str(CHUNKS))
    (tmp_path / "loop.sh").write_text(LOOP.format(chunks=CHUNKS, stall=STALL_S))
    workers = []
    for host in (a, b):
        for jobid in JOBS:
            modes = [[], ["--all", "--parallel", "3"]]
            if jobid != "A":
                modes.append(["--all"])
            workers += [(host, ["bash", "loop.sh", jobid, *mode]) for mode in modes]
    assert len(workers) == 16
    procs = [
        subprocess.Popen(
            w, cwd=tmp_path, env=h.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        for h, w in workers
    ]
    outputs = finished(procs, timeout=1500)
    for text in outputs:
        for bad in ("Traceback", "error", "deadlock"):
            assert bad not in text, text[-2000:]
    lines = (tmp_path / "ran.log").read_text().splitlines()
    ran = Counter(" ".join(line.split()[:2]) for line in lines)
    expected = Counter(f"{j} {i}" for j in JOBS for i in range(1, CHUNKS + 1))
    assert ran == expected, (ran - expected, expected - ran)
    assert {line.split()[2] for line in lines} == {"hostA", "hostB"}  # both did work
    states = rows(
        tmp_path,
        "select locktype, status, count(*) from datastatus where jobid <> 'fakejob' "
        "and jobid in ('A', 'B', 'C') group by 1, 2",
    )
    assert states == [("OUT", "READY", 3 * CHUNKS)]
    assert rows(tmp_path, "select max(attempt), count(*) from run") == [(1, 3 * CHUNKS)]


@pytest.mark.slow
def test_max_parallel_holds_across_hosts(hosts, tmp_path):
    a, b = hosts
    _one_job(a, tmp_path, "echo start >> spans; sleep 1; echo end >> spans", chunks=8)
    a.ok("dml", "insert into job (jobid,itemtype,itemvalue) values ('work','max_parallel','2')")
    procs = [start_runjob(h, "--all", "--parallel", "3", "./work.sh") for h in (a, b, a, b)]
    for proc in procs:
        proc.communicate(timeout=120)
    live = peak = 0
    for event in (tmp_path / "spans").read_text().split():
        live += 1 if event == "start" else -1
        peak = max(peak, live)
    assert peak <= 2
    assert rows(tmp_path, "select count(*) from run where status = 'READY'") == [(8,)]
    hosts_seen = {r[0] for r in rows(tmp_path, "select host from run")}
    assert hosts_seen <= {"hostA", "hostB"}


@pytest.mark.long
def test_history_and_explain_name_the_host_of_a_live_run(hosts, tmp_path):
    a, b = hosts
    _one_job(a, tmp_path, "echo $$ > job.pid; until [ -e go ]; do sleep 0.1; done")
    runner = start_runjob(a, "./work.sh")
    wait_for(lambda: written(tmp_path / "job.pid"), what="the job to start")
    refused = b.utility("endjob", "work", "1", "READY")
    assert refused.code != 0 and "hostA" in refused.err
    assert "hostA" in b.ok("history", "work").out
    (tmp_path / "go").touch()
    runner.communicate(timeout=60)
    assert runner.returncode == 0


@pytest.mark.long
def test_writes_by_psql_are_honoured_by_the_next_claim_in_natural_order(hosts, tmp_path):
    a, _ = hosts
    _one_job(a, tmp_path, "echo $dataid >> ran")
    psql = _psql(a)
    for dataid in ("10", "2", "2025-01-10", "2025-01-9"):  # a producer in another language
        done = subprocess.run(
            [
                *psql,
                "insert into datastatus values ('src', 'producer', "
                f"'{dataid}', 'OUT', 'READY', now())",
            ],
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
    assert a.runjob("--all", "./work.sh").code == 0
    assert (tmp_path / "ran").read_text().split() == ["1", "2", "10", "2025-01-9", "2025-01-10"]
    resubmit = "update datastatus set status = 'RESUBMIT' where jobid = 'work' and dataid = '2'"
    assert subprocess.run([*psql, resubmit], capture_output=True).returncode == 0
    assert a.runjob("./work.sh").code == 0
    assert (tmp_path / "ran").read_text().split()[-1] == "2"


@pytest.mark.long  # 60,000 chunks written at once
def test_two_producers_mark_large_backlogs_ready_at_once(hosts, tmp_path):
    """One statement each, 30,000 chunks each, at the same time: nothing runs out of lock
    memory (one offer lock per chunk did: the test server has room for ~19,000 locks) or
    deadlocks, every chunk is offered, and the first is claimed first."""
    a, _ = hosts
    _one_job(a, tmp_path, "echo $dataid >> ran")
    psql = _psql(a)
    producers = [
        subprocess.Popen(
            [
                *psql,
                "insert into datastatus select 'src', 'producer', g::text, 'OUT', 'READY', now() "
                f"from generate_series({first}, {first + 29_999}) g",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for first in (2, 30_002)
    ]
    for producer in producers:
        _, err = producer.communicate(timeout=300)
        assert producer.returncode == 0, err
    assert rows(tmp_path, "select count(*) from candidate where jobid = 'work'") == [(60_001,)]
    assert a.runjob("./work.sh").code == 0
    assert (tmp_path / "ran").read_text().split() == ["1"]
    taken = "update datastatus set status = 'RESUBMIT' where jobid = 'producer' and dataid <> '2'"
    assert subprocess.run([*psql, taken], capture_output=True).returncode == 0
    assert a.runjob("./work.sh").code == 0
    assert (tmp_path / "ran").read_text().split() == ["1", "2"]  # the rest are not READY
    assert "no suitable data" in a.runjob("./work.sh").out


LEDGER_JOB = """
exec 9>>"flock.$dataid"
flock -n 9 || echo "OVERLAP $dataid" >> ledger
echo "$DATAFLOW_HOST $dataid" >> ledger
if [ "$DATAFLOW_HOST $dataid" = "hostA 2" ]; then until [ -e go ]; do sleep 0.1; done; fi
"""


def _ledger(tmp_path) -> list[str]:
    path = tmp_path / "ledger"
    return path.read_text().splitlines() if path.exists() else []


@contextlib.contextmanager
def _ahead_waiting(a, tmp_path):
    """Host A's drain (one slot) runs chunk 1 at once and chunk 2 until the file ``go``
    exists: chunk 3 (and more) is claimed ahead, and waits until its lease, which nobody
    renews, is older than the bound. Yields host A's RunJob; ``go`` exists once the block
    ends, and the drain has ended."""
    from support import BOUND

    a.ok("createtables")
    a.ok("register-dataset", "src")
    a.ok("register-dataset", "dst")
    a.ok("register-job", "work", "--in", "src", "--out", "dst")
    a.ok("dml", "insert into job (jobid, itemtype, itemvalue) values ('work', 'retries', '1')")
    a.ok("ready", "src", *map(str, range(1, 5)))
    script(tmp_path, "work.sh", LEDGER_JOB)
    runner = start_runjob(a, "--all", "--parallel", "1", "./work.sh")
    try:
        wait_for(lambda: "hostA 2" in _ledger(tmp_path), what="chunk 2")
        wait_for(lambda: rows(tmp_path, "select count(*) from run where dataid = '3'") == [(1,)])
        stale = "select seen + lease * interval '1 second' < now() from run where dataid = '3'"
        wait_for(lambda: rows(tmp_path, stale) == [(True,)], timeout=BOUND * 4, what="lapse")
        yield runner
    finally:
        (tmp_path / "go").touch()
        if runner.poll() is None:
            runner.wait(timeout=60)


@contextlib.contextmanager
def _ahead_lapsed(hosts, tmp_path, monkeypatch):
    """:func:`_ahead_waiting`; then host B (in this process) claims while the server ends
    host A's keeper session. Yields host A's RunJob and host B's claim (None if it took
    nothing), held until the block ends."""
    from support.hosts import keeper_backends

    a, b = hosts
    found = store = None
    try:
        with _ahead_waiting(a, tmp_path) as runner:
            for name, value in b.env.items():
                if name.startswith("DATAFLOW_"):
                    monkeypatch.setenv(name, value)
            store = open_store(b.address)
            job = lifecycle.load_job(store, "work")
            keeper.keeper_for(store)
            for _ in range(20):
                for backend in keeper_backends(a.address):
                    _admin(tmp_path, f"SELECT pg_terminate_backend({backend})")
                found = claims.claim(store, job, command="./work.sh").claim
                if found is not None:
                    break
            yield runner, found
    finally:
        if found is not None:
            found.lock.close()
        if store is not None:
            store.close()
        keeper.close_all()


@pytest.mark.long  # two hosts' holders
def test_a_batch_passes_over_a_chunk_whose_run_lives_on_another_host(hosts, tmp_path):
    """Host A runs chunk 1; a store writer sets it RESUBMIT and deletes its IN row, so it
    is offered again while A's job lives. Host B's drain claims three at a time: chunk 1,
    first of its first batch, is passed over (A's lease), the others run, and chunk 1
    stays offered until A's run ends."""
    a, b = hosts
    a.ok("createtables")
    a.ok("register-dataset", "src")
    a.ok("register-dataset", "dst")
    a.ok("register-job", "work", "--in", "src", "--out", "dst")
    a.ok("ready", "src", *map(str, range(1, 8)))
    script(
        tmp_path,
        "work.sh",
        'echo "$DATAFLOW_HOST $dataid" >> ran\n'
        'if [ "$DATAFLOW_HOST" = hostA ]; then echo $$ > job.pid; '
        "until [ -e go ]; do sleep 0.1; done; fi",
    )
    runner = start_runjob(a, "./work.sh")
    try:
        wait_for(lambda: written(tmp_path / "job.pid"), what="host A's job")
        a.ok(
            "dml",
            "delete from datastatus where jobid = 'work' and dataid = '1' and locktype = 'IN'",
        )
        a.ok(
            "dml",
            "update datastatus set status = 'RESUBMIT' where jobid = 'work' and dataid = '1'",
        )
        assert rows(tmp_path, "select count(*) from candidate where dataid = '1'") == [(1,)]
        done = b.runjob("--all", "--parallel", "3", "./work.sh", timeout=300)
        assert done.code == 0, done
        ran = (tmp_path / "ran").read_text().splitlines()
        assert sorted(ran) == ["hostA 1", *(f"hostB {n}" for n in range(2, 8))]
        assert rows(tmp_path, "select count(*) from candidate where dataid = '1'") == [(1,)]
    finally:
        (tmp_path / "go").touch()
        runner.wait(timeout=60)


@pytest.mark.slow
def test_a_chunk_claimed_ahead_for_longer_than_the_bound_never_runs_beside_another_hosts(
    hosts, tmp_path, monkeypatch
):
    """On PostgreSQL: host A's drain goes on (chunk 2 ends) while host B holds its claim
    of a chunk host A claimed ahead: host A never starts it. (Nobody renews the lease of
    a chunk claimed ahead before its start: a drain gives back those that waited half
    the bound, and a chunk given back that another host took since is left as it is.)"""
    with _ahead_lapsed(hosts, tmp_path, monkeypatch) as (runner, found):
        before = _ledger(tmp_path)
        (tmp_path / "go").touch()
        runner.wait(timeout=60)
        after = _ledger(tmp_path)[len(before) :]
    if found is not None:
        assert f"hostA {found.dataid}" not in after, (found.dataid, before, after)


@pytest.mark.slow
def test_a_chunk_claimed_ahead_whose_lease_lapsed_is_claimed_afresh_before_it_starts(
    hosts, tmp_path
):
    """Nobody renews the lease of a chunk claimed ahead before its start, and once it is
    older than the bound another host may take the chunk (were host A's run lock lost
    with its keeper's session). So host A's drain never starts a chunk on such a claim:
    when a slot frees it gives back what it claimed ahead half the bound ago or more, and
    claims it again (another run, another token). Each chunk runs once, on a fresh lease."""
    a, _ = hosts
    with _ahead_waiting(a, tmp_path) as runner:
        waited = "select token from run where status = 'RUNNING' and dataid <> '2'"
        lapsed = {token for (token,) in rows(tmp_path, waited)}
        assert lapsed  # chunk 3 (and perhaps 4), claimed ahead, its lease lapsed
        (tmp_path / "go").touch()
        assert runner.wait(timeout=60) == 0, runner.stderr.read()
    ran = rows(tmp_path, "select dataid, token, status from run order by dataid")
    assert [(dataid, status) for dataid, _, status in ran] == [(d, "READY") for d in "1234"]
    assert not lapsed & {token for _, token, _ in ran}, (lapsed, ran)
    assert sorted(_ledger(tmp_path)) == [f"hostA {d}" for d in "1234"]  # no OVERLAP


@pytest.mark.slow
def test_a_stopped_drain_never_gives_back_a_chunk_another_host_claimed_since(
    hosts, tmp_path, monkeypatch
):
    """On PostgreSQL: as above, but host A's drain is stopped (SIGTERM): the chunks it
    claimed ahead are given back, host B's claim of one of them stays as it is."""
    with _ahead_lapsed(hosts, tmp_path, monkeypatch) as (runner, found):
        runner.send_signal(signal.SIGTERM)
        runner.wait(timeout=60)
        if found is not None:
            mine = rows(
                tmp_path,
                "select locktype, status from datastatus where jobid = 'work' and dataid = ?",
                found.dataid,
            )
            assert sorted(mine) == [("IN", "RUNNING"), ("OUT", "RUNNING")], mine
            assert rows(tmp_path, "select count(*) from run where runid = ?", found.runid) == [(1,)]
