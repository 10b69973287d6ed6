"""Every command against a store that is not usable: a folder, a truncated or foreign file,
a store another writer keeps locked. Each must end in one clean ``error:`` line, a non-zero
exit, no traceback, and the file byte-identical afterwards."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

from support import script

# every command that opens the store, with arguments that would be valid on a good one
COMMANDS = [
    ("sql", "select 1"),
    ("dml", "delete from job where jobid='x'"),
    ("runs",),
    ("jobs",),
    ("datasets",),
    ("getjob", "work"),
    ("endjob", "work", "1", "READY"),
    ("forcejob", "work", "9"),
    ("deleterun", "work", "1"),
    ("recover",),
    ("history",),
    ("log", "work", "1"),
    ("explain", "work"),
    ("status",),
    ("lineage", "src", "1"),
    ("resubmit", "work", "1"),
    ("hold", "work", "2"),
    ("release", "work", "2"),
    ("purge",),
    ("ready", "src", "7"),
    ("register-dataset", "more"),
    ("register-job", "more", "--in", "src", "--out", "dst"),
    ("unregister-job", "work"),
    ("export", "config.json"),
    ("import", "good.json"),
    ("board", "--html", "board.html"),
]
RUNJOB = ("RUNJOB", "./work.sh")


def good_store(chain, tmp_path: Path) -> None:
    """A real store with job work (src -> dst), one READY chunk done, an export of it."""
    script(tmp_path, "work.sh", "true")
    assert chain.runjob("./work.sh").code == 0
    chain.ok("export", "good.json")


def run(chain, argv, env=None):
    if argv[0] == "RUNJOB":
        return chain.runjob(*argv[1:], env=env)
    return chain.utility(*argv, env=env)


def assert_refused(result, argv):
    assert result.code != 0, (argv, result)
    assert result.err.startswith("error: ") and result.err.count("\n") == 1, (argv, result.err)
    assert "Traceback" not in result.err


def iterdump(db: Path) -> list[str]:
    with closing(sqlite3.connect(db)) as conn:  # a reader: WAL lets it past the writer
        return list(conn.iterdump())


def snapshot(path: Path) -> bytes | None:
    return path.read_bytes() if path.is_file() else None


@pytest.mark.parametrize("fault", ["folder", "truncated", "foreign"])
def test_every_command_refuses_an_unusable_store_in_one_line(chain, tmp_path, fault):
    good_store(chain, tmp_path)
    db = tmp_path / "dataflow.db"
    if fault == "folder":
        db.unlink()
        for side in tmp_path.glob("dataflow.db-*"):
            side.unlink()
        db.mkdir()
    elif fault == "truncated":
        data = db.read_bytes()
        for side in tmp_path.glob("dataflow.db-*"):
            side.unlink()
        db.write_bytes(data[:300])
    else:
        for side in tmp_path.glob("dataflow.db-*"):
            side.unlink()
        db.write_text("id,name\n1,not a database\n" * 50)
    before = snapshot(db)
    for argv in (*COMMANDS, RUNJOB):
        result = run(chain, argv)
        assert_refused(result, argv)
        assert snapshot(db) == before, argv


def test_every_writing_command_gives_up_on_a_store_locked_too_long(chain, tmp_path):
    good_store(chain, tmp_path)
    db = tmp_path / "dataflow.db"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sqlite3, sys, time\n"
            "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "c.execute('BEGIN IMMEDIATE'); print('locked', flush=True); time.sleep(120)",
            str(db),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline() == "locked\n"
        dump = iterdump(db)
        writers = [
            argv
            for argv in COMMANDS
            if argv[0] in ("dml", "endjob", "forcejob", "deleterun", "recover", "resubmit", "hold")
            or argv[0] in ("ready", "register-dataset", "register-job", "unregister-job", "import")
        ]
        began = time.monotonic()
        for argv in (*writers, RUNJOB):
            result = run(chain, argv, env={"DATAFLOW_BUSY_TIMEOUT": "0.3"})
            assert_refused(result, argv)
            assert "locked for longer than the busy timeout" in result.err, (argv, result.err)
        assert time.monotonic() - began < 60  # the short timeout was honoured
        # readers are not blocked by a writer (WAL)
        assert chain.utility("runs", env={"DATAFLOW_BUSY_TIMEOUT": "0.3"}).code == 0
    finally:
        holder.kill()
        holder.wait()
    assert iterdump(db) == dump
