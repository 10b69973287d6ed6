"""Every command against a store that is not usable: a folder, a truncated or foreign file,
a store another writer keeps locked. Each must end in one clean ``error:`` line, a non-zero
exit, no traceback, and the file byte-identical afterwards."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

from support import _chunks, dump, refused, script, state
from support.faults import fill_disk, mount, mounted

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
    ("register-job", "more", "--in", "src", "--out", "spare"),
    ("set", "work", "retries=2"),
    ("unregister-job", "work"),
    ("export", "config.json"),
    ("import", "good.json"),
    ("board", "--html", "board.html"),
]
RUNJOB = ("RUNJOB", "./work.sh")


def good_store(chain, tmp_path: Path) -> None:
    """A real store with job work (src -> dst), one READY chunk done, an export of it,
    and a dataset no job uses."""
    script(tmp_path, "work.sh", "true")
    assert chain.runjob("./work.sh").code == 0
    chain.ok("register-dataset", "spare")  # for a register-job that would be valid
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


@pytest.mark.long  # each writer waits out its busy timeout
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
            or argv[0]
            in ("ready", "register-dataset", "register-job", "set", "unregister-job", "import")
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


READERS = {"sql", "runs", "jobs", "datasets", "getjob", "history", "log", "explain", "status"}
READERS |= {"lineage", "export", "board"}
# these have something to change in good_store's store (recover, purge, dml of no row
# may answer that nothing needed changing)
CHANGERS = {"endjob", "forcejob", "deleterun", "resubmit", "hold", "ready", "RUNJOB"}
CHANGERS |= {"register-dataset", "register-job", "set", "unregister-job", "import"}


@pytest.mark.parametrize("fault", ["read-only file", "read-only folder"])
def test_every_command_on_a_read_only_store(chain, tmp_path, fault):
    """A store on a read-only mount (the file alone, or its folder): every reading command
    answers, every writing one is one line saying so, and the store is unchanged."""
    good_store(chain, tmp_path)
    if fault == "read-only file":
        source = db = target = tmp_path / "dataflow.db"
    else:
        source = tmp_path / "src"
        shutil.copytree(tmp_path, source)
        target = tmp_path / "ro"
        target.mkdir()
        db = target / "dataflow.db"
    with mounted("--bind", str(source), str(target)):
        mount("-o", "remount,bind,ro", str(target))
        original = source if source.is_file() else source / "dataflow.db"
        dump = iterdump(original)
        env = {"DATAFLOW_DB": str(db)}
        for argv in (*COMMANDS, RUNJOB):
            result = run(chain, argv, env=env)
            if argv[0] in READERS or (argv[0] not in CHANGERS and result.code == 0):
                assert result.code == 0 and result.err == "", (argv, result)
            else:
                assert_refused(result, argv)
                assert "read-only" in result.err, (argv, result.err)
            assert iterdump(original) == dump, argv


def test_a_second_hard_link_to_the_store_is_refused(chain, tmp_path):
    os.link(tmp_path / "dataflow.db", tmp_path / "twin.db")
    script(tmp_path, "work.sh", "true")
    before = dump(tmp_path)
    refused = chain.runjob("--db", "twin.db", "./work.sh")
    assert refused.code != 0 and "has 2 hard links" in refused.err, refused
    assert refused.err.count("\n") == 1
    assert dump(tmp_path) == before


def test_a_full_disk_at_the_claim_or_the_finish_never_breaks_the_store(cli, tmp_path):
    """The store on a small tmpfs: full before the claim (refused, nothing written), and
    filled by the job itself (the finish fails in one line; the chunk is recovered later)."""
    small = tmp_path / "small"
    small.mkdir()
    with mounted("-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small)):
        env = {"DATAFLOW_DB": str(small / "dataflow.db")}
        cli.ok("createtables", env=env)
        for name in ("src", "dst"):
            cli.ok("register-dataset", name, env=env)
        cli.ok("register-job", "work", "--in", "src", "--out", "dst", env=env)
        cli.ok("ready", "src", "1", "2", env=env)
        script(tmp_path, "work.sh", f"head -c 2000000 /dev/zero > {small}/filler 2>/dev/null; true")
        with sqlite3.connect(small / "dataflow.db") as conn:
            before = list(conn.iterdump())
        filler = fill_disk(small)
        refused = cli.runjob("./work.sh", env=env)
        assert refused.code != 0 and refused.err.startswith("error: "), refused
        assert "Traceback" not in refused.err and refused.err.count("\n") == 1
        filler.unlink()
        with sqlite3.connect(small / "dataflow.db") as conn:
            assert list(conn.iterdump()) == before

        finish = cli.runjob("./work.sh", env=env)  # the job fills the disk, then ends well
        assert finish.code != 0 and "Traceback" not in finish.err, finish
        assert finish.err.startswith("error: ") and "the store" in finish.err
        (small / "filler").unlink()
        again = cli.runjob("./work.sh", env=env)
        assert "belonged to a dead run; marked FAILED (abandoned)" in again.out, again
        with sqlite3.connect(small / "dataflow.db") as conn:
            assert conn.execute("pragma integrity_check").fetchone() == ("ok",)


@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)
@pytest.mark.both_stores
def test_a_store_with_a_second_hard_link_is_refused_by_every_writer(cli, tmp_path):
    _chunks(cli)
    script(tmp_path, "A.sh", "exit 0")
    os.link(tmp_path / "dataflow.db", tmp_path / "twin.db")
    before = state(tmp_path)
    for argv in (
        ("RunJob", "./A.sh"),
        ("utility.sh", "ready", "src", "7"),
        ("utility.sh", "dml", "delete from datastatus"),
        ("utility.sh", "createtables"),
        ("utility.sh", "--db", "twin.db", "resubmit", "A", "1"),
        ("utility.sh", "register-dataset", "x"),
    ):
        refused(cli(*argv), 2, "has 2 hard links")
    assert state(tmp_path) == before
    assert cli.ok("runs").lines[0].startswith("DATAID")  # reading is fine
