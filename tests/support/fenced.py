"""Fenced output's tests share (test_fenced_output, test_publish): a job that writes its
host's name into its chunk as a Spark job finds it (host A's then waits for ``go`` and
writes once more, as a writer that goes on after its chunk was taken), a lake of csv
datasets, and what a folder holds."""

from __future__ import annotations

import sys
from pathlib import Path

from support import script

# the job: writes its host's name into its chunk; host A's then waits for "go" and
# writes once more, as a writer that goes on after its chunk was taken from it
JOB = f"""
out=$({sys.executable} -c 'from dataflow.spark import context; print(context().output().chunk_path)')
mkdir -p "$out" && echo "${{DATAFLOW_HOST:-here}}" > "$out/part.csv"
echo $$ > job.pid
if [ "$DATAFLOW_HOST" = hostA ] || [ -e wait ]; then
    until [ -e go ]; do sleep 0.1; done
    echo late > "$out/late.csv"
fi
exit "$(cat exit 2>/dev/null || echo 0)"
"""


def _register(cli, tmp_path: Path) -> Path:
    lake = tmp_path / "lake"
    cli.ok("createtables")
    cli.ok(
        "register-dataset",
        "src",
        "--database",
        "csv",
        "--schemaname",
        str(lake),
        "--tablename",
        "src",
    )
    cli.ok(
        "register-dataset",
        "dst",
        "--database",
        "csv",
        "--schemaname",
        str(lake),
        "--tablename",
        "dst",
    )
    cli.ok("register-job", "work", "--in", "src", "--out", "dst")
    cli.ok("ready", "src", "7")
    script(tmp_path, "work.sh", JOB)
    return lake / "dst"


def _files(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(folder.iterdir())} if folder.is_dir() else {}
