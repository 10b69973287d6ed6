"""Timing, distributions and the result rows every benchmark reports.

Every figure is a distribution (median and p95 over repeats) or a ratio against a
baseline measured in the same run, because machines here are noisy.
"""

from __future__ import annotations

import functools
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = ROOT / "bin"
VENV_BIN = Path(sys.executable).parent  # `make bench` runs .venv/bin/python


@dataclass(frozen=True)
class Config:
    """How big and how often; ``BENCH_QUICK=1`` shrinks everything for a smoke run."""

    quick: bool
    only: frozenset[str]  # empty: all benchmarks
    runjob_rounds: int
    claim_sizes: tuple[int, ...]
    claim_cycles: int
    contention_counts: tuple[int, ...]
    contention_chunks: int
    contention_repeats: int
    spark_repeats: int
    view_rounds: int
    view_chunks: int

    @classmethod
    def from_env(cls) -> Config:
        quick = os.environ.get("BENCH_QUICK", "") not in ("", "0")
        only = frozenset(filter(None, os.environ.get("BENCH_ONLY", "").split(",")))
        sizes = os.environ.get("BENCH_SIZES", "")
        return cls(
            quick=quick,
            only=only,
            runjob_rounds=10 if quick else 40,
            claim_sizes=tuple(int(s) for s in sizes.split(",") if s)
            or ((10_000, 100_000) if quick else (10_000, 100_000, 1_000_000)),
            claim_cycles=100 if quick else 400,
            contention_counts=(1, 2, 4) if quick else (1, 2, 4, 8, 16),
            contention_chunks=1_000 if quick else 5_000,
            contention_repeats=1 if quick else 3,
            spark_repeats=1 if quick else 9,
            view_rounds=5 if quick else 20,
            view_chunks=10_000 if quick else 100_000,
        )

    def wants(self, name: str) -> bool:
        return not self.only or name in self.only


# -- distributions ------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100) of at least one value."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    pos = (len(ordered) - 1) * q / 100
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


@dataclass(frozen=True)
class Dist:
    """A distribution of repeated measurements."""

    values: tuple[float, ...]

    @classmethod
    def of(cls, values: Sequence[float]) -> Dist:
        if not values:
            raise ValueError("no measurements")
        return cls(tuple(values))

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def p95(self) -> float:
        return percentile(self.values, 95)

    @property
    def p5(self) -> float:
        return percentile(self.values, 5)

    @property
    def n(self) -> int:
        return len(self.values)

    def scaled(self, factor: float) -> Dist:
        return Dist(tuple(v * factor for v in self.values))


def paired(a: Sequence[float], b: Sequence[float], op: Callable[[float, float], float]) -> Dist:
    """A distribution of ``op(a[i], b[i])`` over rounds measured together."""
    return Dist.of([op(x, y) for x, y in zip(a, b, strict=True)])


# -- result rows ------------------------------------------------------------------------------

MET, MISSED, SKIPPED, INFO = "met", "MISSED", "skipped", ""


@dataclass
class Row:
    """One line of the results table."""

    benchmark: str
    figure: str
    median: str = ""
    p95: str = ""
    target: str = ""
    verdict: str = INFO
    note: str = ""


@dataclass
class Section:
    """What one benchmark reports: table rows and a markdown body for RESULTS.md."""

    name: str
    title: str
    rows: list[Row] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    seconds: float = 0.0
    load: tuple[float, float] = (0.0, 0.0)  # 1-minute load average before and after

    def add(self, *rows: Row) -> None:
        self.rows.extend(rows)

    def text(self, *paragraphs: str) -> None:
        self.details.extend(paragraphs)

    def skip(self, figure: str, reason: str, target: str = "") -> None:
        print(f"  skipped: {figure}: {reason}", flush=True)
        self.rows.append(Row(self.title, figure, target=target, verdict=SKIPPED, note=reason))


def load_average() -> float:
    """The 1-minute load average: other work on this shared machine shows up here."""
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return float("nan")


def verdict(ok: bool) -> str:
    return MET if ok else MISSED


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms" if seconds < 0.1 else f"{seconds * 1000:.0f} ms"


def times(ratio: float) -> str:
    return f"{ratio:.2f}×"


# -- processes ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    """One finished child process: wall time, its own peak RSS, exit code."""

    seconds: float
    max_rss_kb: int
    code: int


def run_once(argv: Sequence[str], cwd: Path, env: dict[str, str]) -> Run:
    """Run a command with its output discarded; wall time and peak RSS from wait4.

    ``wait4`` gives this child's own rusage (the largest of it and the descendants it
    waited for), so each run's peak RSS is its own, not the maximum over the whole
    benchmark as ``RUSAGE_CHILDREN`` would be.
    """
    start = time.perf_counter()
    proc = subprocess.Popen(
        list(argv), cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Run(seconds, usage.ru_maxrss, proc.returncode)


def check_output(argv: Sequence[str], cwd: Path, env: dict[str, str]) -> str:
    """Run a command once for real and return its stdout; raise with its stderr on failure."""
    done = subprocess.run(list(argv), cwd=cwd, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()}")
    return done.stdout


def base_env(store: Path) -> dict[str, str]:
    """The environment a user would have: our venv first on PATH, the store named, and
    Python's compiled modules used (a machine that forbids writing them, as CI's may,
    would compile every module of ours again at each start: see :func:`compiled`)."""
    compiled()
    skipped = ("PASSKEY", "DATAFLOW_", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if not k.startswith(skipped)}
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '/usr/bin:/bin')}"
    env["DATAFLOW_DB"] = str(store)
    return env


@functools.cache
def compiled() -> None:
    """Our modules' bytecode written, as a user's first run (or ``pip install``) writes
    it: a start-up is measured as every later start pays it."""
    import compileall

    compileall.compile_dir(ROOT / "dataflow", quiet=1)


def write_script(path: Path, body: str) -> Path:
    path.write_text(body)
    path.chmod(0o755)
    return path
