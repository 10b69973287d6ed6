"""Claim latency against store size: ``lifecycle.claim`` (and ``finish``) at 10k-1M rows.

Each size is a 5-job chain with most chunks done and a backlog pending per job.
Claims rotate over the five jobs and each is finished READY, so work moves down
the chain as it does in production. Two ways of calling it:

- *fresh connection*: every claim on a newly opened store, as each cron-driven
  RunJob does (SQLite's page cache starts cold; the OS's is warm);
- *one connection*: claims in a row on one open store, as a drain does.

The baseline is the same figure at the smallest size, measured in the same run.
"""

from __future__ import annotations

import random
import sqlite3
import time
from pathlib import Path

import stores
from measure import INFO, Config, Dist, Row, Section, ms, times, verdict

from dataflow.run.claim import lifecycle
from dataflow.store import Store, open_store

TARGET_P50 = 0.005  # seconds, at 1M rows
TARGET_GROWTH = 2.0  # p50 at the largest size ÷ p50 at the smallest
MODES = ("fresh connection", "one connection", "one connection, temp_store=MEMORY")


class _Subject:
    """Claims on one store in one mode; a fresh connection per claim, or one kept open."""

    def __init__(self, path: Path, chain: stores.Chain, mode: str):
        self.path, self.chain, self.mode = path, chain, mode
        self.claims: list[float] = []
        self.finishes: list[float] = []
        self.store: Store | None = None
        self.jobs: dict[str, lifecycle.Job] = {}
        if mode != MODES[0]:
            self.store = open_store(path)
            if "temp_store" in mode:
                self.store.conn.execute("PRAGMA temp_store = MEMORY")

    def cycle(self, i: int) -> None:
        jobid = self.chain.jobs[i % len(self.chain.jobs)]
        store = self.store or open_store(self.path)
        try:
            job = self.jobs.get(jobid) if self.store else None
            if job is None:  # loading the job is RunJob's work before the claim
                job = self.jobs[jobid] = lifecycle.load_job(store, jobid)
            start = time.perf_counter()
            dataid = stores.claim(store, job)
            claimed = time.perf_counter()
            if dataid is None:
                raise RuntimeError(f"{jobid} ran out of work at cycle {i}; raise the backlog")
            lifecycle.finish(store, jobid, dataid, lifecycle.READY)
            finished = time.perf_counter()
        finally:
            if store is not self.store:
                store.close()
        self.claims.append(claimed - start)
        self.finishes.append(finished - claimed)

    def close(self) -> None:
        if self.store:
            self.store.close()


def _forward_import(work: Path, size: int) -> Row:
    """The first claims after importing a history source-first (natural order)."""
    chain = stores.Chain.with_rows(size)
    path = work / f"forward-{size}.db"
    chain.build(path, outputs_first=False).close()
    with open_store(path) as store:
        stale = store.conn.execute("SELECT count(*) FROM candidate").fetchone()[0]
        job = lifecycle.load_job(store, chain.jobs[0])
        firsts = []
        for _ in range(3):
            start = time.perf_counter()
            stores.claim(store, job)
            firsts.append(time.perf_counter() - start)
        later = []
        for _ in range(50):
            start = time.perf_counter()
            stores.claim(store, job)
            later.append(time.perf_counter() - start)
    steady = Dist.of(later)
    return Row(
        "Claim latency vs store size",
        f"first claim after a source-first import of {size:,} rows ÷ later claims",
        times(firsts[0] / steady.median),
        "",
        "report",
        INFO,
        f"first claim {ms(firsts[0])}, then {ms(firsts[1])}, {ms(firsts[2])}; later p50 "
        f"{ms(steady.median)}; {stale:,} candidate pairs after the import (see open findings)",
    )


def _bulk_load(work: Path, size: int) -> Row:
    """Loading a chain through the triggers with the store's own settings, and with
    ``temp_store=MEMORY`` added: alternately, twice each."""
    chain = stores.Chain.with_rows(size)
    seconds: dict[bool, list[float]] = {True: [], False: []}
    for i, memory in enumerate((False, True, True, False)):
        path = work / f"load-{i}.db"
        start = time.perf_counter()
        chain.build(path, temp_store_memory=memory).close()
        seconds[memory].append(time.perf_counter() - start)
        path.unlink()
    ratio = Dist.of(seconds[True]).median / Dist.of(seconds[False]).median
    return Row(
        "Claim latency vs store size",
        f"bulk load of {size:,} rows with `temp_store=MEMORY` ÷ without",
        times(ratio),
        "",
        "experiment",
        INFO,
        f"{Dist.of(seconds[False]).median:.1f} s as the store is today, "
        f"{Dist.of(seconds[True]).median:.1f} s with it; one transaction, triggers on",
    )


class _CommitFloor:
    """One-row write transactions on a bare SQLite file with the store's settings."""

    def __init__(self, path: Path):
        self.conn = sqlite3.connect(path, isolation_level=None)
        self.conn.execute("PRAGMA journal_mode = WAL")
        self.conn.execute("PRAGMA synchronous = FULL")
        self.conn.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
        self.samples: list[float] = []

    def cycle(self, i: int) -> None:
        start = time.perf_counter()
        self.conn.execute("BEGIN IMMEDIATE")
        self.conn.execute("INSERT INTO t(v) VALUES (?)", (str(i),))
        self.conn.execute("COMMIT")
        self.samples.append(time.perf_counter() - start)

    def close(self) -> None:
        self.conn.close()


def _plans(store_path: Path, chain: stores.Chain) -> list[stores.Plan]:
    """Plans of every statement one claim + finish issues, and of the triggers they fire."""
    with open_store(store_path) as store:
        job = lifecycle.load_job(store, chain.jobs[1])
        traced: list[str] = []
        store.conn.set_trace_callback(traced.append)
        dataid = stores.claim(store, job)
        marker = len(traced)
        lifecycle.finish(store, job.jobid, dataid, lifecycle.READY)
        store.conn.set_trace_callback(None)
        plans, seen = [], set()
        for i, sql in enumerate(traced):
            if sql in seen or sql in ("BEGIN IMMEDIATE", "COMMIT"):
                continue
            seen.add(sql)
            origin = "claim" if i < marker else "finish"
            plans.append(stores.Plan(origin, sql, stores.explain(store.conn, sql)))
        sample = {"datasetid": "d2", "jobid": job.jobid, "dataid": dataid, "locktype": "OUT"}
        plans += stores.trigger_plans(store.conn, "datastatus", sample)
    return plans


def bench(config: Config, work: Path) -> Section:
    section = Section("claim", "Claim latency vs store size")
    per_job = (len(MODES) * config.claim_cycles) // 5 + 10
    results: dict[tuple[int, str], tuple[Dist, Dist]] = {}
    table = [
        "| rows | chunks (dataids) | pending per job | build | mode | claim p50 | claim p95 "
        "| finish p50 | finish p95 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    subjects: dict[tuple[int, str], _Subject] = {}
    chains: dict[int, tuple[stores.Chain, Path, float]] = {}
    for size in config.claim_sizes:
        chain = stores.Chain.with_rows(size, min_backlog=per_job)
        path = work / f"chain-{size}.db"
        start = time.perf_counter()
        chain.build(path).close()
        chains[size] = (chain, path, time.perf_counter() - start)
        print(f"  {size:>9,} rows built in {chains[size][2]:.1f} s", flush=True)
        for mode in MODES:
            subjects[size, mode] = _Subject(path, chain, mode)
    # Every cycle visits every size and mode, and the bare commit, in a shuffled order,
    # so a burst of load on this shared machine hits all of them alike.
    shuffle = random.Random(2)
    floor = _CommitFloor(work / "floor.db")
    try:
        for i in range(config.claim_cycles):
            order: list[_Subject | _CommitFloor] = [*subjects.values(), floor]
            shuffle.shuffle(order)
            for subject in order:
                subject.cycle(i)
    finally:
        for subject in subjects.values():
            subject.close()
        floor.close()
    for (size, mode), subject in subjects.items():
        chain, _, built = chains[size]
        claims, finishes = results[size, mode] = (
            Dist.of(subject.claims),
            Dist.of(subject.finishes),
        )
        table.append(
            f"| {size:,} | {chain.dataids:,} | {chain.backlog:,} | {built:.1f} s | {mode} "
            f"| {ms(claims.median)} | {ms(claims.p95)} | {ms(finishes.median)} "
            f"| {ms(finishes.p95)} |"
        )
    largest_chain, largest_path, _ = chains[config.claim_sizes[-1]]
    plans = _plans(largest_path, largest_chain)

    small, large = config.claim_sizes[0], config.claim_sizes[-1]
    for mode in MODES[:2]:
        claims = results[large, mode][0]
        growth_p50 = claims.median / results[small, mode][0].median
        growth_p95 = claims.p95 / results[small, mode][0].p95
        section.add(
            Row(
                section.title,
                f"claim p50 at {large:,} rows ({mode})",
                ms(claims.median),
                ms(claims.p95),
                f"≤ {ms(TARGET_P50)} p50" if large >= 1_000_000 else "(needs 1M rows)",
                verdict(claims.median <= TARGET_P50) if large >= 1_000_000 else INFO,
            ),
            Row(
                section.title,
                f"claim at {large:,} ÷ at {small:,} rows ({mode})",
                times(growth_p50),
                times(growth_p95),
                f"≤ {TARGET_GROWTH:g}×",
                verdict(growth_p50 <= TARGET_GROWTH),
                "p95 column: ratio of the p95s",
            ),
        )
    warm, fixed = results[large, MODES[1]], results[large, MODES[2]]
    section.add(
        Row(
            section.title,
            f"claim + finish with `temp_store=MEMORY` ÷ without, {large:,} rows",
            times((fixed[0].median + fixed[1].median) / (warm[0].median + warm[1].median)),
            times((fixed[0].p95 + fixed[1].p95) / (warm[0].p95 + warm[1].p95)),
            "experiment",
            INFO,
            "proposed store setting, see open findings",
        )
    )
    middle = config.claim_sizes[min(1, len(config.claim_sizes) - 1)]
    section.add(_forward_import(work, middle), _bulk_load(work, middle))
    bare = Dist.of(floor.samples)
    section.add(
        Row(
            section.title,
            f"claim p50 at {large:,} rows (fresh connection) ÷ bare one-row commit",
            times(results[large, MODES[0]][0].median / bare.median),
            times(results[large, MODES[0]][0].p95 / bare.p95),
            "report",
            INFO,
            f"bare commit p50 {ms(bare.median)}, p95 {ms(bare.p95)} (WAL, synchronous=FULL), "
            "interleaved with the claims",
        )
    )
    scans = [(p, s) for p in plans for s in p.scans]
    section.add(
        Row(
            section.title,
            f"statements of claim + finish (and their triggers) that scan, {large:,} rows",
            str(len(scans)),
            "",
            "0",
            verdict(not scans),
            f"{len(plans)} statements explained"
            + ("; " + "; ".join(f"{p.origin}: {s.strip()}" for p, s in scans) if scans else ""),
        )
    )
    section.text(
        f"{config.claim_cycles} claim + finish cycles per size and mode, all sizes and modes "
        "interleaved in a shuffled order within each cycle, rotating over jobs "
        "j1..j5; each job has done all but its last k × backlog chunks (k = its place in the "
        "chain), so every job has work and the chain's tail is busiest. The store is built "
        "through the triggers (outputs first) in one transaction; build time is setup, not "
        "a figure.",
        "\n".join(table),
        "EXPLAIN QUERY PLAN of every statement one claim and one finish issue at the largest "
        "size (traced with `set_trace_callback`, literals as SQLite saw them), and of each "
        "statement inside the `datastatus` triggers with `NEW.*`/`OLD.*` bound to a real row:",
        _render_plans(plans),
    )
    return section


def _render_plans(plans: list[stores.Plan]) -> str:
    blocks = []
    for plan in plans:
        sql = plan.sql if len(plan.sql) <= 300 else plan.sql[:300] + " …"
        steps = "\n".join(plan.steps)
        blocks.append(f"- {plan.origin}: `{sql}`\n\n  ```text\n{_indent(steps)}\n  ```")
    return "\n".join(blocks)


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())
