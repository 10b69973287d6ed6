"""The results: a table on the terminal, ``benchmarks/RESULTS.md`` and README's summary."""

from __future__ import annotations

import os
import platform
import re
import sqlite3
import subprocess
import sys
from datetime import datetime
from pathlib import Path

from measure import MET, MISSED, ROOT, SKIPPED, Config, Row, Section

RESULTS = ROOT / "benchmarks" / "RESULTS.md"
FINDINGS = ROOT / "benchmarks" / "findings.md"
README = ROOT / "README.md"
START, END = "<!-- bench:start -->", "<!-- bench:end -->"
COLUMNS = ("benchmark", "figure", "median", "p95", "target", "verdict", "note")


def _cells(row: Row) -> list[str]:
    return [row.benchmark, row.figure, row.median, row.p95, row.target, row.verdict, row.note]


def terminal_table(sections: list[Section]) -> str:
    rows = [[c.replace("`", "") for c in _cells(r)[1:6]] for s in sections for r in s.rows]
    head = ["figure", "median", "p95", "target", "verdict"]
    widths = [max(len(x) for x in col) for col in zip(head, *rows, strict=False)]
    widths[0] = min(widths[0], 78)
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    for section in sections:
        lines.append(f"[{section.title}]")
        for row in section.rows:
            cells = [c.replace("`", "") for c in _cells(row)[1:6]]
            cells[0] = cells[0][: widths[0]]
            lines.append("  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)))
    return "\n".join(lines)


def _markdown_table(rows: list[Row], columns: tuple[str, ...] = COLUMNS) -> str:
    index = [COLUMNS.index(c) for c in columns]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        cells = _cells(row)
        lines.append("| " + " | ".join(cells[i].replace("|", "\\|") for i in index) + " |")
    return "\n".join(lines)


def machine() -> list[tuple[str, str]]:
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return [
        ("date", datetime.now().strftime("%Y-%m-%d %H:%M")),
        ("commit", commit or "unknown"),
        ("CPU", f"{cpu}, {os.cpu_count()} cores"),
        ("kernel", platform.release()),
        ("Python", f"{platform.python_version()} ({sys.executable})"),
        ("SQLite", sqlite3.sqlite_version),
    ]


def results_markdown(sections: list[Section], config: Config, work_fs: str, elapsed: float) -> str:
    missed = [r for s in sections for r in s.rows if r.verdict == MISSED]
    skipped = [r for s in sections for r in s.rows if r.verdict == SKIPPED]
    out = [
        "# Benchmark results",
        "",
        "Written by `make bench` (`benchmarks/run.py`); do not edit by hand — the open "
        "findings come from `benchmarks/findings.md`. Every figure is a distribution over "
        "repeats (median, p95) or a ratio against a baseline measured in the same run.",
        "",
        "| | |",
        "|---|---|",
        *(f"| {k} | {v} |" for k, v in machine()),
        f"| scratch filesystem | {work_fs} |",
        f"| run | {'quick (BENCH_QUICK=1, reduced sizes)' if config.quick else 'full'}, "
        f"{elapsed / 60:.1f} min |",
        "",
        "## Summary",
        "",
        _markdown_table([r for s in sections for r in s.rows]),
        "",
        f"Targets missed: {len(missed)}"
        + ("" if not missed else " — " + "; ".join(f"{r.figure}" for r in missed))
        + f". Skipped: {len(skipped)}.",
        "",
    ]
    for section in sections:
        before, after = section.load
        out += [
            f"## {section.title}",
            "",
            f"Run time {section.seconds:.0f} s; 1-minute load average {before:.2f} before, "
            f"{after:.2f} after (2 cores; other work on the machine raises it).",
            "",
        ]
        for paragraph in section.details:
            out += [paragraph, ""]
    out += ["## Open findings", ""]
    if FINDINGS.exists():
        text = FINDINGS.read_text().strip()
        out += [re.sub(r"^# .*\n+", "", text), ""]
    return "\n".join(out)


# the README's headline rows (by the start of their figure); RESULTS.md has them all
HEADLINES = (
    "`bin/RunJob ./noop.sh` − `./noop.sh`",
    "claim p50 at 1,000,000 rows (one connection)",
    "`RunJob --all` over 2,000 no-op chunks",
    "per Spark chunk: `RunJob --all` (50 chunks, one driver)",
    "PostgreSQL: network partition",
    "sqlite: `board --html` at",
    "postgres: `board --html` at",
    "sqlite: `RunJob --all --parallel 4 ./noop.sh`, 100,000 ÷",
    "postgres: `RunJob --all --parallel 4 ./noop.sh`, 100,000 ÷",
)


def readme_block(sections: list[Section]) -> str:
    keep = [
        r
        for s in sections
        for r in s.rows
        if r.verdict in (MET, MISSED, SKIPPED) and r.figure.startswith(HEADLINES)
    ]
    lines = [
        START,
        "",
        f"Measured by `make bench` on {datetime.now():%Y-%m-%d} ({os.cpu_count()} cores); "
        "every figure is a ratio or distribution against a baseline from the same run. "
        "All figures, query plans and open findings: "
        "[benchmarks/RESULTS.md](benchmarks/RESULTS.md).",
        "",
        _markdown_table(keep, ("figure", "median", "p95", "target", "verdict")),
        "",
        END,
    ]
    return "\n".join(lines)


def write(sections: list[Section], config: Config, work_fs: str, elapsed: float) -> None:
    RESULTS.write_text(results_markdown(sections, config, work_fs, elapsed))
    block = readme_block(sections)
    readme = README.read_text()
    if START in readme and END in readme:
        head, rest = readme.split(START, 1)
        readme = head + block + rest.split(END, 1)[1]
    else:
        readme = readme.rstrip("\n") + "\n\n## Performance\n\n" + block + "\n"
    README.write_text(readme)
