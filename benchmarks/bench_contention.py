"""Contended claims: N processes claiming one job's chunks until none is left, against a
raw SQLite ``BEGIN IMMEDIATE`` one-row insert loop run by the same number of processes.

Both sides use one write transaction per item on a WAL file with ``synchronous=FULL``
and the same busy timeout, start together behind a barrier, and end with one empty
transaction per process. Throughput = items ÷ (last process done - first started).
"""

from __future__ import annotations

import multiprocessing as mp
import os
import sqlite3
import time
from collections import Counter
from pathlib import Path

import stores
from measure import MET, MISSED, Config, Dist, Row, Section, verdict

from dataflow import lifecycle
from dataflow.store import BUSY_TIMEOUT_S, Store

TARGET = 0.5  # claim throughput ÷ raw throughput, at every process count
JOB = "work"
_FORK = mp.get_context("fork")


def _claimer(db: str, barrier, results) -> None:
    with Store.open(Path(db)) as store:
        job = lifecycle.load_job(store, JOB)
        barrier.wait()
        start = time.perf_counter()
        claimed = []
        while (dataid := lifecycle.claim(store, job)) is not None:
            claimed.append(dataid)
        results.put((start, time.perf_counter(), claimed))


def _raw_writer(db: str, total: int, barrier, results) -> None:
    conn = sqlite3.connect(db, isolation_level=None, timeout=BUSY_TIMEOUT_S)
    conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
    conn.execute("PRAGMA synchronous = FULL")
    me = os.getpid()
    barrier.wait()
    start = time.perf_counter()
    written = []
    while True:
        conn.execute("BEGIN IMMEDIATE")
        cursor = conn.execute(
            "INSERT INTO item(worker) SELECT ? WHERE coalesce((SELECT max(id) FROM item), 0) < ?",
            (me, total),
        )
        conn.execute("COMMIT")
        if cursor.rowcount == 0:
            break
        written.append(str(cursor.lastrowid))
    conn.close()
    results.put((start, time.perf_counter(), written))


def _race(target, args: tuple, processes: int) -> tuple[float, list[str]]:
    """Start ``processes`` workers together; seconds from first start to last finish."""
    barrier, results = _FORK.Barrier(processes), _FORK.Queue()
    workers = [
        _FORK.Process(target=target, args=(*args, barrier, results)) for _ in range(processes)
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
    claim_tp: dict[int, list[float]] = {n: [] for n in config.contention_counts}
    raw_tp: dict[int, list[float]] = {n: [] for n in config.contention_counts}
    duplicates, missing, mismatched = 0, 0, 0
    run = 0
    for repeat in range(config.contention_repeats):
        for processes in config.contention_counts:
            run += 1
            claim_db, raw_db = work / f"claim-{run}.db", work / f"raw-{run}.db"
            stores.single_job(claim_db, JOB, total).close()
            _raw_store(raw_db)
            sides = [("claim", claim_db), ("raw", raw_db)]
            if repeat % 2:
                sides.reverse()
            for side, db in sides:
                if side == "claim":
                    seconds, claimed = _race(_claimer, (str(db),), processes)
                    claim_tp[processes].append(total / seconds)
                    counts = Counter(claimed)
                    duplicates += sum(c - 1 for c in counts.values() if c > 1)
                    missing += total - len(counts)
                    with Store.open(db) as store:
                        running = store.conn.execute(
                            "SELECT count(*) FROM datastatus WHERE jobid = ? AND locktype = 'OUT'"
                            " AND status = 'RUNNING'",
                            (JOB,),
                        ).fetchone()[0]
                    mismatched += running != total
                else:
                    seconds, written = _race(_raw_writer, (str(db), total), processes)
                    if len(written) != total:
                        raise RuntimeError(f"raw loop wrote {len(written)} of {total}")
                    raw_tp[processes].append(total / seconds)
            print(
                f"  {processes:>2} processes: claims {claim_tp[processes][-1]:,.0f}/s, "
                f"raw {raw_tp[processes][-1]:,.0f}/s",
                flush=True,
            )
            for db in (claim_db, raw_db):
                for suffix in ("", "-wal", "-shm"):
                    Path(f"{db}{suffix}").unlink(missing_ok=True)

    lines = [
        "| processes | claims/s | raw inserts/s | ratio | ratio worst |",
        "|---|---|---|---|---|",
    ]
    for processes in config.contention_counts:
        ratio = Dist.of(
            [c / r for c, r in zip(claim_tp[processes], raw_tp[processes], strict=True)]
        )
        claims, raw = Dist.of(claim_tp[processes]), Dist.of(raw_tp[processes])
        section.add(
            Row(
                section.title,
                f"{processes} process{'es' if processes > 1 else ''}: claims/s ÷ raw inserts/s",
                f"{ratio.median:.0%}",
                f"{ratio.p5:.0%}",
                f"≥ {TARGET:.0%}",
                verdict(ratio.median >= TARGET),
                f"{claims.median:,.0f} claims/s vs {raw.median:,.0f} inserts/s; "
                "p95 column: 5th percentile (the bad tail)",
            )
        )
        lines.append(
            f"| {processes} | {claims.median:,.0f} | {raw.median:,.0f} | {ratio.median:.0%} "
            f"| {min(ratio.values):.0%} |"
        )
    runs = 2 * config.contention_repeats * len(config.contention_counts)
    clean = duplicates == 0 and missing == 0 and mismatched == 0
    section.add(
        Row(
            section.title,
            f"duplicate claims over {runs} races of {total:,} chunks",
            str(duplicates),
            "",
            "0",
            MET if clean else MISSED,
            f"unclaimed: {missing}; stores whose RUNNING count ≠ {total:,}: {mismatched}",
        )
    )
    section.text(
        f"{total:,} chunks of one job (IN `src`, OUT `{JOB}_out`), "
        f"{config.contention_repeats} repeat(s) per process count; the claim and raw sides "
        "swap order every repeat; a fresh store for every race. Each claimer opens "
        "its store and loads the job before the barrier, then calls `lifecycle.claim` until "
        "it returns None. A claim's transaction reads the candidate index, checks the "
        "chunk's rows and inputs and upserts two rows (the triggers run); the raw "
        "transaction inserts one row. On 2 cores, more processes than cores mostly adds "
        "lock hand-over and busy-handler sleeps on both sides.",
        "\n".join(lines),
    )
    return section
