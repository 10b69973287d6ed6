"""A throwaway PostgreSQL server for the PostgreSQL benchmarks, and stores on it.

The server is ``examples/migration/pg_sandbox.sh`` (its own data folder, a free port on
127.0.0.1, a login role with a random password) started with ``fsync`` on, as a real
server runs: SQLite's figures are measured with ``synchronous=FULL`` on a real disk, so
both pay for durable commits. The password goes to ``PGPASSWORD`` in this process's
environment (libpq reads it; children inherit it): never into an address, argv or output.

Each store is a database of its own, created by the server's superuser (local socket,
trust) and owned by the sandbox's role.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from measure import ROOT

from dataflow.store import Store, create_store

SANDBOX = ROOT / "examples" / "migration" / "pg_sandbox.sh"
UNAVAILABLE = 3  # pg_sandbox.sh's exit code when PostgreSQL cannot be had here


class Unavailable(Exception):
    """No PostgreSQL server can be started on this machine."""


class Server:
    def __init__(self) -> None:
        env = {**os.environ, "PG_SANDBOX_FSYNC": "on"}
        done = subprocess.run(["bash", str(SANDBOX), "start"], env=env, capture_output=True)
        if done.returncode == UNAVAILABLE:
            raise Unavailable(done.stderr.decode().strip())
        if done.returncode != 0:
            raise RuntimeError(f"pg_sandbox.sh start: {done.stderr.decode().strip()}")
        self.folder = Path(done.stdout.decode().strip())
        settings = dict(
            line.split("=", 1) for line in (self.folder / "env").read_text().splitlines() if line
        )
        self.port = int(settings["PGPORT"])
        self.user = settings["PGUSER"]
        self.bin = Path(settings["PGBIN"])
        os.environ["PGPASSWORD"] = settings["PGPASSWORD"]

    def address(self, database: str, port: int | None = None) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{port or self.port}/{database}"

    def admin(self, sql: str, database: str = "postgres") -> str:
        """One statement as the superuser, over the server's local socket."""
        where = ["-h", str(self.folder), "-p", str(self.port), "-U", "postgres", "-d", database]
        done = subprocess.run(
            [str(self.bin / "psql"), "-qXAt", *where, "-v", "ON_ERROR_STOP=1", "-c", sql],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0:
            raise RuntimeError(f"psql: {done.stderr.strip()}")
        return done.stdout.strip()

    def database(self, name: str) -> str:
        """A new empty database owned by the sandbox's role; its store address."""
        self.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        self.admin(f"CREATE DATABASE {name} OWNER {self.user}")
        return self.address(name)

    def drop(self, name: str) -> None:
        self.admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def setting(self, name: str) -> str:
        return self.admin(f"SHOW {name}")

    def stop(self) -> None:
        subprocess.run(["bash", str(SANDBOX), "stop", str(self.folder)], capture_output=True)


def register(store: Store, jobid: str, inputs: list[str], outputs: list[str]) -> None:
    """Datasets (if new) and job rows, as the quickstart's ``utility dml`` lines do."""
    for datasetid in inputs + outputs:
        store.conn.execute(
            "INSERT INTO dataset(datasetid) VALUES (%s) ON CONFLICT DO NOTHING", (datasetid,)
        )
    for itemtype, names in (("OUT", outputs), ("IN", inputs)):
        for datasetid in names:
            store.conn.execute(
                "INSERT INTO job(jobid, itemtype, datasetid) VALUES (%s, %s, %s)",
                (jobid, itemtype, datasetid),
            )


def ready(store: Store, datasetid: str, jobid: str, first: int, end: int) -> None:
    """READY OUT rows of ``datasetid`` for dataids first..end-1, one statement."""
    store.conn.execute(
        "INSERT INTO datastatus(datasetid, jobid, dataid, locktype, status, modified) "
        "SELECT %s, %s, g::text, 'OUT', 'READY', now() FROM generate_series(%s::int, %s::int) g",
        (datasetid, jobid, first, end - 1),
    )


def single_job(address: str, jobid: str, chunks: int, source: str = "src") -> Store:
    """One job ``jobid`` (IN ``source``, OUT ``<jobid>_out``) with ``chunks`` READY inputs,
    inserted through the triggers."""
    store, _ = create_store(address)
    with store.transaction():
        register(store, jobid, [source], [f"{jobid}_out"])
        ready(store, source, "source", 0, chunks)
    store.conn.execute("ANALYZE")
    return store


def build_chain(address: str, chain, triggers: bool) -> tuple[Store, float]:
    """``chain`` (a :class:`stores.Chain`) on PostgreSQL, outputs first; seconds taken.

    ``triggers=True``: every row through the ``candidate`` triggers, as ``psql`` or
    ``utility dml`` would insert it. ``triggers=False``: the rows with the triggers on
    datastatus disabled (all of them: ours are the only ones), then ``candidate`` filled
    in one statement per job with exactly the pairs the triggers leave (each job's
    pending chunks: input READY, own output absent) — the benchmark checks the two give
    the same table at the smallest size — and the chunks' summary (``chunk_seen``,
    ``chunk_tally``) as a reader's fold leaves it.
    """
    store, _ = create_store(address)
    start = time.perf_counter()
    with store.transaction():
        for k, jobid in enumerate(chain.jobs, start=1):
            register(store, jobid, [f"d{k - 1}"], [f"d{k}"])
        if not triggers:
            store.conn.execute("ALTER TABLE datastatus DISABLE TRIGGER USER")
        for k in range(len(chain.jobs), -1, -1):  # outputs first, as stores.Chain does
            ready(store, f"d{k}", f"j{k}" if k else "source", 0, chain.done(k))
        if not triggers:
            store.conn.execute("ALTER TABLE datastatus ENABLE TRIGGER USER")
            for k, jobid in enumerate(chain.jobs, start=1):
                store.conn.execute(
                    "INSERT INTO candidate(jobid, sortkey, dataid) "
                    "SELECT %s, dataflow_natkey(g::text), g::text "
                    "FROM generate_series(%s::int, %s::int) g",
                    (jobid, chain.done(k), chain.done(k - 1) - 1),
                )
            # the chunks' summary (migration 8) as its triggers and a fold leave it
            store.conn.execute(
                "INSERT INTO chunk_seen(jobid, dataid, statuses) SELECT jobid, dataid, "
                "array_agg(DISTINCT status) FROM datastatus WHERE locktype = 'OUT' "
                "AND status IS DISTINCT FROM 'RUNNING' GROUP BY 1, 2"
            )
            store.conn.execute(
                "INSERT INTO chunk_tally(jobid, status, chunks) SELECT jobid, status, "
                "count(DISTINCT dataid) FROM datastatus WHERE locktype = 'OUT' "
                "AND status IS DISTINCT FROM 'RUNNING' GROUP BY 1, 2"
            )
    store.conn.execute("VACUUM ANALYZE")  # as autovacuum leaves a store that has lived
    return store, time.perf_counter() - start


def candidates(store: Store) -> list[tuple]:
    sql = "SELECT jobid, sortkey, dataid FROM candidate ORDER BY 1, 2, 3"
    return [tuple(row) for row in store.conn.execute(sql)]


def add_runs(store: Store, chain) -> None:
    """``chain``'s run history (as :meth:`stores.Chain.run_rows`: every fifth produced
    chunk failed once first) in one statement per job, then ANALYZE."""
    with store.transaction():
        for k, jobid in enumerate(chain.jobs, start=1):
            store.conn.execute(
                "INSERT INTO run(jobid, dataid, attempt, status, started, ended, duration, "
                "exitcode, host, pid, command, reason) "
                "SELECT %(job)s, g::text, a, CASE WHEN a = 1 AND g %% 5 = 0 THEN 'FAILED' "
                "ELSE 'READY' END, s, s, CASE WHEN a = 1 AND g %% 5 = 0 THEN 1.5 ELSE 2.5 END, "
                "CASE WHEN a = 1 AND g %% 5 = 0 THEN 1 ELSE 0 END, 'bench', 4242, 'run.sh', "
                "CASE WHEN a = 1 AND g %% 5 = 0 THEN 'exit code 1' END "
                "FROM generate_series(0, %(end)s) g, "
                "LATERAL (SELECT '2026-01-01 00:00:00.' || lpad((g %% 1000000)::text, 6, '0') "
                "|| '+00:00' AS s) t, "
                "LATERAL generate_series(1, CASE WHEN g %% 5 = 0 THEN 2 ELSE 1 END) a "
                "ORDER BY g, a",
                {"job": jobid, "end": chain.done(k) - 1},
            )
    store.conn.execute("VACUUM ANALYZE")
