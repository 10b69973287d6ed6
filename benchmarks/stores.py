"""Stores for the benchmarks, built fast but honestly.

Rows go in through a :class:`dataflow.store.sqlite.SqliteStore` connection inside one
transaction, so the ``candidate`` triggers run for every row exactly as they do
for ``utility dml``. Outputs are inserted before their inputs (last job of the
chain first): that leaves the ``candidate`` table as a history of real claims
would, with done chunks absent (a claim removes its pair), instead of stale pairs
that the first claim would have to step over.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from dataflow.run.claim import claims, lifecycle
from dataflow.store import Store, create_store

SOURCE_JOB = "source"


def create(path: Path, temp_store_memory: bool = True) -> Store:
    store, _ = create_store(path)
    if temp_store_memory:
        # Setup only, it changes no result: without it each row's triggers write
        # temporary b-trees to a temp file, and a bulk load takes about twice as long
        # (measured in the claim benchmark; see open findings).
        store.conn.execute("PRAGMA temp_store = MEMORY")
    return store


def settle(store: Store) -> Store:
    """Checkpoint the bulk load out of the WAL, as a store that has lived a while would be,
    so the first measured commits do not pay for copying the whole build."""
    store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return store


def _insert_rows(store: Store, rows: Iterable[tuple[str, str, str, str]]) -> None:
    store.conn.executemany(
        "INSERT INTO datastatus(datasetid, jobid, dataid, locktype, status, modified) "
        "VALUES (?, ?, ?, 'OUT', ?, now())",
        rows,
    )


def register(store: Store, jobid: str, inputs: Iterable[str], outputs: Iterable[str]) -> None:
    """Datasets (if new) and job rows, as the quickstart's ``utility dml`` lines do."""
    ins, outs = list(inputs), list(outputs)
    for datasetid in ins + outs:
        store.conn.execute("INSERT OR IGNORE INTO dataset(datasetid) VALUES (?)", (datasetid,))
    for itemtype, names in (("OUT", outs), ("IN", ins)):
        for datasetid in names:
            store.conn.execute(
                "INSERT INTO job(jobid, itemtype, datasetid) VALUES (?, ?, ?)",
                (jobid, itemtype, datasetid),
            )


def single_job(path: Path, jobid: str, chunks: int, source: str = "src") -> Store:
    """One job ``jobid`` (IN ``source``, OUT ``<jobid>_out``) with ``chunks`` READY inputs."""
    store = create(path)
    with store.transaction():
        register(store, jobid, [source], [f"{jobid}_out"])
        _insert_rows(store, ((source, SOURCE_JOB, str(i), "READY") for i in range(chunks)))
    return settle(store)


@dataclass(frozen=True)
class Chain:
    """A 5-job chain d0 -> j1 -> d1 -> ... -> j5 -> d5 over ``dataids`` chunks."""

    rows: int
    dataids: int
    backlog: int  # chunks pending per job: job k has done all but the last k*backlog
    jobs: tuple[str, ...] = ("j1", "j2", "j3", "j4", "j5")

    @classmethod
    def with_rows(cls, rows: int, min_backlog: int = 20) -> Chain:
        """About ``rows`` datastatus rows; ~1% of each job's chunks pending (at least
        ``min_backlog``, so a benchmark never runs out of work)."""
        dataids = rows // 6
        backlog = max(min_backlog, dataids // 100)
        dataids = (rows + 15 * backlog) // 6  # 6 rows per done chunk, minus the staircase
        return cls(rows=rows, dataids=dataids, backlog=backlog)

    def done(self, k: int) -> int:
        """How many chunks job ``jk`` has produced (READY)."""
        return self.dataids - k * self.backlog

    def build(
        self, path: Path, outputs_first: bool = True, temp_store_memory: bool = True
    ) -> Store:
        """The store; ``outputs_first=False`` inserts in chain order instead (source
        first), as an import of an old store's history in natural order would."""
        store = create(path, temp_store_memory)
        order = [(k, f"d{k}", f"j{k}", self.done(k)) for k in range(1, len(self.jobs) + 1)]
        order.insert(0, (0, "d0", SOURCE_JOB, self.dataids))
        if outputs_first:  # see module doc
            order.reverse()
        with store.transaction():
            for k, jobid in enumerate(self.jobs, start=1):
                register(store, jobid, [f"d{k - 1}"], [f"d{k}"])
            for _, datasetid, jobid, done in order:
                _insert_rows(store, ((datasetid, jobid, str(i), "READY") for i in range(done)))
        return settle(store)

    def run_rows(self) -> Iterator[tuple]:
        """A run history for the chain: one READY attempt per produced chunk, and every
        fifth one failed once first (attempt 1 FAILED, attempt 2 READY): about 1.2 runs
        per produced chunk, so ``with_rows(1_000_000)`` has about a million runs.
        Rows of (jobid, dataid, attempt, status, started, ended, duration, exitcode,
        host, pid, command, reason), oldest first, as runids give them."""
        for k, jobid in enumerate(self.jobs, start=1):
            for i in range(self.done(k)):
                stamp = f"2026-01-01 00:00:00.{i % 1_000_000:06d}+00:00"
                if i % 5 == 0:
                    yield (jobid, str(i), 1, "FAILED", stamp, stamp, 1.5, 1, "bench", 4242,
                           "run.sh", "exit code 1")  # fmt: skip
                    yield (jobid, str(i), 2, "READY", stamp, stamp, 2.5, 0, "bench", 4243,
                           "run.sh", None)  # fmt: skip
                else:
                    yield (jobid, str(i), 1, "READY", stamp, stamp, 2.5, 0, "bench", 4242,
                           "run.sh", None)  # fmt: skip

    def add_runs(self, store: Store) -> Store:
        """The chain's run history (:meth:`run_rows`) into a SQLite store, one transaction."""
        with store.transaction():
            store.conn.executemany(
                "INSERT INTO run(jobid, dataid, attempt, status, started, ended, duration, "
                "exitcode, host, pid, command, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                self.run_rows(),
            )
        return settle(store)


# -- query plans ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """EXPLAIN QUERY PLAN of one statement."""

    origin: str  # "claim", "finish" or "trigger <name>"
    sql: str
    steps: tuple[str, ...]

    @property
    def scans(self) -> list[str]:
        """Steps that read a whole table or index instead of seeking."""
        return [s for s in self.steps if s.startswith("SCAN") and "CONSTANT ROW" not in s]


def explain(conn: sqlite3.Connection, sql: str, params: object = ()) -> tuple[str, ...]:
    rows = conn.execute(f"EXPLAIN QUERY PLAN {sql}", params).fetchall()
    depth: dict[int, int] = {0: 0}
    steps = []
    for node, parent, _, detail in rows:
        depth[node] = depth.get(parent, 0) + 1
        steps.append("  " * (depth[node] - 1) + detail)
    return tuple(steps)


def _trigger_body(sql: str) -> Iterator[str]:
    """The statements between a CREATE TRIGGER's BEGIN and END."""
    body = sql[re.search(r"\bBEGIN\b", sql).end() : sql.rstrip().rfind("END")]
    pending = ""
    for line in body.splitlines(keepends=True):
        pending += line
        if sqlite3.complete_statement(pending):
            yield pending.strip().rstrip(";")
            pending = ""


def trigger_plans(conn: sqlite3.Connection, table: str, sample: dict[str, str]) -> list[Plan]:
    """Plans of the statements inside every trigger on ``table``, with ``NEW.x``/``OLD.x``
    bound to the values in ``sample`` (a row of ``table``)."""
    plans = []
    triggers = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ? ORDER BY 1",
        (table,),
    ).fetchall()
    for name, sql in triggers:
        for statement in _trigger_body(sql):
            bound = re.sub(r"\b(?:NEW|OLD)\.(\w+)", r":\1", statement)
            names = set(re.findall(r":(\w+)", bound))
            steps = explain(conn, bound, {n: sample.get(n, "") for n in names})
            plans.append(Plan(f"trigger {name}", " ".join(statement.split()), steps))
    return plans


def claim(
    store: Store, job: lifecycle.Job, held: list | None = None, recover: bool = True
) -> str | None:
    """One claim as RunJob makes it. The chunk lock is kept in ``held`` (a live run
    holds it until it ends), else let go at once."""
    result = claims.claim(store, job, recover_dead=recover)
    if result.claim is None:
        return None
    if held is None:
        result.claim.lock.close()
    else:
        held.append(result.claim.lock)
    return result.claim.dataid
