"""``BENCH_ONLY=fleet``: a fleet of hosts on one PostgreSQL server (issue 45's soak).

HOSTS simulated hosts (each its own ``DATAFLOW_HOST`` and ``DATAFLOW_STATE``, as in
``tests/test_hosts.py``) run cron's ticks: at every tick every host starts a plain
``RunJob ./jK.sh`` of each of its JOBS jobs at the same second, as cron starts a minute's
lines, without waiting for the last tick's. The server runs with ``max_connections`` =
50, behind the PgBouncer of docs/stores.md with both its pools: every RunJob's store
address is its transaction pool (``DATAFLOW_DB``, 10 server sessions), every host's lease
holder goes through its lease pool in session mode (``DATAFLOW_DB_DIRECT``, 30 server
sessions, fewer than the hosts: a holder beyond it waits in the pooler's queue until
another host's holder ends, ``DATAFLOW_HOLDER_IDLE=2`` after its last run).

Each job appends ``job dataid host`` to a ledger as it runs (the job's side: the store is
not asked what ran). Reported: RunJobs refused a session (by the server or the pooler),
chunks run twice, chunks not READY once the ticks end, the server's peak sessions
(``pg_stat_activity``, looked at every 0.1 s, by one more session of its own), the lease
pool's peak server sessions and waiting holders and the peak of the hosts' holders alive
(``tests/support/fleet.py``), and the chunks READY per second.

Environment: ``BENCH_FLEET`` = ``hosts,jobs,seconds,tick`` (default ``100,3,180,60``;
quick ``20,2,40,10``), ``BENCH_FLEET_JOB_S`` (what a job sleeps, default 0.5).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from subprocess import DEVNULL
from types import SimpleNamespace

import pg_server
import psycopg
from measure import BIN, ROOT, Config, Row, Section, base_env, load_average, verdict, write_script

sys.path.insert(0, str(ROOT / "tests"))  # the tests' PgBouncer, with the ini of docs/stores.md
from dataflow.store import create_store
from support import fleet
from support.pooler import Pooler

TITLE = "Fleet on one PostgreSQL server"
MAX_CONNECTIONS = 50
POOL_SIZE = 10  # the server sessions PgBouncer's transaction pool lends
LEASE_POOL = 30  # and its lease pool (session mode): with the watch's, 41 of the 50
HOLDER_IDLE = "2"  # seconds a host's holder keeps its lease session after its last run


def sizes(config: Config) -> tuple[int, int, int, int]:
    given = os.environ.get("BENCH_FLEET", "")
    if given:
        hosts, jobs, seconds, tick = (int(n) for n in given.split(","))
        return hosts, jobs, seconds, tick
    return (20, 2, 40, 10) if config.quick else (100, 3, 180, 60)


def _restart(server: pg_server.Server, **settings: object) -> None:
    """Set the server's ``settings`` and restart it (its options and port kept)."""
    for name, value in settings.items():
        server.admin(f"ALTER SYSTEM SET {name} = {value}")
    owner = ["runuser", "-u", "postgres", "--"] if os.getuid() == 0 else []
    pg_ctl = [str(server.bin / "pg_ctl"), "-D", str(server.folder / "data"), "-w", "-m", "fast"]
    subprocess.run([*owner, *pg_ctl, "restart"], check=True, stdout=DEVNULL, stderr=DEVNULL)


def _store(server: pg_server.Server, jobs: int, chunks: int) -> str:
    address = server.database("fleet")
    store, _ = create_store(address)
    with store.transaction():
        for k in range(1, jobs + 1):
            pg_server.register(store, f"j{k}", ["src"], [f"out{k}"])
        pg_server.ready(store, "src", "source", 1, chunks + 1)
    store.close()
    return address


def bench(config: Config, work: Path) -> Section:
    hosts, jobs, seconds, tick = sizes(config)
    job_s = float(os.environ.get("BENCH_FLEET_JOB_S", "0.5"))
    ticks = max(1, seconds // tick)
    chunks = max(1, hosts * ticks // 2)  # per job: done in about half the ticks
    section = Section("fleet", TITLE)
    server = pg_server.Server()
    pooler = None
    try:
        _restart(server, max_connections=MAX_CONNECTIONS)
        direct = _store(server, jobs, chunks)
        reached = SimpleNamespace(unixsocketdir=server.folder, port=server.port, user=server.user)
        pooler = Pooler(reached, leases=("fleet", LEASE_POOL))
        with (pooler.folder / "userlist.txt").open("a") as users:
            users.write('"postgres" ""\n')  # the pooler's console: Pooler.start asks it
        pooler.ini["pgbouncer"]["admin_users"] = f"postgres,{server.user}"
        pooler.ini["pgbouncer"]["default_pool_size"] = str(POOL_SIZE)
        pooler.ini["pgbouncer"]["max_client_conn"] = str(hosts * jobs * 4 + 100)
        pooler.start()
        env = {**base_env(Path("unused")), "DATAFLOW_DB": pooler.url("fleet", server.user)}
        env["DATAFLOW_DB_DIRECT"] = pooler.leases_url("fleet", server.user)
        env["DATAFLOW_HOLDER_IDLE"] = HOLDER_IDLE
        for k in range(1, jobs + 1):
            write_script(
                work / f"j{k}.sh",
                f'#!/bin/sh\necho "j{k} $dataid $DATAFLOW_HOST" >> ledger\nsleep {job_s}\n',
            )
        (work / "ledger").touch()
        console = pooler.url("pgbouncer", server.user)
        peaks, load = fleet.Watch(direct, console, "fleet_leases", work), load_average()
        began, runjobs = time.monotonic(), []
        names = [f"j{k}" for k in range(1, jobs + 1)]
        for n in range(ticks):
            time.sleep(max(0.0, began + n * tick - time.monotonic()))
            runjobs += fleet.tick(work, env, hosts, names, str(BIN / "RunJob"))
        codes = Counter(p.wait() for p in runjobs)
        elapsed = time.monotonic() - began
        peaks.stop()
        with psycopg.connect(direct) as conn:
            statuses = Counter(
                status
                for (status,) in conn.execute(
                    "SELECT status FROM datastatus WHERE locktype = 'OUT' AND jobid <> 'source'"
                )
            )
        said = fleet.errors(work)
    finally:
        if pooler is not None:
            pooler.stop()
        server.stop()
    ran = Counter(tuple(line.split()[:2]) for line in (work / "ledger").read_text().splitlines())
    twice = sum(1 for n in ran.values() if n > 1)
    refusals = fleet.refused(said)
    unready = jobs * chunks - statuses["READY"]
    shape = f"{hosts} hosts x {jobs} jobs, a tick every {tick} s for {ticks * tick} s"
    where = f"{shape}; {len(runjobs)} RunJobs, exit codes {dict(sorted(codes.items()))}"
    note = f"{where}; load {load:.1f} → {load_average():.1f}"
    section.add(
        Row(
            TITLE,
            "sessions refused (server or pooler)",
            str(refusals),
            "",
            "0",
            verdict(refusals == 0),
            note,
        ),
        Row(
            TITLE,
            "chunks run twice (the jobs' ledger)",
            str(twice),
            "",
            "0",
            verdict(twice == 0),
            f"{len(ran)} chunks ran",
        ),
        Row(
            TITLE,
            "chunks not READY at the end",
            str(unready),
            "",
            "0",
            verdict(unready == 0),
            f"of {jobs * chunks}; {dict(statuses)}",
        ),
        Row(
            TITLE,
            f"peak server sessions ÷ max_connections ({MAX_CONNECTIONS})",
            f"{peaks.sessions / MAX_CONNECTIONS:.2f}",
            note=f"peak {peaks.sessions}: pools of {POOL_SIZE} (transaction) and {LEASE_POOL} (leases, session mode); the watcher's own not counted",
        ),
        Row(
            TITLE,
            f"peak hosts' lease holders alive ÷ lease pool ({LEASE_POOL})",
            f"{peaks.holders / LEASE_POOL:.2f}",
            note=f"{peaks.holders} holders alive at once, the lease pool's server sessions at most {peaks.lease_sessions}, at most {peaks.waiting} holders waiting in its queue",
        ),
        Row(
            TITLE,
            "chunks READY per second",
            f"{statuses['READY'] / elapsed:.1f}",
            note=f"over {elapsed:.0f} s",
        ),
    )
    if said.strip():
        section.details.append(
            "First lines RunJobs wrote on stderr:\n\n```\n"
            + "\n".join(said.splitlines()[:15])
            + "\n```"
        )
    return section
