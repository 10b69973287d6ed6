"""What a writer of the store's rows (any SQL client) can make our commands do: control
characters and over-long names are shown safely, an expression that comes out NULL
never opens a gating row, a live run's rows deleted are told (its result not recorded),
hostile log and audit rows are shown safely or refused in one line. Never a traceback."""

from __future__ import annotations

import os
import zlib

import pytest

from dataflow.dataids import MAX_NAME
from support import (
    _chunks,
    history,
    refused,
    rows,
    script,
    start_runjob,
    state,
    wait_for,
    write,
)
from support.badinput import _one_line, _setup

RAW = "".join(map(chr, [*range(0x20), 0x7F, 0x85, 0x9B])).replace("\n", "")


@pytest.mark.both_stores
def test_control_characters_from_the_store_are_printed_escaped(cli, tmp_path):
    """A job, a dataid, a dataset's host written by another client with a newline, an
    escape sequence, a C1 CSI: every line we print keeps them escaped, one line each."""
    _chunks(cli)
    name = "e\x1b]0;pwned\x07two\nlines\x7f\x9b2J"  # a title, a newline, DEL, a C1 CSI
    job = "J" + name
    write(tmp_path, "insert into job (jobid, itemtype, datasetid) values (?, 'IN', 'src')", job)
    write(tmp_path, "insert into job (jobid, itemtype, datasetid) values (?, 'OUT', 'dst')", job)
    write(tmp_path, "update dataset set hostname = ? where datasetid = 'src'", "h" + name)
    dataid = "9" + name
    cli.ok("ready", "src", "9")
    write(tmp_path, "update datastatus set dataid = ? where dataid = '9'", dataid)
    shown = (job, dataid, "h" + name)
    escaped = [repr(text)[1:-1] for text in shown]
    script(tmp_path, "runner.sh", "exit 0")
    outputs = []
    for args in (
        ("runs",),
        ("history",),
        ("status",),
        ("datasets",),
        ("jobs",),
        ("getjob", job),
        ("explain", job, dataid),
        ("lineage", "src", dataid),
        ("sql", "select jobid, dataid from datastatus"),
    ):
        outputs.append(cli.ok(*args))
    for result in outputs:
        assert not set(result.out + result.err) & set(RAW), result
    assert escaped[1] in outputs[0].out and escaped[0] in outputs[2].out
    assert escaped[2] in outputs[3].out
    # a table stays a table: each row one line
    assert len(outputs[0].lines) == 2 + 4  # header, dashes, 3 chunks of src + the one
    # an error about it is one line, escaped
    before = state(tmp_path)
    wrong = refused(cli.utility("endjob", job, dataid + "x", "READY"), says=escaped[1])
    assert not set(wrong.err) & set(RAW)
    assert state(tmp_path) == before
    # the drain's lines and the seed's lines of RunJob
    (tmp_path / f"{job}.sh").symlink_to(tmp_path / "runner.sh")
    ran = cli.runjob("--all", f"./{job}.sh")
    assert ran.code == 0 and not set(ran.out + ran.err) & set(RAW), ran
    assert escaped[0] in ran.out and escaped[1] in ran.out


@pytest.mark.both_stores
def test_names_over_the_maximum_written_by_sql_are_run_and_shown(cli, tmp_path):
    """Our commands refuse a dataid over MAX_NAME characters; one that a writer put in by
    SQL is run and shown as any other, without a traceback."""
    _setup(cli, tmp_path)
    long_id = "9" * 100 + "x" * (10240 - 100)  # 10 KB: PostgreSQL's index takes it compressed
    cli.ok("dml", f"insert into datastatus values ('src', 'external', '{long_id}', 'OUT', "
           "'READY', now())")  # fmt: skip
    script(tmp_path, "A.sh", 'printf %s "$dataid" > "ran.$DATAFLOW_RUN"')
    done = cli.runjob("--all", "./A.sh", timeout=120)
    assert done.code == 0 and done.err == "", done
    assert sorted(p.read_text() for p in tmp_path.glob("ran.*")) == sorted(["1", "2", long_id])
    assert len(long_id) > MAX_NAME
    shown = [("explain", "A", long_id), ("history", "A"), ("runs",), ("status",)]
    for argv in [*shown, ("board", "--json"), ("lineage", "dst", long_id)]:
        shown = cli.utility(*argv)
        assert shown.code == 0 and "Traceback" not in shown.err, (argv, shown.err[:300])


@pytest.mark.parametrize("drain", [(), ("--all",)])
@pytest.mark.both_stores
def test_a_writer_deleting_a_live_chunks_rows_is_told_its_result_is_not_recorded(
    cli, tmp_path, drain
):
    _setup(cli, tmp_path)
    script(tmp_path, "A.sh", "touch started; while [ ! -e go ]; do sleep 0.05; done")
    runjob = start_runjob(cli, *drain, "./A.sh")
    try:
        wait_for(lambda: (tmp_path / "started").exists(), 60, "the job's start")
        cli.ok("dml", "delete from datastatus where jobid = 'A'")
    finally:
        (tmp_path / "go").touch()
        out, err = runjob.communicate(timeout=120)
    told = [line for line in err.splitlines() if "not recorded" in line]
    assert len(told) == 1 and told[0].startswith("warning: A 1: its rows were deleted"), err
    assert "Traceback" not in err and runjob.returncode == 1, (out, err)
    assert "not recorded" in history(tmp_path, "A")[0][5]


@pytest.mark.both_stores
def test_an_expression_never_nulls_a_gating_row(cli, tmp_path):
    """SQLite makes 1/0 NULL where PostgreSQL refuses it, and neither takes a NULL status:
    on both stores the update is one line, every row as it was, and the job's next chunk
    still runs."""
    _setup(cli, tmp_path)
    before = state(tmp_path)
    for sql in (
        "update datastatus set status = NULL",
        "update job set datasetid = NULL where itemtype = 'IN'",
        "update datastatus set status = 1/0",
        "update datastatus set locktype = 1/0 where locktype = 'OUT'",
        "update job set datasetid = 1/0",
        "insert into datastatus values ('src', 'x', '3', 'OUT', 1/0, now())",
    ):
        refused = cli.utility("dml", sql)
        assert _one_line(refused.code, refused.out, refused.err), (sql, refused)
    assert state(tmp_path) == before
    script(tmp_path, "A.sh", "true")
    assert cli.run_job("./A.sh").exit_code == 0
    assert history(tmp_path, "A")[0][:3] == ("1", 1, "READY")


@pytest.mark.both_stores
def test_hostile_log_and_audit_rows_are_shown_safely_or_refused_in_one_line(cli, tmp_path, address):
    """A writer's rows of runlog (sizes that are not sizes, a body that is not zlib, one
    that inflates past what it says) and of action (control characters, 100 KB of detail):
    utility log, actions and history show them escaped or refuse in one line."""
    _setup(cli, tmp_path)
    script(tmp_path, "A.sh", "echo hello")
    assert cli.run_job("./A.sh").exit_code == 0
    [(runid, logpath)] = [r for r in rows(tmp_path, "select runid, logpath from run")]
    os.unlink(logpath)  # (else this host's own file is read, not the row)
    pg = isinstance(address, str)

    def blob(data: bytes) -> str:
        return f"'\\x{data.hex()}'::bytea" if pg else f"x'{data.hex()}'"

    bomb = zlib.compress(b"\x1b[2J" * (8 << 20), 9)
    damaged = [
        f"body = {blob(b'not zlib')}",
        f"body = {blob(bomb)}, kept = -5, size = 3",
        f"body = {blob(bomb)}, kept = 4, size = 9223372036854775807",
    ]
    if not pg:  # (an SQLite column takes text where it says integer)
        damaged += ["kept = 'x'", "size = 'a lot'", "body = 'text, not bytes'"]
    for case, change in enumerate(damaged):
        cli.ok("dml", f"update runlog set {change} where runid = {runid}")
        shown = cli.utility("log", "A", "1")
        said = (case, shown.code, shown.err[:300], len(shown.out))
        assert "Traceback" not in shown.err and len(shown.err.splitlines()) <= 1, said
        assert len(shown.out) < 1 << 20, said  # never the bomb inflated
        if shown.code:
            assert shown.err == "error: the store's copy of that log is damaged\n", said
    detail = "\x1b]0;owned\x07" + "d" * 100_000
    cli.ok("dml", "insert into action (acted, host, who, client, action, jobid, dataid, "
           f"detail) values ('2026-11-29 10:00:00', 'h\nx', 'me\x1b[2J', null, 'hold', 'A', "
           f"'1', '{detail}')")  # fmt: skip
    for argv in (("actions",), ("history", "A", "1"), ("actions", "--json")):
        shown = cli.utility(*argv)
        assert shown.code == 0 and shown.err == "", (argv, shown.err[:300])
        assert "\x1b" not in shown.out and "\x07" not in shown.out, argv
