"""Claim latency on PostgreSQL against store size (contended claims: bench_pg_contention).

Both use the real path, ``dataflow.run.claim.claims.claim`` (through :func:`stores.claim`):
on a shared store each claim asks this process's keeper (a child process, as RunJob's)
to take the chunk's run lock, one pipe round trip and one advisory-lock query.
Method and figures mirror ``bench_claim`` and ``bench_contention`` (SQLite).
"""

from __future__ import annotations

import collections
import random
import time

import pg_server
import psycopg
import stores
from measure import INFO, Dist, Row, Section, ms, times, verdict

from dataflow.run.claim import claims, lifecycle
from dataflow.run.lease import keeper
from dataflow.store import open_store
from dataflow.store.postgres import connection

TARGET_P50 = 0.005
TARGET_GROWTH = 2.0
MODES = ("fresh connection", "one connection")
CLAIM = "Claim latency vs store size (PostgreSQL)"


class _Subject:
    def __init__(self, address: str, chain: stores.Chain, mode: str):
        self.address, self.chain, self.mode = address, chain, mode
        self.claims: list[float] = []
        self.finishes: list[float] = []
        self.store = open_store(address) if mode == MODES[1] else None
        self.jobs: dict[str, lifecycle.Job] = {}

    def cycle(self, i: int) -> None:
        jobid = self.chain.jobs[i % len(self.chain.jobs)]
        store = self.store or open_store(self.address)
        try:
            job = self.jobs.get(jobid) if self.store else None
            if job is None:
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


class _CommitFloor:
    """A one-row insert-and-commit on the same server, interleaved with the claims."""

    def __init__(self, address: str):
        self.conn = psycopg.connect(connection.conninfo(address), autocommit=True)
        self.conn.execute("CREATE TABLE floor(id bigserial PRIMARY KEY, v text)")
        self.samples: list[float] = []

    def cycle(self, i: int) -> None:
        start = time.perf_counter()
        self.conn.execute("INSERT INTO floor(v) VALUES (%s)", (str(i),))
        self.samples.append(time.perf_counter() - start)

    def close(self) -> None:
        self.conn.close()


class _Tracer:
    """Every statement the store sends while active, with its round-trip time."""

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = collections.defaultdict(list)
        self.order: list[tuple[str, tuple]] = []
        self._execute = connection.Connection.execute

    def __enter__(self) -> _Tracer:
        tracer, execute = self, self._execute

        def traced(conn, sql, params=()):
            start = time.perf_counter()
            try:
                return execute(conn, sql, params)
            finally:
                text = " ".join(sql.split())
                tracer.times[text].append(time.perf_counter() - start)
                tracer.order.append((text, params if isinstance(params, dict) else tuple(params)))

        connection.Connection.execute = traced
        return self

    def __exit__(self, *exc: object) -> None:
        connection.Connection.execute = self._execute


def _profile(address: str, chain: stores.Chain, cycles: int) -> tuple[list, list, list]:
    """Per-statement round trips of claim + finish on one connection, and EXPLAIN
    (ANALYZE, BUFFERS) of each distinct claim statement, run in a rolled-back transaction."""
    with open_store(address) as store:
        jobs = {j: lifecycle.load_job(store, j) for j in chain.jobs}
        held_ms: list[float] = []
        hold = keeper.Keeper.hold

        def timed_hold(self, *args):
            start = time.perf_counter()
            try:
                return hold(self, *args)
            finally:
                held_ms.append(time.perf_counter() - start)

        keeper.Keeper.hold = timed_hold
        # each statement on its own: pipelined, a statement's time would be its send only
        pipelined = store.transaction
        store.transaction = lambda pipeline=False: pipelined(False)  # type: ignore[method-assign]
        try:
            with _Tracer() as tracer:
                for i in range(cycles):
                    jobid = chain.jobs[i % len(chain.jobs)]
                    dataid = stores.claim(store, jobs[jobid])
                    lifecycle.finish(store, jobid, dataid, lifecycle.READY)
        finally:
            keeper.Keeper.hold = hold
            store.transaction = pipelined  # type: ignore[method-assign]
        lines = ["| statement | calls per cycle | p50 | total share |", "|---|---|---|---|"]
        total = sum(sum(v) for v in tracer.times.values()) + sum(held_ms)
        rows = [(k, v) for k, v in tracer.times.items()] + [("(keeper: take run lock)", held_ms)]
        for text, values in sorted(rows, key=lambda kv: -sum(kv[1])):
            lines.append(
                f"| `{text[:140]}` | {len(values) / cycles:.1f} | {ms(Dist.of(values).median)} "
                f"| {sum(values) / total:.0%} |"
            )
        plans, seen, scans = [], set(), []
        for text, params in tracer.order:
            if text in seen or not text.startswith(("SELECT", "INSERT", "UPDATE", "DELETE")):
                continue
            seen.add(text)
            try:
                with store.conn.raw.transaction(force_rollback=True):
                    found = store.conn.execute(f"EXPLAIN (ANALYZE, BUFFERS) {text}", params)
                    plan = "\n".join(row[0] for row in found.fetchall())
            except psycopg.Error as exc:
                plan = f"(not explained: {' '.join(str(exc).split())})"
            plans.append(f"- `{text[:300]}`\n\n  ```text\n{_indent(plan)}\n  ```")
            scans += [
                f"{table} in `{text[:60]}…`"
                for table in ("datastatus", "candidate", "run")
                if f"Seq Scan on {table} " in plan
            ]
    return lines, plans, scans


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def bench_claims(config, server: pg_server.Server, section: Section) -> None:
    sizes = config.claim_sizes
    per_job = (len(MODES) * config.claim_cycles + 60) // 5 + 10
    # honesty check of the fast build: the same candidate table as through the triggers
    small = stores.Chain.with_rows(sizes[0], min_backlog=per_job)
    slow, slow_s = pg_server.build_chain(server.database("check_triggers"), small, True)
    fast, _ = pg_server.build_chain(server.database("check_fast"), small, False)
    with slow, fast:
        if pg_server.candidates(slow) != pg_server.candidates(fast):
            raise RuntimeError("the fast build's candidate table differs from the triggers'")
    server.drop("check_triggers")
    server.drop("check_fast")
    print(f"  {sizes[0]:,} rows through the triggers: {slow_s:.1f} s", flush=True)
    subjects: dict[tuple[int, str], _Subject] = {}
    chains: dict[int, tuple[stores.Chain, str, float]] = {}
    for size in sizes:
        chain = stores.Chain.with_rows(size, min_backlog=per_job)
        address = server.database(f"chain_{size}")
        store, built = pg_server.build_chain(address, chain, False)
        store.close()
        chains[size] = (chain, address, built)
        print(f"  {size:>9,} rows built in {built:.1f} s", flush=True)
        with open_store(address) as store:
            claims.prepare(store, chain.jobs[0])  # its keeper, started as RunJob starts it
        for mode in MODES:
            subjects[size, mode] = _Subject(address, chain, mode)
    shuffle = random.Random(2)
    floor = _CommitFloor(chains[sizes[0]][1])
    try:
        for i in range(config.claim_cycles):
            order = [*subjects.values(), floor]
            shuffle.shuffle(order)
            for subject in order:
                subject.cycle(i)
    finally:
        for subject in subjects.values():
            subject.close()
        floor.close()
    large = sizes[-1]
    statements, plans, scans = _profile(chains[large][1], chains[large][0], 50)
    keeper.close_all()
    table = [
        "| rows | chunks (dataids) | pending per job | build | mode | claim p50 | claim p95 "
        "| finish p50 | finish p95 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    results = {}
    for (size, mode), subject in subjects.items():
        chain, _, built = chains[size]
        c, f = results[size, mode] = Dist.of(subject.claims), Dist.of(subject.finishes)
        table.append(
            f"| {size:,} | {chain.dataids:,} | {chain.backlog:,} | {built:.1f} s | {mode} "
            f"| {ms(c.median)} | {ms(c.p95)} | {ms(f.median)} | {ms(f.p95)} |"
        )
    for mode in MODES:
        c, base = results[large, mode][0], results[sizes[0], mode][0]
        section.add(
            Row(
                CLAIM,
                f"claim p50 at {large:,} rows ({mode})",
                ms(c.median),
                ms(c.p95),
                f"≤ {ms(TARGET_P50)} p50" if large >= 1_000_000 else "(needs 1M rows)",
                verdict(c.median <= TARGET_P50) if large >= 1_000_000 else INFO,
            ),
            Row(
                CLAIM,
                f"claim at {large:,} ÷ at {sizes[0]:,} rows ({mode})",
                times(c.median / base.median),
                times(c.p95 / base.p95),
                f"≤ {TARGET_GROWTH:g}×",
                verdict(c.median / base.median <= TARGET_GROWTH),
                "p95 column: ratio of the p95s",
            ),
        )
    bare = Dist.of(floor.samples)
    one = results[large, MODES[1]][0]
    section.add(
        Row(
            CLAIM,
            f"claim p50 at {large:,} rows (one connection) ÷ bare one-row insert-and-commit",
            times(one.median / bare.median),
            times(one.p95 / bare.p95),
            "report",
            INFO,
            f"bare commit p50 {ms(bare.median)}, p95 {ms(bare.p95)} (fsync on), interleaved",
        ),
        Row(
            CLAIM,
            f"bulk insert through the `candidate` triggers, {small.rows:,} rows",
            f"{slow_s:.1f} s",
            "",
            "report",
            INFO,
            f"{small.rows / slow_s:,.0f} rows/s, one INSERT … SELECT generate_series per "
            "dataset; the larger stores are built with the trigger off and `candidate` "
            "filled in one statement (checked equal at this size)",
        ),
    )
    section.add(
        Row(
            CLAIM,
            f"claim statements whose plan scans datastatus, candidate or run, {large:,} rows",
            str(len(scans)),
            "",
            "0",
            verdict(not scans),
            f"{len(plans)} statements explained" + ("; " + "; ".join(scans) if scans else ""),
        )
    )
    section.text(
        f"### {CLAIM}\n\n{config.claim_cycles} claim + finish cycles per size and mode, sizes, "
        "modes and a bare one-row insert-and-commit interleaved in a shuffled order within "
        "each cycle, rotating over jobs j1..j5 (the chain of `bench_claim`). Each claim is "
        "`claims.claim` with recovery on, as a RunJob starts; its run lock goes through "
        "this process's keeper. Build time is setup, not a figure (ANALYZE after it).",
        "\n".join(table),
        f"Round trips of 50 claim + finish cycles on one connection at {large:,} rows "
        "(client-side time per statement, including psycopg and the `?` translation; the "
        "commit is not a statement here), each sent on its own: claims and finishes "
        "pipeline them, where a statement's own time would be its send only:",
        "\n".join(statements),
        "EXPLAIN (ANALYZE, BUFFERS) of each distinct statement, with the parameters of its "
        "first call, in a rolled-back transaction (a statement whose chunk has moved on "
        "since shows the same plan on fewer rows):",
        "\n".join(plans),
    )
