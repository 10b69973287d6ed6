"""Operator views at scale: every read command at ~10k and ~1M rows, on both stores.

A store is the claim benchmark's 5-job chain (``stores.Chain``) with its run history
(``Chain.run_rows``: ~1.2 runs per produced chunk), so ``~1M`` means about a million
status rows and about a million runs. Each command runs as a whole process, as a user
types it (``bin/utility.sh``); ``utility serve``'s pages are timed per request against
one server. The goal (issue 45): at most 1 s at ~1M, and at most 2x the time at ~10k.

Building a SQLite store of ~1M rows through its triggers takes minutes: it is built once
and kept in ``$BENCH_TMP`` (else the system temp folder) under ``dataflow-bench-cache``,
keyed by the migrations' digest, and copied for each run (a run must not change it).
PostgreSQL stores are built each run, with the triggers off and ``candidate`` filled in
one statement (``pg_server.build_chain``), which takes well under a minute.

Environment: ``BENCH_VIEW_SIZES`` (default ``10000,1000000``; quick: ``10000,100000``),
``BENCH_VIEW_STORES`` (default ``sqlite,postgres``).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import statistics
import subprocess
import tempfile
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pg_server
import stores
from bench_serve import Server, available
from measure import BIN, Config, Row, Section, base_env, ms, verdict

from dataflow.store.sqlite import schema as sqlite_schema

UTILITY = str(BIN / "utility.sh")
LIMIT_S = 1.0  # seconds at ~1M rows
GROWTH = 2.0  # ~1M time / ~10k time


def sizes(config: Config) -> tuple[int, ...]:
    given = os.environ.get("BENCH_VIEW_SIZES", "")
    if given:
        return tuple(int(s) for s in given.split(",") if s)
    return (10_000, 100_000) if config.quick else (10_000, 1_000_000)


def kinds() -> tuple[str, ...]:
    return tuple(os.environ.get("BENCH_VIEW_STORES", "sqlite,postgres").split(","))


def cache_folder() -> Path:
    """Built stores kept between runs: never in git, never in a run's scratch folder."""
    base = Path(os.environ.get("BENCH_TMP") or tempfile.gettempdir())
    folder = base / "dataflow-bench-cache"
    folder.mkdir(exist_ok=True)
    return folder


def middle(chain: stores.Chain) -> str:
    """A dataid in the middle of the history: the one the commands of one chunk read."""
    return str(chain.done(len(chain.jobs)) // 2)


def with_log(store, chain: stores.Chain) -> None:
    """The store's copy of the log of j3's last run at :func:`middle` (``utility log``)."""
    with store.transaction():
        run = store.last_run("j3", middle(chain))
        store.put_log(run["runid"], 12, 12, zlib.compress(b"hello world\n"), True)


def sqlite_store(rows: int, work: Path) -> Path:
    """A copy of the cached SQLite chain of ``rows`` rows with its runs (built if absent)."""
    digest = hashlib.sha256("".join(sqlite_schema.migrations()).encode()).hexdigest()[:12]
    cached = cache_folder() / f"views-{rows}-{digest}.db"
    if not cached.exists():
        for stale in cached.parent.glob(f"views-{rows}-*.db"):  # of older migrations
            stale.unlink()
        building = cached.with_suffix(".building")
        building.unlink(missing_ok=True)
        chain = stores.Chain.with_rows(rows)
        store = chain.build(building)
        chain.add_runs(store)
        with_log(store, chain)
        store.close()
        building.rename(cached)
    copy = work / f"sqlite-{rows}.db"
    shutil.copyfile(cached, copy)
    return copy


@contextlib.contextmanager
def postgres_stores(rows: tuple[int, ...]) -> Iterator[dict[int, str]]:
    """A throwaway server with one store per size; their addresses."""
    server = pg_server.Server()
    try:
        addresses = {}
        for n in rows:
            address = server.database(f"views_{n}")
            chain = stores.Chain.with_rows(n)
            store, _ = pg_server.build_chain(address, chain, triggers=False)
            pg_server.add_runs(store, chain)
            with_log(store, chain)
            store.close()
            addresses[n] = address
        yield addresses
    finally:
        server.stop()


def commands(chain: stores.Chain, work: Path) -> dict[str, list[str]]:
    """Each read command, on a chunk in the middle of the history."""
    dataid = middle(chain)
    return {
        "status": [UTILITY, "status"],
        "status j3": [UTILITY, "status", "j3"],
        "board --html": [UTILITY, "board", "--html", str(work / "board.html")],
        "board --json": [UTILITY, "board", "--json"],
        "explain j3": [UTILITY, "explain", "j3"],
        "history": [UTILITY, "history"],
        "history j3": [UTILITY, "history", "j3"],
        "history j3 D": [UTILITY, "history", "j3", dataid],
        "chunks": [UTILITY, "chunks"],
        "check": [UTILITY, "check"],
        "lineage d3 D": [UTILITY, "lineage", "d3", dataid],
        "log j3 D": [UTILITY, "log", "j3", dataid],
        "actions": [UTILITY, "actions"],
    }


def pages(chain: stores.Chain) -> dict[str, str]:
    dataid = middle(chain)
    return {
        "serve /": "/",
        "serve /api/board": "/api/board",
        "serve /api/status": "/api/status",
        "serve /api/runs": "/api/runs",
        "serve /api/history": "/api/history",
        "serve /api/log": f"/api/log/j3/{dataid}",
        "serve /api/actions": "/api/actions",
        "serve /metrics": "/metrics",
    }


def run_timed(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds and the CPU seconds (user + system) of the command's own process:
    on a busy machine the second grows with the work done, not with the neighbours'.
    On PostgreSQL the server's share is not in it."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):  # check exits 1 when a chunk is late
        raise RuntimeError(f"{' '.join(argv[1:])} exited {code}: {proc.stderr.read().decode()}")
    proc.stderr.close()
    return seconds, usage.ru_utime + usage.ru_stime


def _median(measure: Callable[[], float], rounds: int) -> float:
    measure()  # warms the caches; a failing command raises here
    return statistics.median(measure() for _ in range(rounds))


def time_store(address: str, rows: int, work: Path, rounds: int) -> dict[str, float]:
    """Seconds (median of ``rounds``) of each command and page on one store."""
    chain = stores.Chain.with_rows(rows)
    env = (
        base_env(Path(address))
        if "://" not in address
        else {**base_env(work), "DATAFLOW_DB": address}
    )
    took: dict[str, float] = {}
    cpus: dict[str, list[float]] = {}
    for name, argv in commands(chain, work).items():

        def once(argv=argv, name=name) -> float:
            seconds, cpu = run_timed(argv, work, env)
            cpus.setdefault(name, []).append(cpu)
            return seconds

        took[name] = _median(once, rounds)
        took[f"{name} cpu"] = statistics.median(cpus[name][1:])
        print(f"   {rows:>9,} {name}: {ms(took[name])} (cpu {ms(took[f'{name} cpu'])})", flush=True)
    if available():
        return took
    serving = work / f"serve-{rows}"
    serving.mkdir(exist_ok=True)
    with Server(serving, env) as server, server.client() as http:
        # a first scrape waits for the count of the ended runs its start began (seconds at a
        # million runs, in a thread of its own): the pages are timed once it is done, as a
        # server that has been up for a while answers them
        http.get("/metrics")
        for name, path in pages(chain).items():

            def get(path=path) -> float:
                start = time.perf_counter()
                answer = http.get(path)
                if answer.status_code != 200:
                    raise RuntimeError(f"GET {path} answered {answer.status_code}: {answer.text}")
                return time.perf_counter() - start

            took[name] = _median(get, rounds)
            print(f"   {rows:>9,} {name}: {ms(took[name])}", flush=True)
    return took


def bench(config: Config, work: Path) -> Section:
    section = Section("scale", "Operator views at scale")
    small, big = sizes(config)
    rounds = 3 if config.quick else 5
    for kind in kinds():
        try:
            if kind == "sqlite":
                times = {
                    n: time_store(str(sqlite_store(n, work)), n, work, rounds) for n in (small, big)
                }
            else:
                with postgres_stores((small, big)) as addresses:
                    times = {n: time_store(a, n, work, rounds) for n, a in addresses.items()}
        except pg_server.Unavailable as exc:
            section.skip(f"{kind}: every read command", str(exc), f"< {ms(LIMIT_S)}")
            continue
        for name in times[small]:
            if name.endswith(" cpu"):
                continue
            little, large = times[small][name], times[big][name]
            growth = large / little
            cpu = ""
            if f"{name} cpu" in times[small]:
                cpu = (
                    f"; CPU of the command's process {ms(times[big][f'{name} cpu'])} / "
                    f"{ms(times[small][f'{name} cpu'])}"
                )
            section.add(
                Row(
                    section.title,
                    f"{kind}: `{name}` at {small:,} / {big:,} rows",
                    ms(large),
                    ms(little),
                    f"≤ {ms(LIMIT_S)}, ≤ {GROWTH:g}×",
                    verdict(large <= LIMIT_S and growth <= GROWTH),
                    f"{growth:.1f}× the time at {small:,} rows{cpu}",
                )
            )
    section.text(
        f"Each store is the 5-job chain with ~N datastatus rows and ~N runs (N = {small:,} and "
        f"{big:,}); median of {rounds} runs after a warm-up, each command a whole process "
        "through `bin/utility.sh`, each `serve` row one request to a running `utility serve`. "
        f"Columns: the time at {big:,} rows, then at {small:,}."
    )
    return section
