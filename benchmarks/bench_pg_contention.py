"""Contended claims on PostgreSQL: N processes claiming one job's chunks through the real
path (``dataflow.run.claim.claims.claim``, each with its keeper), against a raw PostgreSQL
insert-and-commit loop run by the same number of processes; the method of
``bench_contention`` (SQLite): slices, ABBA order, a shared ticket counter.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import resource
import time
from collections import Counter

import bench_contention
import pg_server
import psycopg
import stores
from measure import INFO, MET, MISSED, Dist, Row, Section

from dataflow.run.claim import claims, lifecycle
from dataflow.run.lease import keeper
from dataflow.store import open_store
from dataflow.store.postgres import connection

JOB = bench_contention.JOB
SLICES = bench_contention.SLICES
HELD = 4  # chunk locks a contended claimer keeps: a drain's live runs at --parallel 4
CONTENDED = "Contended claims (PostgreSQL)"

_FORK = mp.get_context("fork")


def _claimer(address: str, tickets, barrier, results) -> None:
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    keeper._keepers.clear()  # the parent's, if any, are not this process's
    held: list = []
    with open_store(address) as store:
        claims.prepare(store, JOB)  # this RunJob's keeper starts before the race
        job = lifecycle.load_job(store, JOB)
        barrier.wait()
        start = time.perf_counter()
        claimed = []
        while bench_contention._take(tickets):
            dataid = stores.claim(store, job, held, recover=False)
            if dataid is None:
                break
            claimed.append(dataid)
            while len(held) > HELD:  # the oldest run ends (see the section text)
                held.pop(0).close()
        results.put((start, time.perf_counter(), claimed))
    for lock in held:
        lock.close()
    keeper.close_all()


def _raw_writer(address: str, tickets, barrier, results) -> None:
    conn = psycopg.connect(connection.conninfo(address), autocommit=True)
    me = os.getpid()
    barrier.wait()
    start = time.perf_counter()
    written = []
    while bench_contention._take(tickets):
        row = conn.execute("INSERT INTO item(worker) VALUES (%s) RETURNING id", (me,)).fetchone()
        written.append(str(row[0]))
    conn.close()
    results.put((start, time.perf_counter(), written))


def _race(target, address: str, processes: int, quota: int) -> tuple[float, list[str]]:
    tickets = _FORK.Value("i", quota)
    barrier, results = _FORK.Barrier(processes), _FORK.Queue()
    workers = [
        _FORK.Process(target=target, args=(address, tickets, barrier, results))
        for _ in range(processes)
    ]
    for worker in workers:
        worker.start()
    reports = [results.get(timeout=600) for _ in workers]
    for worker in workers:
        worker.join()
        if worker.exitcode != 0:
            raise RuntimeError(f"a worker exited {worker.exitcode}")
    start, end = min(r[0] for r in reports), max(r[1] for r in reports)
    return end - start, [item for r in reports for item in r[2]]


def bench_contention_pg(config, server: pg_server.Server, section: Section, chunks: int) -> None:
    quota = chunks // SLICES
    ratios: dict[int, list[float]] = {n: [] for n in config.contention_counts}
    claim_s = dict.fromkeys(config.contention_counts, 0.0)
    raw_s = dict.fromkeys(config.contention_counts, 0.0)
    duplicates = missing = mismatched = 0
    for run, processes in enumerate(config.contention_counts):
        address = server.database(f"race_{run}")
        with pg_server.single_job(address, JOB, quota * SLICES) as store:
            store.conn.execute("CREATE TABLE item(id bigserial PRIMARY KEY, worker integer)")
        claimed: list[str] = []
        for i in range(SLICES):
            seconds = {}
            for side in ("claim", "raw") if i % 4 in (0, 3) else ("raw", "claim"):
                target = _claimer if side == "claim" else _raw_writer
                seconds[side], items = _race(target, address, processes, quota)
                if side == "claim":
                    claimed += items
                elif len(items) != quota:
                    raise RuntimeError(f"raw loop wrote {len(items)} of {quota}")
            claim_s[processes] += seconds["claim"]
            raw_s[processes] += seconds["raw"]
            ratios[processes].append(seconds["raw"] / seconds["claim"])
        counts = Counter(claimed)
        duplicates += sum(c - 1 for c in counts.values() if c > 1)
        missing += quota * SLICES - len(counts)
        with open_store(address) as store:
            running = store.conn.execute(
                "SELECT count(*) FROM datastatus WHERE jobid = %s AND locktype = 'OUT'"
                " AND status = 'RUNNING'",
                (JOB,),
            ).fetchone()[0]
        mismatched += running != len(counts)
        print(
            f"  {processes:>2} processes: claims/raw median "
            f"{Dist.of(ratios[processes]).median:.0%} over {SLICES} slices",
            flush=True,
        )
        server.drop(f"race_{run}")
    items = quota * SLICES
    lines = [
        "| processes | claims/s | raw inserts/s | slice ratio median | 5th percentile | worst |",
        "|---|---|---|---|---|---|",
    ]
    for processes in config.contention_counts:
        ratio = Dist.of(ratios[processes])
        rate, raw = items / claim_s[processes], items / raw_s[processes]
        section.add(
            Row(
                CONTENDED,
                f"{processes} process{'es' if processes > 1 else ''}: claims/s ÷ raw "
                "insert-and-commit/s",
                f"{ratio.median:.0%}",
                f"{ratio.p5:.0%}",
                "reference",  # the physical limit; targets are set beside the peers
                INFO,
                f"{rate:,.0f} claims/s vs {raw:,.0f} inserts/s over all slices; "
                "p95 column: 5th percentile of the slices; the target is procrastinate's "
                "rate (BENCH_ONLY=peers)",
            )
        )
        lines.append(
            f"| {processes} | {rate:,.0f} | {raw:,.0f} | {ratio.median:.0%} "
            f"| {ratio.p5:.0%} | {min(ratio.values):.0%} |"
        )
    clean = duplicates == 0 and mismatched == 0
    section.add(
        Row(
            CONTENDED,
            f"duplicate claims over {len(config.contention_counts)} races of {items:,} chunks",
            str(duplicates),
            "",
            "0",
            MET if clean else MISSED,
            f"stores whose RUNNING count ≠ the chunks claimed: {mismatched}; left unclaimed "
            f"at the races' ends: {missing} (a claim that found every candidate row locked "
            "by other claims returned none; see findings)",
        )
    )
    section.text(
        f"### {CONTENDED}\n\n{items:,} chunks of one job per race, one race per process "
        f"count, cut into {SLICES} slices of {quota:,}; claim and raw slices alternate ABBA; "
        "a fresh database per race. Each claimer opens its store, starts its keeper "
        "(`claims.prepare`, as RunJob does) and loads the job before the barrier, then calls "
        f"`claims.claim` once per ticket, keeping the chunk locks of its last {HELD} claims "
        f"(a drain at `--parallel {HELD}`: its keeper holds their run locks; an older run "
        "ends when a new one starts — its chunk stays RUNNING, so nothing changes for the "
        "other claimers). Holding all of a slice's claims, as the SQLite benchmark does, "
        "measures instead the keeper's look at every held lock between two requests. The raw loop: one autocommit `INSERT … RETURNING` per item on "
        "its own connection (the store's connection settings), into a table of the same "
        "database.",
        "\n".join(lines),
    )
