"""``make bench``: run every benchmark, print a table, rewrite RESULTS.md and README's summary.

Environment:
  BENCH_QUICK=1        reduced sizes and repeats, for a smoke run (~1-2 min);
                       RESULTS.md and README are then left alone unless BENCH_WRITE=1
  BENCH_ONLY=a,b       only these benchmarks (runjob, claim, contention, spark, sparkdrain,
                       streaming, serve, views, scale, drain, backlog, postgres, peers,
                       backfill, fleet); also leaves the files alone unless BENCH_WRITE=1
  BENCH_SIZES=...      claim benchmark store sizes in rows, e.g. 10000,100000
  BENCH_K=1,5,10,...   backfill: a sweep of the batch size K (RunJob --all --batch K ÷
                       the one-query limit at each K) instead of its usual rows
  BENCH_TMP=DIR        where scratch stores go (default: the system temp folder; must
                       be a local disk, as for a real store)
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

import bench_backfill
import bench_backlog
import bench_claim
import bench_contention
import bench_drain
import bench_fleet
import bench_peers
import bench_postgres
import bench_runjob
import bench_serve
import bench_spark
import bench_sparkdrain
import bench_streaming
import bench_views
import report
from measure import Config, Row, Section, load_average

BENCHMARKS = (
    ("runjob", bench_runjob.bench),
    ("claim", bench_claim.bench),
    ("contention", bench_contention.bench),
    ("spark", bench_spark.bench),
    ("sparkdrain", bench_sparkdrain.bench),
    ("backfill", bench_backfill.bench),
    ("streaming", bench_streaming.bench),
    ("serve", bench_serve.bench),
    ("views", bench_drain.bench_views),
    ("scale", bench_views.bench),
    ("drain", bench_drain.bench_drain),
    ("backlog", bench_backlog.bench),
    ("postgres", bench_postgres.bench),
    ("peers", bench_peers.bench),
    ("fleet", bench_fleet.bench),
)


def filesystem(path: Path) -> str:
    """The mount type of ``path`` (tmpfs would make every commit look free)."""
    best, kind = "", "unknown"
    try:
        for line in Path("/proc/mounts").read_text().splitlines():
            _, mount, fstype, *_ = line.split()
            if str(path).startswith(mount) and len(mount) > len(best):
                best, kind = mount, fstype
    except OSError:
        pass
    return f"{kind} ({path})"


def main() -> int:
    config = Config.from_env()
    scratch = Path(tempfile.mkdtemp(prefix="dataflow-bench-", dir=os.environ.get("BENCH_TMP")))
    fs = filesystem(scratch)
    print(f"benchmarks in {scratch}, {fs}; {'quick' if config.quick else 'full'} run", flush=True)
    sections: list[Section] = []
    failed = False
    started = time.perf_counter()
    try:
        for name, bench in BENCHMARKS:
            if not config.wants(name):
                continue
            print(f"== {name}", flush=True)
            work = scratch / name
            work.mkdir()
            t0, load = time.perf_counter(), load_average()
            try:
                section = bench(config, work)
            except Exception as exc:  # one broken benchmark must not hide the others
                traceback.print_exc()
                failed = True
                section = Section(name, name)
                section.add(Row(name, "benchmark failed", verdict="ERROR", note=str(exc)[:300]))
            section.seconds = time.perf_counter() - t0
            section.load = (load, load_average())
            print(f"   {section.seconds:.0f} s", flush=True)
            sections.append(section)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    elapsed = time.perf_counter() - started
    print()
    print(report.terminal_table(sections))
    partial = config.quick or bool(config.only)
    if partial and os.environ.get("BENCH_WRITE", "") in ("", "0"):
        print("\nquick or partial run: RESULTS.md and README left alone (BENCH_WRITE=1 writes)")
    else:
        report.write(sections, config, fs, elapsed)
        print(f"\nwrote {report.RESULTS.relative_to(report.ROOT)} and the README summary")
    print(f"total {elapsed / 60:.1f} min")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
