"""Contended claims: N processes claiming one job's chunks, against a raw SQLite
``BEGIN IMMEDIATE`` one-row insert loop run by the same number of processes.

Both sides use one write transaction per item on a WAL file with ``synchronous=FULL``
and the same busy timeout. Each race of 5,000 items is cut into slices; in every
slice N fresh workers start together behind a barrier and take items from a shared
ticket counter until the slice's quota is gone. Claim and raw slices alternate
(ABBA), so a burst of other work on this shared machine hits both sides alike.
Throughput of a slice = its items / (last worker done - first started).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import resource
import sqlite3
import time
from collections import Counter
from pathlib import Path

import stores
from measure import MET, MISSED, Config, Dist, Row, Section, verdict

from dataflow.run.claim import lifecycle
from dataflow.store import open_store
from dataflow.store.address import busy_timeout

TARGET = 0.5  # claim throughput / raw throughput, at every process count
JOB = "work"
SLICES = 10
_FORK = mp.get_context("fork")


def _take(tickets) -> bool:
    with tickets.get_lock():
        if tickets.value <= 0:
            return False
        tickets.value -= 1
        return True


def _claimer(db: str, tickets, barrier, results) -> None:
    """Claims like a drain: every chunk lock is held until the end, as each run holds
    its own while it lives."""
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # one descriptor per claim
    held: list = []
    with open_store(Path(db)) as store:
        job = lifecycle.load_job(store, JOB)
        barrier.wait()
        start = time.perf_counter()
        claimed = []
        while _take(tickets):
            # Each slice's processes exit with their chunks still RUNNING, where real runs
            # would still hold them: nothing here is dead, so no claim looks for the dead.
            dataid = stores.claim(store, job, held, recover=False)
            if dataid is None:  # shows up as unclaimed chunks in the report
                break
            claimed.append(dataid)
        results.put((start, time.perf_counter(), claimed))
    for lock in held:
        lock.close()


def _raw_writer(db: str, tickets, barrier, results) -> None:
    conn = sqlite3.connect(db, isolation_level=None, timeout=busy_timeout())
    conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout() * 1000)}")
    conn.execute("PRAGMA synchronous = FULL")
    me = os.getpid()
    barrier.wait()
    start = time.perf_counter()
    written = []
    while _take(tickets):
        conn.execute("BEGIN IMMEDIATE")
        cursor = conn.execute("INSERT INTO item(worker) VALUES (?)", (me,))
        conn.execute("COMMIT")
        written.append(str(cursor.lastrowid))
    conn.close()
    results.put((start, time.perf_counter(), written))


def _race(target, db: Path, processes: int, quota: int) -> tuple[float, list[str]]:
    """``processes`` workers share ``quota`` items; seconds from first start to last end."""
    tickets = _FORK.Value("i", quota)
    barrier, results = _FORK.Barrier(processes), _FORK.Queue()
    workers = [
        _FORK.Process(target=target, args=(str(db), tickets, barrier, results))
        for _ in range(processes)
    ]
    for worker in workers:
        worker.start()
    reports = [results.get(timeout=600) for _ in workers]
    for worker in workers:
        worker.join()
        if worker.exitcode != 0:
            raise RuntimeError(f"a worker exited {worker.exitcode}")
    start = min(r[0] for r in reports)
    end = max(r[1] for r in reports)
    return end - start, [item for r in reports for item in r[2]]


def _raw_store(path: Path) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE item(id INTEGER PRIMARY KEY, worker INTEGER)")
    conn.close()


def bench(config: Config, work: Path) -> Section:
    section = Section("contention", "Contended claims")
    total = config.contention_chunks
    quota = total // SLICES
    ratios: dict[int, list[float]] = {n: [] for n in config.contention_counts}
    claim_s: dict[int, float] = dict.fromkeys(config.contention_counts, 0.0)
    raw_s: dict[int, float] = dict.fromkeys(config.contention_counts, 0.0)
    duplicates, missing, mismatched, run = 0, 0, 0, 0
    for _ in range(config.contention_repeats):
        for processes in config.contention_counts:
            run += 1
            claim_db, raw_db = work / f"claim-{run}.db", work / f"raw-{run}.db"
            stores.single_job(claim_db, JOB, quota * SLICES).close()
            _raw_store(raw_db)
            claimed: list[str] = []
            for i in range(SLICES):
                seconds = {}
                for side in ("claim", "raw") if i % 4 in (0, 3) else ("raw", "claim"):
                    if side == "claim":
                        seconds[side], items = _race(_claimer, claim_db, processes, quota)
                        claimed += items
                    else:
                        seconds[side], items = _race(_raw_writer, raw_db, processes, quota)
                        if len(items) != quota:
                            raise RuntimeError(f"raw loop wrote {len(items)} of {quota}")
                claim_s[processes] += seconds["claim"]
                raw_s[processes] += seconds["raw"]
                ratios[processes].append(seconds["raw"] / seconds["claim"])
            counts = Counter(claimed)
            duplicates += sum(c - 1 for c in counts.values() if c > 1)
            missing += quota * SLICES - len(counts)
            with open_store(claim_db) as store:
                running = store.conn.execute(
                    "SELECT count(*) FROM datastatus WHERE jobid = ? AND locktype = 'OUT'"
                    " AND status = 'RUNNING'",
                    (JOB,),
                ).fetchone()[0]
            mismatched += running != quota * SLICES
            last = ratios[processes][-SLICES:]
            print(
                f"  {processes:>2} processes: claims/raw median {Dist.of(last).median:.0%} "
                f"over {SLICES} slices",
                flush=True,
            )
            for db in (claim_db, raw_db):
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{db}{suffix}").unlink(missing_ok=True)

    items = quota * SLICES * config.contention_repeats
    lines = [
        "| processes | claims/s | raw inserts/s | slice ratio median | 5th percentile | worst |",
        "|---|---|---|---|---|---|",
    ]
    for processes in config.contention_counts:
        ratio = Dist.of(ratios[processes])
        claims, raw = items / claim_s[processes], items / raw_s[processes]
        section.add(
            Row(
                section.title,
                f"{processes} process{'es' if processes > 1 else ''}: claims/s ÷ raw inserts/s",
                f"{ratio.median:.0%}",
                f"{ratio.p5:.0%}",
                f"≥ {TARGET:.0%}",
                verdict(ratio.median >= TARGET),
                f"{claims:,.0f} claims/s vs {raw:,.0f} inserts/s over all slices; "
                "p95 column: 5th percentile of the slices (the bad tail)",
            )
        )
        lines.append(
            f"| {processes} | {claims:,.0f} | {raw:,.0f} | {ratio.median:.0%} "
            f"| {ratio.p5:.0%} | {min(ratio.values):.0%} |"
        )
    races = config.contention_repeats * len(config.contention_counts)
    clean = duplicates == 0 and missing == 0 and mismatched == 0
    section.add(
        Row(
            section.title,
            f"duplicate claims over {races} races of {quota * SLICES:,} chunks",
            str(duplicates),
            "",
            "0",
            MET if clean else MISSED,
            f"unclaimed: {missing}; stores whose RUNNING count ≠ {quota * SLICES:,}: {mismatched}",
        )
    )
    section.text(
        f"{quota * SLICES:,} chunks of one job (IN `src`, OUT `{JOB}_out`) per race, "
        f"{config.contention_repeats} race(s) per process count, each cut into {SLICES} "
        f"slices of {quota:,}; claim and raw slices alternate ABBA; fresh stores per race. "
        "Each claimer opens its store and loads the job before the barrier, then calls "
        "`claims.claim` once per ticket. A claim's transaction reads the candidate "
        "index, checks the chunk's rows and inputs and upserts two rows (the triggers run); "
        "the raw transaction inserts one row. On 2 cores, more processes than cores "
        "mostly adds lock hand-over and busy-handler sleeps on both sides. Chunks left "
        "in the store at each slice's end are the next slice's work, so a race is one "
        f"store drained of all {quota * SLICES:,} chunks.",
        "\n".join(lines),
    )
    return section
