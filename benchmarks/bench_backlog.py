"""``BENCH_ONLY=backlog``: a backlog of 100,000 ready chunks drains in linear time (issue 45).

One ``RunJob --all --parallel 4 ./noop.sh`` drains a fresh store of N ready chunks of one
job (``stores.single_job``), at N = 10,000 and N = 100,000, on SQLite and on PostgreSQL.
The figure is the 100k drain's time ÷ the 10k drain's, against 11x (linear, with a
margin): a drain whose work per chunk grows with what it has done, or with what the store
holds, shows here and not in the 2,000-chunk drain of ``bench_drain``.

The 10k drain runs before and after the 100k one and its mean is the divisor, so a
change of load during the run weighs on both sides. Each drain is also timed by the CPU
of RunJob's whole process tree (its workers and job processes are reaped inside it, so
``wait4`` counts them): on a shared machine that grows with the work, not with the
neighbours. On PostgreSQL the server's CPU is not in it.

The stores are built each run, not cached as ``bench_views`` caches its ~1M-row chains:
100,000 rows go in through the ``candidate`` triggers in about 3 s on either store.

Environment: ``BENCH_BACKLOG_SIZES`` (default ``10000,100000``; quick ``1000,10000``),
``BENCH_BACKLOG_STORES`` (default ``sqlite,postgres``), ``BENCH_BACKLOG_PARALLEL``
(default 4).
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from subprocess import DEVNULL

import pg_server
import stores
from measure import (
    BIN,
    Config,
    Row,
    Section,
    base_env,
    load_average,
    ms,
    times,
    verdict,
    write_script,
)

from dataflow.store import Store, create_store

RUNJOB = str(BIN / "RunJob")
GROWTH = 11.0  # the big drain's time ÷ the small one's, for 10x the chunks
JOB = "noop"


def sizes(config: Config) -> tuple[int, int]:
    given = [int(s) for s in os.environ.get("BENCH_BACKLOG_SIZES", "").split(",") if s]
    small, big = given or ((1_000, 10_000) if config.quick else (10_000, 100_000))
    return small, big


def kinds() -> tuple[str, ...]:
    return tuple(os.environ.get("BENCH_BACKLOG_STORES", "sqlite,postgres").split(","))


def parallel() -> int:
    return int(os.environ.get("BENCH_BACKLOG_PARALLEL", "4"))


def ready_count(store: Store) -> int:
    """The job's READY outputs: a drain that exits 0 must have produced every chunk."""
    sql = f"SELECT COUNT(*) FROM datastatus WHERE datasetid = '{JOB}_out' AND status = 'READY'"
    return int(store.conn.execute(sql).fetchone()[0])


class Drained:
    """One drain: wall and CPU seconds, RunJob's own peak RSS (MB), and the 1-minute
    load before and after."""

    def __init__(
        self, chunks: int, seconds: float, cpu: float, rss: float, load: tuple[float, float]
    ):
        self.chunks, self.seconds, self.cpu, self.rss, self.load = chunks, seconds, cpu, rss, load


def drain(address: str, chunks: int, work: Path, env: dict[str, str]) -> Drained:
    """``RunJob --all --parallel N ./noop.sh`` over the store at ``address`` (built)."""
    argv = [RUNJOB, "--db", address, "--all", "--parallel", str(parallel()), "./noop.sh"]
    before = load_average()
    start = time.perf_counter()
    # the drain's output (a line per chunk) is thrown away, as cron's would go to a log
    with tempfile.TemporaryFile(dir=work) as errors:  # a pipe could fill and stall it
        proc = subprocess.Popen(argv, cwd=work, env=env, stdout=DEVNULL, stderr=errors)
        own = 0  # RunJob's own peak, read while it lives (wait4's is its tree's largest)
        while not (ended := os.wait4(proc.pid, os.WNOHANG))[0]:
            own = max(own, _peak_kb(proc.pid))
            time.sleep(0.1)
        _, status, usage = ended
        seconds = time.perf_counter() - start
        errors.seek(0)
        said = errors.read().decode(errors="replace").strip()
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise RuntimeError(f"RunJob --all over {chunks:,} chunks exited {code}: {said[-500:]}")
    store, _ = create_store(address if "://" in address else Path(address))
    try:
        done = ready_count(store)
    finally:
        store.close()
    if done != chunks:
        raise RuntimeError(f"RunJob --all left {chunks - done:,} of {chunks:,} chunks not READY")
    cpu = usage.ru_utime + usage.ru_stime
    rss = own / 1024
    print(
        f"   {chunks:>9,}: {seconds:.1f} s, cpu {cpu:.1f} s, RunJob's peak RSS {rss:.1f} MB, "
        f"load {before:.1f}",
        flush=True,
    )
    return Drained(chunks, seconds, cpu, rss, (before, load_average()))


def _peak_kb(pid: int) -> int:
    """The process's own peak resident size so far (VmHWM), 0 once it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def sqlite_builder(work: Path) -> Callable[[str, int], str]:
    def build(name: str, chunks: int) -> str:
        path = work / f"{name}.db"
        stores.single_job(path, JOB, chunks=chunks).close()
        return str(path)

    return build


def postgres_builder(server: pg_server.Server) -> Callable[[str, int], str]:
    def build(name: str, chunks: int) -> str:
        address = server.database(name)
        pg_server.single_job(address, JOB, chunks=chunks).close()
        return address

    return build


def rounds(
    kind: str, build: Callable[[str, int], str], small: int, big: int, work: Path
) -> list[Drained]:
    """small, big, small: each drain on a store of its own, built just before it."""
    done = []
    for n, chunks in enumerate((small, big, small)):
        address = build(f"backlog_{kind}_{n}_{chunks}", chunks)
        done.append(drain(address, chunks, work, {**base_env(work), "DATAFLOW_DB": address}))
    return done


def rows(kind: str, drains: list[Drained], section: Section) -> None:
    first, big, last = drains
    small = first.chunks
    wall = big.seconds / ((first.seconds + last.seconds) / 2)
    cpu = big.cpu / ((first.cpu + last.cpu) / 2)
    loads = [x for d in drains for x in d.load]
    each = [d.seconds / d.chunks for d in drains]
    section.add(
        Row(
            section.title,
            f"{kind}: `RunJob --all --parallel {parallel()} ./noop.sh`, "
            f"{big.chunks:,} ÷ {small:,} chunks, drain time",
            times(wall),
            "",
            f"≤ {GROWTH:g}×",
            verdict(wall <= GROWTH),
            f"CPU of RunJob's process tree {times(cpu)}; {big.seconds:.0f} s ÷ "
            f"{first.seconds:.1f} s and {last.seconds:.1f} s (before and after); "
            f"load {min(loads):.1f}–{max(loads):.1f} on {os.cpu_count()} cores",
        ),
        Row(
            section.title,
            f"{kind}: per chunk at {small:,} / {big.chunks:,} chunks",
            ms(each[1]),
            ms((each[0] + each[2]) / 2),
            "report",
            note=f"median column: at {big.chunks:,}; p95 column: at {small:,} (mean of "
            f"{ms(each[0])} and {ms(each[2])}); CPU {ms(big.cpu / big.chunks)} / "
            f"{ms((first.cpu + last.cpu) / (2 * small))} a chunk; RunJob's peak RSS "
            f"{big.rss:.1f} / {max(first.rss, last.rss):.1f} MB",
        ),
    )


def bench(config: Config, work: Path) -> Section:
    section = Section("backlog", "Backlog drain")
    small, big = sizes(config)
    write_script(work / "noop.sh", "#!/bin/sh\nexit 0\n")
    for kind in kinds():
        if kind == "sqlite":
            rows(kind, rounds(kind, sqlite_builder(work), small, big, work), section)
            continue
        try:
            server = pg_server.Server()
        except pg_server.Unavailable as exc:
            section.skip(f"{kind}: {big:,} ÷ {small:,} chunks, drain time", str(exc))
            continue
        try:
            rows(kind, rounds(kind, postgres_builder(server), small, big, work), section)
        finally:
            server.stop()
    section.text(
        f"One `RunJob --all --parallel {parallel()} ./noop.sh` (a `#!/bin/sh` that exits 0) "
        f"drains a fresh store of one job whose {small:,} or {big:,} input chunks are READY "
        f"and whose outputs are absent (`stores.single_job`), in the order {small:,}, "
        f"{big:,}, {small:,}; the ratio divides the big drain's time by the mean of the two "
        "small ones. Each drain must exit 0 with every chunk READY. CPU: user + system "
        "seconds of RunJob and every process it reaped (workers, job processes); on "
        "PostgreSQL the server's are not in it. Peak RSS: RunJob's own (`VmHWM`, read every "
        "0.1 s), where what a drain keeps for its summary lives (its workers' are apart). "
        "The drain's output goes to /dev/null; PostgreSQL runs with fsync on; `--workers` "
        "is RunJob's default (one a core on PostgreSQL, 1 on SQLite)."
    )
    return section
