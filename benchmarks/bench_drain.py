"""Drain mode and the status views: the benchmarks of commands still being built.

Each probes the installed CLI first and reports "skipped" with the reason while a
command is missing, never a made-up number. ``utility runs`` exists already and is
measured now; ``utility status`` / ``explain`` and ``RunJob --all`` light up as soon
as they land (their measuring code has not yet run against them: check the first
numbers they give).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import stores
from measure import (
    BIN,
    Config,
    Dist,
    Row,
    Section,
    base_env,
    ms,
    paired,
    run_once,
    times,
    verdict,
    write_script,
)

VIEW_TARGET = 0.300  # seconds
DRAIN_TARGET = 0.015  # seconds per chunk
PARALLEL_TARGET = 2.5  # --parallel 1 time ÷ --parallel 4 time
DRAIN_CHUNKS = 2_000
SLEEP_CHUNKS, SLEEP_S = 24, 0.2
UTILITY = str(BIN / "utility.sh")
RUNJOB = str(BIN / "RunJob")


def _help(argv: list[str], env: dict[str, str], cwd: Path) -> str | None:
    """The command's ``--help`` text, or None when the command does not exist."""
    done = subprocess.run(
        [*argv, "--help"], cwd=cwd, env=env, capture_output=True, text=True, timeout=60
    )
    return done.stdout if done.returncode == 0 else None


# -- status views ------------------------------------------------------------------------------


def bench_views(config: Config, work: Path) -> Section:
    section = Section("views", "Status views")
    chunks = config.view_chunks
    big, tiny = work / "big.db", work / "tiny.db"
    stores.Chain.with_rows(chunks).build(big).close()
    stores.single_job(tiny, "noop", chunks=10).close()
    env = base_env(big)
    commands = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "runs, 10 rows": [UTILITY, "--db", str(tiny), "runs"],
        f"runs, {chunks:,} chunks": [UTILITY, "runs"],
        # the same rows without the table; `utility --json runs` would take "--json" for
        # the seed's passkey argument and print a table (see open findings)
        "runs --json": [UTILITY, "runs", "--json"],
    }
    missing = []
    for name, argv in (("status", [UTILITY, "status"]), ("explain", [UTILITY, "explain", "j3"])):
        if _help([UTILITY, name], env, work) is None:
            missing.append(name)
        else:
            commands[f"{name}, {chunks:,} chunks"] = argv
    for argv in commands.values():  # once for real: a failing command is not fast
        done = subprocess.run(argv, cwd=work, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr}")
    secs: dict[str, list[float]] = {name: [] for name in commands}
    for i in range(1 + config.view_rounds):
        for name, argv in commands.items():
            run = run_once(argv, work, env)
            if i:  # the first round warms the caches
                secs[name].append(run.seconds)
    python = secs["python -c pass"]
    for name in commands:
        if name in ("python -c pass", "runs, 10 rows", "runs --json"):
            continue
        dist = Dist.of(secs[name])
        to_python = paired(secs[name], python, lambda a, b: a / b)
        to_tiny = paired(secs[name], secs["runs, 10 rows"], lambda a, b: a / b)
        section.add(
            Row(
                section.title,
                f"`utility {name.split(',')[0]}` at {chunks:,} chunks, wall time",
                ms(dist.median),
                ms(dist.p95),
                f"< {ms(VIEW_TARGET)}",
                verdict(dist.p95 < VIEW_TARGET),
                f"{times(to_python.median)} Python start-up; "
                f"{times(to_tiny.median)} `utility runs` on a 10-row store",
            )
        )
    table_cost = paired(secs[f"runs, {chunks:,} chunks"], secs["runs --json"], lambda a, b: a - b)
    section.add(
        Row(
            section.title,
            "`utility runs` − `utility runs --json` (the cost of printing a table)",
            ms(table_cost.median),
            ms(table_cost.p95),
            "report",
            note=f"{times(table_cost.median / Dist.of(python).median)} Python start-up; "
            "it is the import of tabulate (see open findings)",
        )
    )
    for name in missing:
        section.skip(
            f"`utility {name}` at {chunks:,} chunks",
            f"`utility {name}` does not exist yet (issue 3/forensics work in progress)",
            f"< {ms(VIEW_TARGET)}",
        )
    section.text(
        f"The store is the claim benchmark's 5-job chain with {chunks:,} datastatus OUT rows "
        f"(chunks); {config.view_rounds} rounds after a warm-up round, each command through "
        "`bin/utility.sh` as a user types it. Verdict on p95."
    )
    return section


# -- drain mode ----------------------------------------------------------------------------------


def bench_drain(config: Config, work: Path) -> Section:
    section = Section("drain", "Drain mode")
    store_path = work / "probe.db"
    stores.single_job(store_path, "noop", chunks=1).close()
    env = base_env(store_path)
    usage = _help([RUNJOB], env, work) or ""
    if "--all" not in usage:
        reason = "RunJob has no --all yet (drain mode, issue 3, in progress)"
        section.skip(
            f"`RunJob --all` over {DRAIN_CHUNKS:,} no-op chunks, per chunk − bare script",
            reason,
            f"≤ {ms(DRAIN_TARGET)}",
        )
        section.skip(
            "`--parallel 4` speed-up over `--parallel 1`, sleeping jobs",
            reason,
            f"≥ {PARALLEL_TARGET:g}×",
        )
        section.skip(f"peak RSS of a {DRAIN_CHUNKS:,}-chunk drain", reason, "report")
        return section
    chunks = 200 if config.quick else DRAIN_CHUNKS
    write_script(work / "noop.sh", "#!/bin/sh\nexit 0\n")
    write_script(work / "sleepy.sh", f"#!/bin/sh\nsleep {SLEEP_S}\n")
    python = [run_once([sys.executable, "-c", "pass"], work, env).seconds for _ in range(20)]
    bare = Dist.of([run_once(["./noop.sh"], work, env).seconds for _ in range(50)])
    per_chunk, rss = [], []
    for i in range(1 if config.quick else 3):
        path = work / f"drain-{i}.db"
        stores.single_job(path, "noop", chunks=chunks).close()
        run = run_once([RUNJOB, "--db", str(path), "--all", "./noop.sh"], work, env)
        if run.code != 0:
            raise RuntimeError(f"RunJob --all exited {run.code}")
        per_chunk.append(run.seconds / chunks - bare.median)
        rss.append(run.max_rss_kb / 1024)
    overhead = Dist.of(per_chunk)
    section.add(
        Row(
            section.title,
            f"`RunJob --all` over {chunks:,} no-op chunks, per chunk − bare script",
            ms(overhead.median),
            ms(overhead.p95),
            f"≤ {ms(DRAIN_TARGET)}",
            verdict(overhead.median <= DRAIN_TARGET),
            f"{times(overhead.median / Dist.of(python).median)} Python start-up; "
            f"bare script {ms(bare.median)}",
        ),
        Row(
            section.title,
            f"peak RSS of a {chunks:,}-chunk drain",
            f"{Dist.of(rss).median:.1f} MB",
            f"{Dist.of(rss).p95:.1f} MB",
            "report",
        ),
    )
    speedups = []
    for i in range(1 if config.quick else 2):
        timings = {}
        for parallel in (1, 4):
            path = work / f"sleepy-{i}-{parallel}.db"
            stores.single_job(path, "sleepy", chunks=SLEEP_CHUNKS).close()
            argv = [RUNJOB, "--db", str(path), "--all", "--parallel", str(parallel), "./sleepy.sh"]
            run = run_once(argv, work, env)
            if run.code != 0:
                raise RuntimeError(f"{' '.join(argv)} exited {run.code}")
            timings[parallel] = run.seconds
        speedups.append(timings[1] / timings[4])
    speedup = Dist.of(speedups)
    section.add(
        Row(
            section.title,
            "`--parallel 4` speed-up over `--parallel 1`, sleeping jobs",
            times(speedup.median),
            times(speedup.p5),
            f"≥ {PARALLEL_TARGET:g}×",
            verdict(speedup.median >= PARALLEL_TARGET),
            f"{SLEEP_CHUNKS} chunks of `sleep {SLEEP_S}`; p95 column: 5th percentile",
        )
    )
    section.text(
        f"`RunJob --all ./noop.sh` over {chunks:,} chunks on a fresh store per repeat; "
        "per-chunk overhead = wall time ÷ chunks − the bare script's median."
    )
    return section
