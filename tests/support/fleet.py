"""A fleet of simulated hosts on one PostgreSQL server behind PgBouncer (docs/stores.md "A
fleet behind PgBouncer"), for the soak test (tests/test_fleet.py) and its benchmark
(benchmarks/bench_fleet.py): the hosts' cron ticks, and what the server, the pooler and
the hosts' lease holders were seen doing meanwhile.

A host is its own ``DATAFLOW_HOST`` and ``DATAFLOW_STATE`` (``hosts/hN`` in the fleet's
folder), as in tests/test_hosts.py; its lease holder is the process whose command line
names ``holderprocess`` and whose environment names that folder.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Mapping
from pathlib import Path

import psycopg

from support.hosts import environ_of

REFUSED = ("too many clients", "remaining connection slots", "no more connections allowed")


def host_env(folder: Path, env: Mapping[str, str], n: int) -> dict[str, str]:
    """The environment of simulated host ``n`` of the fleet in ``folder``."""
    return {**env, "DATAFLOW_HOST": f"h{n}", "DATAFLOW_STATE": str(folder / "hosts" / f"h{n}")}


def tick(
    folder: Path, env: Mapping[str, str], hosts: int, jobs: list[str], runjob: str
) -> list[subprocess.Popen]:
    """One cron tick: every host starts a plain ``RunJob ./JOB.sh`` of each job at once,
    without waiting for the last tick's; each host's standard error goes to
    ``hN.err`` in ``folder``."""
    started = []
    for n in range(hosts):
        with open(folder / f"h{n}.err", "ab") as err:
            for job in jobs:
                started.append(
                    subprocess.Popen(
                        [runjob, f"./{job}.sh"],
                        cwd=folder,
                        env=host_env(folder, env, n),
                        stdout=subprocess.DEVNULL,
                        stderr=err,
                    )
                )
    return started


def errors(folder: Path) -> str:
    """What the hosts' RunJobs wrote on standard error."""
    return "".join(path.read_text(errors="replace") for path in sorted(folder.glob("h*.err")))


def refused(text: str) -> int:
    """Sessions refused (by the server or the pooler) that ``text`` tells of."""
    return sum(text.count(words) for words in REFUSED)


def holders(folder: Path) -> int:
    """The fleet's lease holder processes alive now (started, or waiting for a session)."""
    hosts = f"{folder / 'hosts'}/".encode()
    found = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as file:
                if b"holderprocess" not in file.read():
                    continue
            found += environ_of(int(pid)).get(b"DATAFLOW_STATE", b"").startswith(hosts)
        except OSError:
            continue
    return found


class Watch:
    """Looked at every ``every`` seconds until stopped: the server's client sessions
    (``pg_stat_activity``, by a session of its own, not counted), the pooler's lease pool
    (its server sessions and its clients waiting for one, ``SHOW POOLS``) and the fleet's
    lease holders alive; the most of each at once."""

    def __init__(self, server: str, console: str, leases: str, folder: Path, every: float = 0.1):
        self.server = psycopg.connect(server, autocommit=True)
        self.console = psycopg.connect(
            console, autocommit=True, cursor_factory=psycopg.ClientCursor
        )
        self.leases, self.folder, self.every = leases, folder, every
        self.sessions = self.lease_sessions = self.waiting = self.holders = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        while not self.done.wait(self.every):
            (sessions,) = self.server.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()"
            ).fetchone()
            self.sessions = max(self.sessions, sessions)
            cursor = self.console.execute("SHOW POOLS")
            names = [column.name for column in cursor.description]
            for values in cursor.fetchall():
                pool = dict(zip(names, values, strict=True))
                if pool["database"] == self.leases:
                    server = sum(
                        pool[k]
                        for k in ("sv_active", "sv_idle", "sv_used", "sv_tested", "sv_login")
                    )
                    self.lease_sessions = max(self.lease_sessions, server)
                    self.waiting = max(self.waiting, pool["cl_waiting"])
            self.holders = max(self.holders, holders(self.folder))

    def stop(self) -> None:
        self.done.set()
        self.thread.join(timeout=30)
        self.server.close()
        self.console.close()
