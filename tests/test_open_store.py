"""An open store: clients that are not ours (the sqlite3 shell, Python's own sqlite3 in
another process) write datastatus and job, and the next claim honours every write, in
natural order. Nothing in the schema may need a function only our process has."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from contextlib import closing

import pytest

from dataflow.store import create_store
from dataflow.store.sqlite import schema
from support import (
    _admin,
    rows,
    script,
    statuses,
)

SHELL = shutil.which("sqlite3")
needs_shell = pytest.mark.skipif(
    SHELL is None,
    reason="the sqlite3 shell is not installed: apt-get install sqlite3 (.ci/run does it)",
)
NOW = "strftime('%Y-%m-%d %H:%M:%f', 'now', 'localtime')"


def shell_sql(tmp_path, sql: str) -> None:
    done = subprocess.run(
        [SHELL, str(tmp_path / "dataflow.db"), sql], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0 and not done.stderr, done


def python_sql(tmp_path, sql: str) -> None:
    """Python's stdlib sqlite3, in a process that never imported dataflow."""
    code = (
        "import sqlite3, sys\n"
        "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "conn.execute(sys.argv[2])\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", code, str(tmp_path / "dataflow.db"), sql],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done


def ready(dataid: str) -> str:
    return (
        "insert into datastatus (dataid,datasetid,jobid,locktype,modified,status) "
        f"values ('{dataid}','src','upstream','OUT',{NOW},'READY')"
    )


def claimed_in_order(chain, tmp_path, count: int) -> list[str]:
    script(tmp_path, "work.sh", 'echo "$dataid" >> order')
    (tmp_path / "order").unlink(missing_ok=True)
    for _ in range(count):
        assert chain.run_job("./work.sh").exit_code == 0
    assert chain.run_job("./work.sh").started == 0  # nothing left to claim
    return (tmp_path / "order").read_text().split()


def test_the_schema_uses_no_function_of_ours(tmp_path):
    """Every trigger, table and index of a store as created today: the last migration
    alone may make none of them."""
    created, _ = create_store(tmp_path / "dataflow.db")
    created.close()
    with closing(sqlite3.connect(tmp_path / "dataflow.db")) as conn:
        made = [sql for (sql,) in conn.execute("SELECT sql FROM sqlite_schema WHERE sql > ''")]
    assert any("CREATE TRIGGER candidate_on_insert" in sql for sql in made)
    assert not [sql for sql in made if "dataflow_natkey" in sql or "now()" in sql]


@needs_shell
@pytest.mark.parametrize("write", [shell_sql, python_sql], ids=["sqlite3-shell", "python-stdlib"])
@pytest.mark.long
def test_outside_writes_are_honoured_in_natural_order(chain, tmp_path, write):
    chain.ok("dml", "delete from datastatus")
    # shard numbers, dates and other dataids, written out of order by a producer
    dataids = ["10", "9", "b-10", "b-2", "2026-11-20", "2026-2-1", "1.0"]
    for dataid in dataids:
        write(tmp_path, ready(dataid))
    natural = ["1.0", "9", "10", "2026-2-1", "2026-11-20", "b-2", "b-10"]
    assert claimed_in_order(chain, tmp_path, len(dataids)) == natural

    # an operator reruns two chunks, and withdraws one input
    write(
        tmp_path,
        "update datastatus set status='RESUBMIT' where jobid='work' and dataid in ('b-10','9')",
    )
    write(tmp_path, "delete from datastatus where datasetid='src' and dataid='10'")
    write(tmp_path, "update datastatus set status='RESUBMIT' where jobid='work' and dataid='10'")
    assert claimed_in_order(chain, tmp_path, 2) == ["9", "b-10"]
    assert statuses(tmp_path, "work")["10"] == "RESUBMIT"  # its input is gone: it waits

    # a new job registered from outside sees every READY chunk of its input
    write(
        tmp_path,
        "insert into job (jobid,itemtype,datasetid) values ('late','IN','src'), ('late','OUT','late_out')",
    )
    write(tmp_path, "insert into dataset (datasetid) values ('late_out')")
    script(tmp_path, "late.sh", 'echo "$dataid" >> late_order')
    for _ in range(6):
        assert chain.run_job("./late.sh").exit_code == 0
    assert (tmp_path / "late_order").read_text().split() == [d for d in natural if d != "10"]

    # and changes it or takes it away again (every trigger on job runs in plain SQL)
    write(tmp_path, "update job set datasetid='late_out' where jobid='late' and itemtype='OUT'")
    write(tmp_path, "delete from job where jobid='late'")
    assert rows(tmp_path, "select count(*) from candidate where jobid='late'") == [(0,)]


@needs_shell
def test_an_outside_write_cannot_corrupt_the_claim_order(chain, tmp_path):
    """Keys written by outside clients for other dataids are '' until a claim sets them."""
    chain.ok("dml", "delete from datastatus")
    for dataid in ("x-10", "x-9"):
        shell_sql(tmp_path, ready(dataid))
    assert sorted(
        rows(tmp_path, "select sortkey from candidate where jobid='work' and dataid like 'x-%'")
    ) == [
        ("",),
        ("",),
    ]
    assert claimed_in_order(chain, tmp_path, 2) == ["x-9", "x-10"]


def test_hostile_dataids_from_an_outside_writer_never_break_a_command(chain, tmp_path):
    """Newlines, '../', 10 KB and bytes that are not UTF-8, written by a plain client."""
    chain.ok("dml", "delete from datastatus")
    hostile = ["two\nlines", "../../escape", "z" * 10_000]
    with closing(sqlite3.connect(tmp_path / "dataflow.db", isolation_level=None)) as conn:
        for dataid in hostile:
            conn.execute(
                f"insert into datastatus values ('src','up',?,'OUT','READY',{NOW})", (dataid,)
            )
        conn.execute(
            f"insert into datastatus values ('src','up',CAST(X'61FF62' AS TEXT),'OUT','READY',{NOW})"
        )
        conn.execute(  # runs of it too, a year old: purge's to delete the first, and its log
            "insert into run (jobid, dataid, attempt, retry, status, started) values"
            " ('work', CAST(X'61FF62' AS TEXT), 1, 0, 'FAILED', '2025-01-01 00:00:00'),"
            " ('work', CAST(X'61FF62' AS TEXT), 2, 0, 'FAILED', '2025-01-02 00:00:00')"
        )
    script(
        tmp_path,
        "work.sh",
        'printf "%s" "$dataid" > "seen.$(printf "%s" "$dataid" | md5sum | cut -c1-8)"',
    )
    ran = chain.runjob("--all", "./work.sh")
    assert ran.code == 0, ran
    assert (
        "dataid 'a\\udcffb' of work cannot name a chunk" in ran.err and "Traceback" not in ran.err
    )
    seen = sorted(p.read_text() for p in tmp_path.glob("seen.*"))
    assert seen == sorted(hostile)
    assert not (tmp_path.parent / "escape").exists()
    commands = [("runs",), ("status",), ("explain", "work"), ("history",), ("jobs",)]
    for argv in [*commands, ("purge", "--days-old", "30")]:
        shown = chain.utility(*argv)
        assert shown.code == 0 and "Traceback" not in shown.err, (argv, shown)
    assert "a\\udcffb" in chain.utility("runs").out  # shown, escaped
    hostile_runs = "select attempt from run where hex(dataid) = '61FF62'"
    assert rows(tmp_path, hostile_runs) == [(2,)]  # purged: all but the chunk's last run


def test_explain_names_the_chunk_a_claim_takes_past_those_no_claim_takes(chain, tmp_path):
    """In natural order: a dataid that is not UTF-8, a chunk whose last run's attempt a
    client wrote as text, a FAILED chunk whose one retry is spent; then the chunk a claim
    takes, which explain names too (it reads, a claim takes: the same judge)."""
    chain.ok("set", "work", "retries=1")
    with closing(sqlite3.connect(tmp_path / "dataflow.db", isolation_level=None)) as conn:
        conn.execute(
            f"insert into datastatus values ('src','up',CAST(X'30FF' AS TEXT),'OUT','READY',{NOW})"
        )
        conn.execute(
            "insert into run (jobid, dataid, attempt, retry, status, started, ended) values"
            " ('work', '1', 'one', 0, 'FAILED', '2026-01-01 00:00:00', '2026-01-01 00:00:01'),"
            " ('work', '2', 2, 1, 'FAILED', '2026-01-01 00:00:00', '2026-01-01 00:00:01')"
        )
        conn.execute(f"insert into datastatus values ('dst','work','2','OUT','FAILED',{NOW})")
    assert chain.ok("explain", "work").out.startswith("next chunk of work: 3 (")
    script(tmp_path, "work.sh", 'echo "$dataid" >> ran.txt')
    assert chain.runjob("./work.sh").code == 0
    assert (tmp_path / "ran.txt").read_text() == "3\n"


@needs_shell
def test_a_store_made_before_the_open_schema_is_opened_by_createtables(cli, tmp_path):
    """A v6 store's triggers call dataflow_natkey(): the shell cannot write it until
    createtables upgrades it; then it can, and its chunks are claimed in natural order."""
    from support import old_store

    conn = old_store(tmp_path / "dataflow.db", 6)
    conn.execute("insert into dataset (datasetid) values ('src'), ('dst')")
    conn.execute(
        "insert into job (jobid,itemtype,datasetid) values ('work','IN','src'), ('work','OUT','dst')"
    )
    conn.execute("insert into datastatus values ('src','up','10','OUT','READY',now())")
    conn.close()
    before = subprocess.run(
        [SHELL, str(tmp_path / "dataflow.db"), ready("9")], capture_output=True, text=True
    )
    assert "no such function: dataflow_natkey" in before.stderr, before
    assert cli.ok("createtables").out.endswith(f"upgraded to schema version {schema.VERSION}\n")
    shell_sql(tmp_path, ready("9"))
    shell_sql(tmp_path, ready("2026-1-5"))
    assert claimed_in_order(cli, tmp_path, 3) == ["9", "10", "2026-1-5"]


@pytest.mark.parametrize(
    "column,value", [("retry", "'x'"), ("retry", "X'00'"), ("attempt", "X'00'")]
)
def test_operator_commands_on_a_run_row_whose_count_is_no_count(chain, tmp_path, column, value):
    """A run row whose retry (or attempt) is text or bytes (any SQLite client may write
    them into the typeless column): status, explain and the board say so, without a
    traceback (they compared it with an int: TypeError), as RunJob skips the chunk."""
    chain.ok("dml", "insert into datastatus values ('dst','work','2','OUT','FAILED',now())")
    chain.ok("dml", "insert into job (jobid, itemtype, itemvalue) values ('work', 'retries', '3')")
    counts = {"attempt": "1", "retry": "0", column: value}
    _admin(
        tmp_path,
        "insert into run (jobid, dataid, attempt, retry, status, started)"
        f" values ('work', '2', {counts['attempt']}, {counts['retry']}, 'FAILED', '2026-01-01')",
    )
    for args in (["status"], ["status", "work"], ["explain", "work"], ["history"]):
        done = chain.utility(*args)
        assert done.code == 0 and "Traceback" not in done.err, (args, done.err)
    board = chain.utility("board", "--html", str(tmp_path / "board.html"))
    assert board.code == 0 and "Traceback" not in board.err, board.err
    assert "not a count" in (tmp_path / "board.html").read_text()
    explained = chain.utility("explain", "work", "2")
    assert "Traceback" not in explained.err, explained.err
    assert "attempt or retry is not a count" in explained.out
    script(tmp_path, "work.sh", 'echo "$dataid" >> ran')
    assert chain.drain("./work.sh").exit_code == 0
    assert sorted((tmp_path / "ran").read_text().split()) == ["1", "3"]


def test_a_bad_candidate_row_from_outside_is_repaired_not_looped_over(chain, tmp_path):
    """A row whose sort key is not its dataid's (any SQLite client can write one) used to
    spin the claim inside its write transaction forever."""
    with sqlite3.connect(tmp_path / "dataflow.db") as conn:
        conn.execute("delete from candidate")
        conn.execute("insert into candidate values ('work', '~', '2'), ('work', '~', '9')")
    script(tmp_path, "work.sh", "echo $dataid >> seen")
    assert chain.runjob("./work.sh", timeout=30).code == 0
    assert (tmp_path / "seen").read_text() == "2\n"
    keys = rows(tmp_path, "select sortkey from candidate where jobid='work'")
    assert ("~",) not in keys
