"""A run's output becomes its chunk only when the run publishes it, whole: a rerun after
a purge publishes, a chunk's attempt file does not decide whether a READY run publishes,
a publish that fails replaces none of the run's chunks, a finish whose COMMIT fails never
publishes, and an abandoned run's attempt folder is deleted (docs/guarantees.md, fenced
output). The job writes its chunk as a Spark job finds it (dataflow.spark.context)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from dataflow import layout
from support import rows, script, wait_for

# the job: writes the content of the file "content" into its chunk of every OUT dataset
# (found as a Spark job finds it), optionally with a twist named by the file "twist"
JOB = """
set -e
content=$(cat content)
for name in $(cat outs); do
    out=$(python -c "from dataflow.spark import context; print(context().output('$name').chunk_path)")
    mkdir -p "$out" && echo "$content" > "$out/part.csv"
    if [ "$(cat twist 2>/dev/null)" = "blocked-$name" ]; then  # its move cannot be done
        mkdir -p "$(dirname "$out")/old-$DATAFLOW_RUN/blocker"
    fi
done
"""


def _register(cli, tmp_path: Path, outs: tuple[str, ...] = ("dst",)) -> Path:
    lake = tmp_path / "lake"
    cli.ok("createtables")
    for name in ("src", *outs):
        cli.ok(
            "register-dataset",
            name,
            "--database",
            "csv",
            "--schemaname",
            str(lake),
            "--tablename",
            name,
        )
    cli.ok("register-job", "work", "--in", "src", "--out", *outs)
    cli.ok("ready", "src", "7")
    (tmp_path / "outs").write_text(" ".join(outs))
    script(tmp_path, "work.sh", JOB)
    return lake


def _run(cli, tmp_path: Path, content: str) -> None:
    (tmp_path / "content").write_text(content)
    done = cli.run_job("./work.sh")
    assert done.exit_code == 0, done


def _part(lake: Path, table: str = "dst") -> str:
    return (lake / table / "dataid=7" / "part.csv").read_text().strip()


@pytest.mark.both_stores
def test_a_rerun_after_purge_publishes_its_output(cli, tmp_path):
    """Fenced output, statement 1: a READY run's output is its chunk."""
    lake = _register(cli, tmp_path)
    _run(cli, tmp_path, "first")
    cli.ok("resubmit", "work", "7")
    _run(cli, tmp_path, "second")  # the chunk's _ATTEMPT is now 2
    assert cli.ok("purge").out == "1 run purged\n"  # the chunk's last run stays
    cli.ok("dml", "delete from run")  # and a writer deletes it too
    cli.ok("resubmit", "work", "7")
    _run(cli, tmp_path, "third")  # attempt 1 again
    assert rows(tmp_path, "select attempt, status from run") == [(1, "READY")]
    assert _part(lake) == "third"


@pytest.mark.both_stores
def test_a_chunks_attempt_file_does_not_decide_whether_a_ready_run_publishes(cli, tmp_path):
    """Fenced output, statement 1: a READY run's output is its chunk."""
    lake = _register(cli, tmp_path)
    _run(cli, tmp_path, "first")
    (lake / "dst" / "dataid=7" / "_ATTEMPT").write_text("99\n")
    cli.ok("resubmit", "work", "7")
    _run(cli, tmp_path, "second")
    assert rows(tmp_path, "select status from run where attempt = 2") == [("READY",)]
    assert _part(lake) == "second"


@pytest.mark.both_stores
def test_a_run_whose_publish_fails_replaces_none_of_its_chunks(cli, tmp_path):
    """Fenced output, statement 1: a run that fails never replaces the chunk."""
    lake = _register(cli, tmp_path, outs=("dst", "dst2"))
    _run(cli, tmp_path, "first")
    assert (_part(lake, "dst"), _part(lake, "dst2")) == ("first", "first")
    cli.ok("resubmit", "work", "7")
    # the second table's move fails (here: a folder in the way of its old files; in life
    # a full disk, a permission, a folder on another file system...)
    (tmp_path / "twist").write_text("blocked-dst2")
    (tmp_path / "content").write_text("second")
    assert cli.run_job("./work.sh").exit_code != 0
    assert rows(tmp_path, "select status from run where attempt = 2") == [("FAILED",)]
    assert (_part(lake, "dst"), _part(lake, "dst2")) == ("first", "first")


def test_a_finish_whose_commit_fails_never_publishes(cli, tmp_path):
    """Fenced output, statement 1: a run that fails never replaces the chunk."""
    from support.faults import mounted

    small = tmp_path / "small"
    small.mkdir()
    with mounted("-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small)):
        cli.env["DATAFLOW_DB"] = str(small / "dataflow.db")
        lake = _register(cli, tmp_path)
        (tmp_path / "content").write_text("first")
        # the job writes its chunk, then fills the store's disk, and ends well
        script(tmp_path, "work.sh", JOB + f"head -c 2000000 /dev/zero > {small}/filler || true")
        finish = cli.runjob("./work.sh")
        assert finish.code != 0 and "the store" in finish.err, finish
        (small / "filler").unlink()
        cli.ok("recover")
        with sqlite3.connect(small / "dataflow.db") as conn:
            assert conn.execute("select status from run").fetchall() == [("FAILED",)]
        assert not (lake / "dst" / "dataid=7").exists()


@pytest.mark.both_stores
def test_an_abandoned_runs_attempt_folder_is_deleted(cli, tmp_path):
    """Fenced output, statement 1: a run that fails... its attempt folder is deleted."""
    import os
    import signal

    from support import start_runjob
    from support.fenced import JOB as FENCED_JOB
    from support.fenced import _register as register_fenced
    from support.lease import _pid

    table = register_fenced(cli, tmp_path)
    script(tmp_path, "work.sh", FENCED_JOB)
    (tmp_path / "wait").touch()
    runner = start_runjob(cli, "./work.sh", start_new_session=True)
    job = _pid(tmp_path, "job.pid")
    assert (table / layout.ATTEMPTS).is_dir()
    os.killpg(runner.pid, signal.SIGKILL)
    os.kill(job, signal.SIGKILL)
    runner.wait(timeout=30)
    wait_for(lambda: "1 abandoned" in cli.ok("recover").out, timeout=60, what="the recovery")
    assert rows(tmp_path, "select status from run") == [("FAILED",)]
    assert not (table / layout.ATTEMPTS).exists()
