"""RunJob on PostgreSQL against RunJob on SQLite, and how long a dead host's chunk stays
unclaimable.

A host is simulated as in ``tests/test_hosts.py``: its own ``DATAFLOW_STATE`` folder and
``DATAFLOW_HOST`` name; every process of host A carries ``DATAFLOW_HOST=hostA`` in its
environment, which is how its death (``kill -9`` of RunJob, its keeper and its job) finds
them all. A partition is a TCP proxy between host A and the server that stops
forwarding without closing anything.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pg_server
import stores
from measure import ROOT

sys.path.insert(0, str(ROOT / "tests"))  # simulated hosts, as the tests make them
from measure import (
    BIN,
    INFO,
    Dist,
    Row,
    Section,
    base_env,
    check_output,
    ms,
    paired,
    run_once,
    times,
    write_script,
)

from dataflow.run.claim import claims, lifecycle
from dataflow.run.lease import keeper
from dataflow.store import open_store
from dataflow.store.base import liveness_timeout
from support.hosts import Proxy, alive, processes_of

RUNJOB = "RunJob overhead per chunk (PostgreSQL)"
DEATH = "Dead host to claimable chunk (PostgreSQL)"
WARMUP = 3


def bench_runjob(config, server: pg_server.Server, section: Section, work: Path) -> None:
    rounds = config.runjob_rounds
    chunks = 2 * (rounds + WARMUP) + 1
    sqlite_db = work / "runjob.db"
    stores.single_job(sqlite_db, "noop", chunks).close()
    address = server.database("runjob")
    pg_server.single_job(address, "noop", chunks).close()
    write_script(work / "noop.sh", "#!/bin/sh\nexit 0\n")
    env_sqlite = base_env(sqlite_db)
    env_pg = {**base_env(Path("unused")), "DATAFLOW_DB": address}
    env_pg["DATAFLOW_STATE"] = str(work / "state")
    runjob = [str(BIN / "RunJob"), "./noop.sh"]
    for env in (env_sqlite, env_pg):  # once for real: a broken RunJob is not a fast one
        if "rows updated to READY" not in check_output(runjob, work, env):
            raise RuntimeError("RunJob did not run a chunk")
    variants = {
        "python -c pass": ([sys.executable, "-c", "pass"], env_sqlite),
        "./noop.sh": (["./noop.sh"], env_sqlite),
        "bin/RunJob, SQLite": (runjob, env_sqlite),
        "bin/RunJob, PostgreSQL": (runjob, env_pg),
    }
    secs: dict[str, list[float]] = {name: [] for name in variants}
    shuffle = random.Random(6)
    for i in range(WARMUP + rounds):
        order = list(variants)
        shuffle.shuffle(order)
        for name in order:
            argv, env = variants[name]
            run = run_once(argv, work, env)
            if run.code != 0:
                raise RuntimeError(f"{name} exited {run.code}")
            if i >= WARMUP:
                secs[name].append(run.seconds)
    bare = secs["./noop.sh"]
    over = {
        kind: paired(secs[f"bin/RunJob, {kind}"], bare, lambda a, b: a - b)
        for kind in ("SQLite", "PostgreSQL")
    }
    ratio = paired(over["PostgreSQL"].values, over["SQLite"].values, lambda a, b: a / b)
    python = Dist.of(secs["python -c pass"])
    section.add(
        Row(
            RUNJOB,
            "`bin/RunJob ./noop.sh` − `./noop.sh`: PostgreSQL ÷ SQLite",
            times(ratio.median),
            times(ratio.p95),
            "report",
            INFO,
            f"overhead {ms(over['PostgreSQL'].median)} on PostgreSQL (p95 "
            f"{ms(over['PostgreSQL'].p95)}), {ms(over['SQLite'].median)} on SQLite; "
            f"Python start-up {ms(python.median)}",
        )
    )
    lines = ["| command | median | p95 |", "|---|---|---|"]
    lines += [
        f"| `{n}` | {ms(Dist.of(s).median)} | {ms(Dist.of(s).p95)} |" for n, s in secs.items()
    ]
    section.text(
        f"### {RUNJOB}\n\n{rounds} rounds after {WARMUP} warm-up rounds, commands shuffled "
        "within each round: one no-op chunk through `bin/RunJob` on a SQLite store and on a "
        "PostgreSQL store on this machine (a keeper process per RunJob, connections over "
        "TCP to 127.0.0.1). Overhead = RunJob − `./noop.sh` of the same round; the ratio "
        "is paired by round. Wall time per command:",
        "\n".join(lines),
    )


# -- a dead host ------------------------------------------------------------------------------


def _host_b(address: str, state: str, jobid: str, events) -> None:
    """Host B: claim the job's one chunk as a RunJob would (recovery on), every 10 ms,
    until it is had; say when, then finish it READY."""
    os.environ.update(DATAFLOW_STATE=state, DATAFLOW_HOST="hostB")
    keeper._keepers.clear()
    with open_store(address) as store:
        claims.prepare(store, jobid)
        job = lifecycle.load_job(store, jobid)
        events.put(("ready", time.monotonic()))
        while True:
            result = claims.claim(store, job)
            if result.claim:
                events.put(("claimed", time.monotonic(), result.claim.dataid))
                result.claim.lock.close()
                lifecycle.finish(store, jobid, result.claim.dataid, lifecycle.READY)
                break
            time.sleep(0.01)
    keeper.close_all()


def _wait(check, seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.02)


def _one_death(address: str, work: Path, env_a: dict, partition: Proxy | None) -> tuple:
    """Seconds from host A's death (or cut-off) to host B's claim of its chunk; and for a
    partition, seconds from the cut to A's job being killed by its own keeper.

    Each death has a job of its own with one chunk, so that B can claim nothing else."""
    jobid = f"hang{len(list(work.glob('hang*.sh')))}"
    with open_store(address) as store, store.transaction():
        pg_server.register(store, jobid, [f"{jobid}_in"], [f"{jobid}_out"])
        pg_server.ready(store, f"{jobid}_in", "source", 0, 1)
        store.conn.execute(
            "INSERT INTO job(jobid, itemtype, itemvalue) VALUES (%s, 'retries', '1')", (jobid,)
        )
    write_script(work / f"{jobid}.sh", "#!/bin/sh\necho $$ > job.pid\nexec sleep 300\n")
    pidfile = work / "job.pid"
    pidfile.unlink(missing_ok=True)
    runner = subprocess.Popen(
        [str(BIN / "RunJob"), f"./{jobid}.sh"],
        cwd=work,
        env=env_a,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    _wait(lambda: pidfile.exists() and pidfile.read_text().strip(), 60, "host A's job")
    job = int(pidfile.read_text())
    events = mp.get_context("fork").Queue()
    b = mp.get_context("fork").Process(
        target=_host_b, args=(address, str(work / "stateB"), jobid, events)
    )
    b.start()
    events.get(timeout=60)  # host B is ready and has seen the chunk held
    time.sleep(0.2)
    fenced = None
    if partition is None:
        for pid in processes_of(env_a):
            os.kill(pid, signal.SIGKILL)
        died = time.monotonic()
    else:
        partition.flowing.clear()
        died = time.monotonic()
        _wait(lambda: not alive(job), 120, "host A's keeper to kill its job")
        fenced = time.monotonic() - died
    event = events.get(timeout=180)
    b.join(timeout=30)
    if partition is not None:
        partition.flowing.set()
        runner.wait(timeout=120)
    else:
        runner.wait(timeout=30)
    for pid in processes_of(env_a):  # what is left of host A, if anything
        os.kill(pid, signal.SIGKILL)
    return event[1] - died, fenced


def bench_death(config, server: pg_server.Server, section: Section, work: Path) -> None:
    kills, cuts = (2, 1) if config.quick else (5, 2)
    address = server.database("hosts")
    pg_server.create_store(address)[0].close()
    env_a = {**base_env(Path("unused")), "DATAFLOW_DB": address}
    env_a.update(DATAFLOW_STATE=str(work / "stateA"), DATAFLOW_HOST="hostA")
    killed = [_one_death(address, work, env_a, None)[0] for _ in range(kills)]
    bound = liveness_timeout()
    proxy = Proxy(server.port)
    try:
        env_cut = {**env_a, "DATAFLOW_DB": server.address("hosts", proxy.port)}
        cut = [_one_death(address, work, env_cut, proxy) for _ in range(cuts)]
    finally:
        proxy.close()
    k = Dist.of(killed)
    reclaim, fence = Dist.of([c[0] for c in cut]), Dist.of([c[1] for c in cut])
    section.add(
        Row(
            DEATH,
            "`kill -9` of RunJob, its keeper and its job → chunk claimed on another host",
            ms(k.median),
            ms(k.p95),
            "report",
            INFO,
            f"{kills} deaths; host B claims every 10 ms with recovery on, as RunJob does; "
            "the killed keeper's connection is closed by its kernel, so the server frees "
            "the run lock at once",
        ),
        Row(
            DEATH,
            "network partition (stalled TCP proxy) → chunk claimed on another host",
            f"{reclaim.median:.1f} s",
            f"{reclaim.p95:.1f} s",
            f"≤ {bound:g} s + ping",
            "met" if reclaim.median <= bound + 2 else "MISSED",
            f"{cuts} cuts at DATAFLOW_LIVENESS_TIMEOUT={bound:g} s (default); host A's keeper "
            f"killed its own job {fence.median:.1f} s after the cut (self-fence before reclaim)",
        ),
    )
    section.text(
        f"### {DEATH}\n\nHost A (its own `DATAFLOW_STATE`, `DATAFLOW_HOST=hostA`) runs "
        "`RunJob ./hangN.sh` (a job that sleeps; each death has its own job with one chunk "
        "and `retries` 1, so its chunk, once FAILED, is claimable again and B has nothing "
        "else to claim). Host B, another process with its own state folder, calls "
        "`claims.claim` every 10 ms. Death: `kill -9` of every process of host A; "
        "partition: host A reaches the server through a TCP proxy that stops forwarding "
        "without closing. Time: from the kill or cut to B's successful claim. Deaths: "
        + ", ".join(ms(s) for s in killed)
        + "; partitions: "
        + ", ".join(f"{c[0]:.1f} s (job fenced at {c[1]:.1f} s)" for c in cut)
        + ".",
    )
