"""RunJob's own cost per chunk, against Python's start-up measured in the same rounds.

Each round runs, in a shuffled order: ``python -c pass`` (the baseline), ``./noop.sh``
directly, ``bin/RunJob ./noop.sh`` and ``.venv/bin/RunJob ./noop.sh`` (each claims and
finishes one chunk), and both launchers on a job with nothing to do. Overhead =
RunJob minus the bare script in the same round; the figure is overhead ÷ Python
start-up of that round.

Where valgrind is installed, the same commands' instructions too (callgrind, bin/RunJob's
shell and Python, not the job): a count that another process on the machine does not change, so that a
step of start-up cost can be weighed on a busy machine, where wall time cannot.
"""

from __future__ import annotations

import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import stores
from measure import (
    BIN,
    INFO,
    VENV_BIN,
    Config,
    Dist,
    Row,
    Run,
    Section,
    base_env,
    check_output,
    ms,
    paired,
    run_once,
    times,
    verdict,
    write_script,
)

TARGET = 4.0  # times Python start-up (issue 46: a cron tick is the most common call)
WARMUP = 3


def bench(config: Config, work: Path) -> Section:
    section = Section("runjob", "RunJob overhead per chunk")
    rounds = config.runjob_rounds
    store_path = work / "dataflow.db"
    chunks = 2 * (rounds + WARMUP) + 2  # both launchers each round, the check, callgrind's
    store = stores.single_job(store_path, "noop", chunks=chunks)
    with store, store.transaction():
        stores.register(store, "idle", ["never_ready"], ["idle_out"])
    write_script(work / "noop.sh", "#!/bin/sh\nexit 0\n")
    write_script(work / "idle.sh", "#!/bin/sh\nexit 0\n")
    env = base_env(store_path)

    variants = {
        "python -c pass": [sys.executable, "-c", "pass"],
        "./noop.sh": ["./noop.sh"],
        "bin/RunJob": [str(BIN / "RunJob"), "./noop.sh"],
        ".venv/bin/RunJob": [str(VENV_BIN / "RunJob"), "./noop.sh"],
        "bin/RunJob, nothing to do": [str(BIN / "RunJob"), "./idle.sh"],
        ".venv/bin/RunJob, nothing to do": [str(VENV_BIN / "RunJob"), "./idle.sh"],
    }
    # The output a user sees, once, so a broken RunJob cannot pass for a fast one.
    shown = check_output(variants["bin/RunJob"], work, env)
    if "rows updated to READY" not in shown:
        raise RuntimeError(f"bin/RunJob did not run a chunk: {shown!r}")
    if "no suitable data" not in check_output(variants["bin/RunJob, nothing to do"], work, env):
        raise RuntimeError("the idle job was not idle")

    runs: dict[str, list[Run]] = {name: [] for name in variants}
    shuffle = random.Random(6)
    for i in range(WARMUP + rounds):
        order = list(variants)
        shuffle.shuffle(order)
        for name in order:
            run = run_once(variants[name], work, env)
            if run.code != 0:
                raise RuntimeError(f"{name} exited {run.code}")
            if i >= WARMUP:
                runs[name].append(run)

    secs = {name: [r.seconds for r in rs] for name, rs in runs.items()}
    python = Dist.of(secs["python -c pass"])
    bare = secs["./noop.sh"]
    lines = [
        "| command | median | p95 |",
        "|---|---|---|",
        *(f"| `{n}` | {ms(Dist.of(s).median)} | {ms(Dist.of(s).p95)} |" for n, s in secs.items()),
    ]
    for launcher in ("bin/RunJob", ".venv/bin/RunJob"):
        overhead = paired(secs[launcher], bare, lambda a, b: a - b)
        ratio = paired(overhead.values, python.values, lambda a, b: a / b)
        section.add(
            Row(
                section.title,
                f"`{launcher} ./noop.sh` − `./noop.sh`, ÷ `python -c pass`",
                times(ratio.median),
                times(ratio.p95),
                f"≤ {TARGET:g}×",
                verdict(ratio.median <= TARGET),
                f"overhead {ms(overhead.median)} (p95 {ms(overhead.p95)}); "
                f"Python start-up {ms(python.median)}",
            )
        )
    for launcher in ("bin/RunJob", ".venv/bin/RunJob"):
        idle = paired(secs[f"{launcher}, nothing to do"], python.values, lambda a, b: a / b)
        section.add(
            Row(
                section.title,
                f"`{launcher}` with nothing to do, ÷ `python -c pass`",
                times(idle.median),
                times(idle.p95),
                f"≤ {TARGET:g}×",
                verdict(idle.median <= TARGET),
                f"{ms(Dist.of(secs[f'{launcher}, nothing to do']).median)} in all",
            )
        )
    _instructions(section, variants, work, env)
    rss = {name: Dist.of([r.max_rss_kb / 1024 for r in rs]) for name, rs in runs.items()}
    for launcher in ("bin/RunJob", ".venv/bin/RunJob"):
        ratio = paired(
            [r.max_rss_kb for r in runs[launcher]],
            [r.max_rss_kb for r in runs["python -c pass"]],
            lambda a, b: a / b,
        )
        section.add(
            Row(
                section.title,
                f"peak RSS of `{launcher} ./noop.sh`, ÷ `python -c pass`",
                times(ratio.median),
                times(ratio.p95),
                "report",
                INFO,
                f"{rss[launcher].median:.1f} MB (max {max(rss[launcher].values):.1f} MB); "
                f"python -c pass {rss['python -c pass'].median:.1f} MB",
            )
        )
    section.text(
        f"{rounds} rounds after {WARMUP} warm-up rounds, commands shuffled within each "
        f"round; interpreter `{sys.executable}` for the baseline and both launchers. "
        "Wall time per command:",
        "\n".join(lines),
        "Peak RSS is each process's own `ru_maxrss` from `wait4` (for `bin/RunJob` the "
        "sh wrapper `exec`s Python, so it is the same process).",
    )
    return section


def _instructions(section: Section, variants: dict[str, list[str]], work: Path, env) -> None:
    """RunJob's instructions ÷ ``python -c pass``'s, one run each under callgrind (the
    count of a run is the same from one run to the next, whatever else the machine does):
    ``bin/RunJob``'s shell and the Python it execs, not the job."""
    figure = "instructions of `bin/RunJob ./noop.sh`, ÷ `python -c pass`'s"
    if shutil.which("valgrind") is None:
        section.skip(figure, "valgrind is not installed (Debian: valgrind)")
        return
    counts = {}
    for name in ("python -c pass", "bin/RunJob", "bin/RunJob, nothing to do"):
        done = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--callgrind-out-file=/dev/null",
                "--trace-children=yes",  # the shell execs Python
                "--trace-children-skip=*.sh",  # the job is not RunJob's cost
                *variants[name],
            ],
            cwd=work,
            env=env,
            capture_output=True,
            text=True,
        )
        found = re.findall(r"Collected : (\d+)", done.stderr)
        if done.returncode != 0 or not found:
            raise RuntimeError(f"callgrind of {name} failed: {done.stderr[-300:]}")
        counts[name] = sum(int(count) for count in found)
    python = counts["python -c pass"]
    figures = {
        "bin/RunJob": figure,
        "bin/RunJob, nothing to do": "instructions of `bin/RunJob` with nothing to do, "
        "÷ `python -c pass`'s",
    }
    for name, shown in figures.items():
        note = f"{counts[name] / 1e6:.1f}M instructions; python -c pass {python / 1e6:.1f}M"
        section.add(
            Row(section.title, shown, times(counts[name] / python), "", "report", INFO, note)
        )
