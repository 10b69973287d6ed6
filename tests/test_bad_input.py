"""Hostile input to ``utility``: one ``error: ...`` line, a non-zero exit, no traceback,
and the store exactly as it was (compared as an SQL dump, or every table of a
PostgreSQL database) with no file created.

Cases about the store's own file (SQLite's pragmas, a damaged file, a full disk, a
read-only folder) and usage mistakes argparse refuses before any store is opened run on
SQLite only; the rest on both stores."""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing, contextmanager
from pathlib import Path

import pytest

from support import BIN, state
from support.faults import fill_disk, mount, mounted

REFUSED = "'utility sql' is read-only"


def dump(db: Path) -> list[str]:
    with closing(sqlite3.connect(db)) as conn:  # closed: no -shm left for the CLI to reuse
        return list(conn.iterdump())


def journal_mode(db: Path) -> str:
    with closing(sqlite3.connect(db)) as conn:
        return conn.execute("PRAGMA journal_mode").fetchone()[0]


def files(folder: Path) -> list[str]:
    """The folder's files but SQLite's own -wal and -shm, which come and go with readers."""
    return sorted(p.name for p in folder.iterdir() if not p.name.endswith(("-wal", "-shm")))


def refused(result, starts: str = "") -> None:
    assert result.code != 0, result
    assert result.out == "", result
    assert result.err.count("\n") == 1 and result.err.startswith(f"error: {starts}"), result.err
    assert "Traceback" not in result.err


@contextmanager
def unchanged(tmp_path: Path):
    """The test's store and the files of its folder are the same after the block."""
    before, listed = state(tmp_path), files(tmp_path)
    yield
    assert state(tmp_path) == before
    assert files(tmp_path) == listed


@pytest.fixture
def made(cli, tmp_path):
    """A store with a dataset, a job and a READY chunk."""
    cli.ok("createtables")
    cli.ok("dml", "insert into dataset (datasetid) values ('src'), ('dst')")
    cli.ok(
        "dml",
        "insert into job (jobid,itemtype,datasetid) values ('work','IN','src'), ('work','OUT','dst')",
    )
    cli.ok("dml", "insert into datastatus values ('src','fakejob','1','OUT','READY',now())")
    return cli


def test_sql_cannot_change_anything_even_through_pragmas_or_attach(made, tmp_path):
    db = tmp_path / "dataflow.db"
    with unchanged(tmp_path):
        for statement in (
            "pragma journal_mode=delete",
            "PRAGMA main.user_version = 99",
            "pragma wal_checkpoint(truncate)",
            "pragma foreign_keys = on",
            f"attach database '{tmp_path / 'x.db'}' as x",
            f"vacuum into '{tmp_path / 'y.db'}'",
            "vacuum",
            "detach main",
            "delete from job",
            "create temp table t(x)",
        ):
            result = made.utility("sql", statement)
            refused(result, REFUSED)
            assert "use 'utility dml' or 'utility ddl'" in result.err, statement
    assert journal_mode(db) == "wal"
    assert not (tmp_path / "x.db").exists() and not (tmp_path / "y.db").exists()
    # reading pragmas still answer
    assert made.ok("sql", "pragma journal_mode").lines[-1].strip() == "wal"
    assert "datasetid" in made.ok("sql", "pragma table_info(dataset)").out
    assert made.ok("sql", "pragma quick_check").lines[-1].strip() == "ok"
    assert "jobid" in made.ok("sql", "select name from pragma_table_info('job')").out


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
def test_sql_cannot_change_a_postgresql_store(made, tmp_path):
    with unchanged(tmp_path):
        for statement in (
            "delete from job",
            "create temp table t(x int)",
            "create table t(x int)",
            "truncate datastatus",
            "create database other",
            "with gone as (delete from job returning *) select * from gone",
            "do $$ begin delete from job; end $$",
            "select nextval(pg_get_serial_sequence('run', 'runid'))",
        ):
            result = made.utility("sql", statement)
            refused(result, REFUSED)
            assert "use 'utility dml' or 'utility ddl'" in result.err, statement
        for statement in (  # nothing turns the transaction read-write, or adds a statement
            "set transaction read write",
            "select set_config('transaction_read_only', 'off', false)",
            "select 1; delete from job",
            "commit; delete from job",
            "vacuum",
        ):
            refused(made.utility("sql", statement), "SQL failed: ")
    assert made.ok("sql", "show transaction_read_only").lines[-1].strip() == "on"
    assert made.ok("sql", "select count(*) as n from job").lines[-1].strip() == "2"
    assert made.ok("dml", "delete from job where jobid = 'work'").out == "2 rows affected\n"


@pytest.mark.both_stores
@pytest.mark.parametrize("days", ["nan", "inf", "1e300", "-1"])
def test_purge_refuses_absurd_ages(made, tmp_path, days):
    with unchanged(tmp_path):
        refused(made.utility("purge", f"--days-old={days}"), "--days-old must be a number")


@pytest.mark.both_stores
@pytest.mark.parametrize("days", ["0", "36500"])
def test_purge_takes_both_ends_of_the_ages_it_names(made, days):
    """Its refusal says "from 0 to 36500": both ends are ages it takes."""
    assert made.ok("purge", f"--days-old={days}").out == "0 runs purged\n"


@pytest.mark.both_stores
def test_export_to_a_missing_folder_or_a_folder(made, tmp_path):
    (tmp_path / "out").mkdir()
    with unchanged(tmp_path):
        refused(made.utility("export", "nofolder/config.json"), "cannot write nofolder/config.json")
        refused(made.utility("export", "out"), "cannot write out: Is a directory")
    assert list((tmp_path / "out").iterdir()) == []
    assert made.ok("export", "out/config.json").out == "configuration written to out/config.json\n"


@pytest.mark.both_stores
@pytest.mark.parametrize(
    "argv",
    [
        ("endjob", "\udcff", "1", "READY"),
        ("sql", "select '\udcff'"),
        ("crypt", "-e", "pass\udcffword"),
        ("history", "\udcff"),
        ("--db", "\udcff.db", "runs"),
    ],
)
def test_arguments_that_are_not_utf8(made, tmp_path, argv):
    """``$'\\xff'`` reaches Python as a surrogate escape (subprocess sends the byte back)."""
    with unchanged(tmp_path):
        result = made.utility(*argv, env={"PASSKEY": "plugh"})
        refused(result, "argument ")
        assert "is not valid UTF-8 text" in result.err


@pytest.mark.both_stores
@pytest.mark.parametrize(
    "content, why",
    [
        (b'{"opendataflow": 1, "datasets": [{"datasetid": "caf\xe9"}], "jobs": {}}', "not UTF-8"),
        (b'{"opendataflow": 1, "datasets": [{"datasetid": ["a"]}], "jobs": {}}', "must be text"),
        (
            b'{"opendataflow": 1, "datasets": [{"datasetid": "a"}, {"datasetid": "b"}], "jobs":'
            b' {"j": [{"itemtype": 5, "datasetid": "a"}, {"itemtype": "OUT", "datasetid": "b"}]}}',
            "itemtype must be text, not a number",
        ),
        (
            b'{"opendataflow": 1, "datasets": [{"datasetid": "a", "hostname": {}}], "jobs": {}}',
            "hostname must be text",
        ),
        (b'{"opendataflow": 1, "datasets": [{"datasetid": "a"', "not an OpenDataFlow export"),
        (b"", "not an OpenDataFlow export"),
        (  # a job cut short: the datasets before it are not imported either
            b'{"opendataflow": 1, "datasets": [{"datasetid": "a"}, {"datasetid": "b"}],'
            b' "jobs": {"j": [{"itemtype": "IN", "datasetid": "a"}]}}',
            "job 'j' needs at least one OUT dataset",
        ),
        (  # PostgreSQL's text cannot hold it: refused on both, so stores can be copied
            b'{"opendataflow": 1, "datasets": [{"datasetid": "a", "hostname": "x\\u0000y"}],'
            b' "jobs": {}}',
            "dataset 1: hostname must not hold a NUL character",
        ),
        (
            b'{"opendataflow": 1, "datasets": [{"datasetid": "a"}, {"datasetid": "b"}], "jobs":'
            b' {"j": [{"itemtype": "IN", "datasetid": "a"}, {"itemtype": "IN", "datasetid": "a"},'
            b' {"itemtype": "OUT", "datasetid": "b"}]}}',
            "job 'j' lists dataset 'a' more than once",
        ),
    ],
)
def test_import_of_a_bad_file_writes_nothing(made, tmp_path, content, why):
    (tmp_path / "config.json").write_bytes(content)
    with unchanged(tmp_path):
        result = made.utility("import", "config.json")
        refused(result)
        assert why in result.err
        refused(made.sh(f"{BIN / 'utility.sh'} import - < config.json"))


@pytest.mark.parametrize(
    "argv, says",
    [
        (("frobnicate",), "argument COMMAND: invalid choice: 'frobnicate'"),
        (("--bogus", "runs"), "unrecognized arguments: --bogus"),
        (("endjob", "work"), "the following arguments are required: dataid, status"),
        (
            ("runs", "--limit", "x"),
            "argument --limit: must be a whole number from 1 to 1000000, not 'x'",
        ),
        (("crypt", "text"), "one of the arguments -e -d is required"),
    ],
)
def test_usage_mistakes_are_one_line(made, tmp_path, argv, says):
    with unchanged(tmp_path):
        result = made.utility(*argv)
    refused(result, says)
    assert result.code == 2
    assert result.err.rstrip().endswith("--help')") and "(see 'utility" in result.err


def test_runjob_usage_mistake_is_one_line(made):
    result = made.runjob("--parallel", "x", "./job.sh")
    refused(result, "argument --parallel: invalid int value: 'x' (see 'RunJob --help')")
    assert result.code == 2


def test_createtables_refuses_a_damaged_or_foreign_file(made, tmp_path):
    db = tmp_path / "dataflow.db"
    made.ok(
        "dml",
        "insert into dataset (datasetid) with recursive n(i) as (select 1 union all "
        "select i + 1 from n where i < 20000) select 'd' || i from n",
    )
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = db.stat().st_size
    with open(db, "r+b") as handle:  # the header still says "up to date"; the pages do not
        handle.seek(size // 2 // 4096 * 4096)
        handle.write(b"\xde\xad\xbe\xef" * 4096)
    damaged = db.read_bytes()
    refused(made.utility("createtables"), f"{db} is not a usable dataflow store: it is damaged")
    assert db.read_bytes() == damaged

    (tmp_path / "notes.db").write_text("not a database\n" * 100)
    refused(made.utility("--db", "notes.db", "createtables"), "")
    assert "notes.db is not a usable dataflow store" in made.utility("--db", "notes.db", "runs").err
    assert (tmp_path / "notes.db").read_text() == "not a database\n" * 100


def test_a_full_disk_is_reported_as_such(cli, tmp_path):
    small = tmp_path / "small"
    small.mkdir()
    with mounted("-t", "tmpfs", "-o", "size=512k", "tmpfs", str(small)):
        db = small / "dataflow.db"
        env = {"DATAFLOW_DB": str(db)}
        cli.ok("createtables", env=env)
        cli.ok("dml", "insert into dataset (datasetid) values ('src')", env=env)
        before = dump(db)
        filler = fill_disk(small)
        for argv in (("dml", "insert into dataset (datasetid) values ('more')"), ("runs",)):
            result = cli.utility(*argv, env=env)
            refused(result, "cannot ")
            assert f"the store {db}: " in result.err
            assert "the disk is full" in result.err or "disk full or I/O error" in result.err
        filler.unlink()
        assert dump(db) == before
        assert cli.ok("sql", "select count(*) from dataset", env=env).lines[-1].strip() == "1"


def test_a_store_in_a_read_only_folder_can_be_read(made, tmp_path):
    src, ro = tmp_path / "src", tmp_path / "ro"
    src.mkdir()
    ro.mkdir()
    made.ok("--db", "src/dataflow.db", "createtables")
    for argv in (
        ("register-dataset", "a"),
        ("register-dataset", "b"),
        ("register-job", "j", "--in", "a", "--out", "b"),
        ("dml", "insert into datastatus values ('a','fakejob','1','OUT','READY',now())"),
    ):
        made.ok("--db", "src/dataflow.db", *argv)
    before = dump(src / "dataflow.db")
    with mounted("--bind", str(src), str(ro)):
        mount("-o", "remount,bind,ro", str(ro))
        db = ["--db", str(ro / "dataflow.db")]
        assert os.listdir(ro) == ["dataflow.db"]  # no -wal, no -shm: SQLite cannot make them
        for argv in (
            ("sql", "select datasetid from dataset"),
            ("runs",),
            ("jobs",),
            ("datasets",),
            ("status",),
            ("history",),
            ("export", "-"),
            ("getjob", "j"),
            ("explain", "j"),
            ("lineage", "a", "1"),
        ):
            result = made.utility(*db, *argv)
            assert result.code == 0 and result.err == "", (argv, result)
        assert made.ok(*db, "explain", "j", "1").lines[-1] == "will run"
        refused(
            made.utility(*db, "dml", "delete from dataset"),
            f"cannot write the store {ro / 'dataflow.db'}: its folder {ro} is read-only",
        )
        # a live writer elsewhere keeps its -wal and -shm: a reader sees its last commit
        with closing(sqlite3.connect(src / "dataflow.db", isolation_level=None)) as writer:
            writer.execute("PRAGMA wal_autocheckpoint = 0")
            writer.execute("insert into dataset (datasetid) values ('c')")
            listed = made.ok(*db, "sql", "select group_concat(datasetid) from dataset").lines
            assert listed[-1].strip() == "a,b,c"
            writer.execute("delete from dataset where datasetid = 'c'")
        assert dump(src / "dataflow.db") == before


@pytest.mark.parametrize(
    "name, make, says",
    [
        ("missing.sh", None, "cannot run ./missing.sh: no such file"),
        (
            "folder.sh",
            "folder",
            "cannot run ./folder.sh: it is a folder (RunJob --all FOLDER runs every job script in it)",
        ),
        ("plain.sh", "plain", "cannot run ./plain.sh: it is not executable (chmod +x ./plain.sh)"),
    ],
)
def test_a_job_script_that_cannot_run_changes_nothing(made, tmp_path, name, make, says):
    if make == "folder":
        (tmp_path / name).mkdir()
    elif make == "plain":
        (tmp_path / name).write_text("echo hi\n")
    with unchanged(tmp_path):  # not even a lock file or a log folder
        refused(made.runjob(f"./{name}"), says)


def test_garbage_ciphertext_changes_nothing(made, tmp_path):
    """A password that is not ciphertext (an outside writer, a bad paste): RunJob, rekey
    and crypt -d each say so in one line, and nothing is claimed or re-encrypted."""
    made.ok("dml", "update dataset set encryptedpass = 'df1$garbage!!' where datasetid = 'src'")
    (tmp_path / "work.sh").write_text("#!/bin/sh\necho ran\n")
    (tmp_path / "work.sh").chmod(0o755)
    (tmp_path / "old").write_text("k\n")
    (tmp_path / "new").write_text("n\n")
    with unchanged(tmp_path):
        refused(
            made.runjob("./work.sh", env={"PASSKEY": "k"}),
            "cannot decrypt the password of dataset 'src': wrong passkey or damaged ciphertext",
        )
        refused(
            made.utility("rekey", "--old-file", "old", "--new-file", "new"),
            "cannot decrypt the password of dataset 'src' with the old passkey; nothing changed",
        )
        for token in ("not base64!", "df1$AAAA", "AAAA"):
            refused(
                made.utility("crypt", "-d", token, env={"PASSKEY": "k"}),
                "cannot decrypt the text: wrong passkey or damaged ciphertext",
            )


def test_purge_of_a_row_naming_a_folder_in_the_log_folder_ends_in_one_line(cli, tmp_path):
    """What a writer of the store can do, statement 3 (and: errors are for people)."""
    from support.hosts import _one_job

    _one_job(cli, tmp_path, "echo hello")
    assert cli.runjob("./work.sh").code == 0
    folder = tmp_path / "dataflow.db.d" / "logs" / "work"
    assert folder.is_dir()
    cli.ok("dml", f"update run set logpath = '{folder}'")
    purged = cli.utility("purge")
    assert "Traceback" not in purged.err, purged.err
    assert folder.is_dir()
