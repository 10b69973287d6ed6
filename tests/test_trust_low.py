"""The low items of "the open store is a trust boundary": each bad input is one
``error: ...`` line, a non-zero exit, no traceback, and the store as it was."""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from support import ADDRESSES, history, mounted, rows, script, start_runjob, state, wait_for

pytestmark = pytest.mark.both_stores


def refused(result, code: int | None = None, says: str = ""):
    """One ``error:`` line on stderr, a non-zero exit (``code`` if given), no traceback."""
    assert result.code != 0 and (code is None or result.code == code), result
    assert result.err.startswith("error: ") and result.err.count("\n") == 1, result
    assert "Traceback" not in result.err and says in result.err, result
    return result


def write(tmp_path, sql: str, *params) -> None:
    """Another client writes into the test's store with its own driver (``?`` placeholders)."""
    address = ADDRESSES.get(tmp_path, tmp_path / "dataflow.db")
    if isinstance(address, str):
        import psycopg

        with psycopg.connect(address) as conn:
            conn.execute(sql.replace("?", "%s"), params)
        return
    with closing(sqlite3.connect(address)) as conn, conn:
        conn.execute(sql, params)


def write_many(tmp_path, sql: str, rows) -> None:
    """Another client writes many rows into the test's store with its own driver."""
    address = ADDRESSES.get(tmp_path, tmp_path / "dataflow.db")
    if isinstance(address, str):
        import psycopg

        with psycopg.connect(address) as conn, conn.cursor() as cursor:
            cursor.executemany(sql.replace("?", "%s"), rows)
        return
    with closing(sqlite3.connect(address)) as conn, conn:
        conn.executemany(sql, rows)


def _chunks(cli):
    cli.ok("createtables")
    cli.ok("register-dataset", "src")
    cli.ok("register-dataset", "dst")
    cli.ok("register-job", "A", "--in", "src", "--out", "dst")
    cli.ok("ready", "src", "1", "2", "3")


COUNTS = [
    ("runs", "--limit", "-1"),
    ("runs", "--limit", "0"),
    ("runs", "--limit", "99999999999999999999"),
    ("history", "--limit", "-5"),
    ("history", "A", "--limit", "1e9"),
    ("log", "A", "1", "--attempt", "-1"),
]


def test_a_negative_or_huge_count_is_a_usage_error(cli, tmp_path):
    _chunks(cli)
    before = state(tmp_path)
    for args in COUNTS:
        refused(cli.utility(*args), 2, "must be a whole number from 1 to 1000000")
    assert state(tmp_path) == before


RAW = "".join(map(chr, [*range(0x20), 0x7F, 0x85, 0x9B])).replace("\n", "")


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


UNKNOWN = [
    (("recover", "nosuch"), "unknown job 'nosuch'"),
    (("ready", "src", "77", "--by", "A"), "job 'A' does not produce 'src'"),
    (("ready", "dst", "77", "--by", "nosuch"), "job 'nosuch' does not produce 'dst'"),
    (("resubmit", "A", "--from", "9", "--to", "1"), "--from 9 comes after --to 1"),
    (("ready", "src", "--from", "9", "--to", "1"), "--from 9 comes after --to 1"),
]


def test_an_unknown_job_producer_or_an_empty_range_is_refused(cli, tmp_path):
    _chunks(cli)
    before = state(tmp_path)
    for args, says in UNKNOWN:
        refused(cli.utility(*args), 2, says)
    assert state(tmp_path) == before


def test_copy_store_refuses_its_own_file_by_any_name_and_says_a_folder_is_read_only(
    cli, tmp_path, store_kind
):
    _chunks(cli)
    before = state(tmp_path)
    if store_kind == "sqlite":
        (tmp_path / "link.db").symlink_to(tmp_path / "dataflow.db")
        os.link(tmp_path / "dataflow.db", tmp_path / "hard.db")
        for name in ("link.db", "hard.db", "./sub/../dataflow.db"):
            refused(cli.utility("copy-store", "--to", name, "--force"), 2, "names the store")
        (tmp_path / "hard.db").unlink()
    assert state(tmp_path) == before
    (tmp_path / "ro").mkdir()
    with mounted("-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(tmp_path / "ro")) as folder:
        said = refused(cli.utility("copy-store", "--to", str(folder / "t.db")))
        assert "cannot be written" in said.err and "createtables" not in said.err, said
        assert list(folder.iterdir()) == []
    assert state(tmp_path) == before


BAD_SETTINGS = [
    ("DATAFLOW_LIVENESS_TIMEOUT", "abc"),
    ("DATAFLOW_LIVENESS_TIMEOUT", "-1"),
    ("DATAFLOW_LIVENESS_TIMEOUT", "0.3"),
    ("DATAFLOW_LIVENESS_TIMEOUT", "nan"),
    ("DATAFLOW_BUSY_TIMEOUT", "abc"),
    ("DATAFLOW_BUSY_TIMEOUT", "-5"),
    ("DATAFLOW_HOST", "host\nB"),
    ("DATAFLOW_HOST", "h\x1b[2Jx"),
]


def test_an_unusable_setting_in_the_environment_is_refused(cli, tmp_path):
    _chunks(cli)
    script(tmp_path, "A.sh", "echo ran > ran")
    before = state(tmp_path)
    for name, value in BAD_SETTINGS:
        for argv in (("utility.sh", "ready", "src", "4"), ("RunJob", "./A.sh")):
            said = refused(cli(*argv, env={name: value}), 2, f"{name} must be")
            assert repr(value)[1:-1] in said.err
    assert state(tmp_path) == before and not (tmp_path / "ran").exists()


@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)
def test_a_store_address_of_an_unknown_scheme_is_refused_and_sqlite_urls_are_files(cli, tmp_path):
    script(tmp_path, "A.sh", "exit 0")
    for address in ("mysql://u:secret@h/db", "sqlite://", "sqlite://host/x.db", "http://x"):
        for argv in (
            ("utility.sh", "--db", address, "createtables"),
            ("RunJob", "--db", address, "./A.sh"),
        ):
            said = refused(cli(*argv), 2, "unknown store address scheme")
            assert "secret" not in said.err
    # no folder "mysql:" made for a relative file
    assert [p.name for p in tmp_path.iterdir()] == ["A.sh"]
    cli.ok("--db", "sqlite:///rel.db", "createtables")
    assert (tmp_path / "rel.db").is_file()
    absolute = tmp_path / "abs.db"
    cli.ok("--db", f"sqlite:///{absolute}", "createtables")  # sqlite:////tmp/... absolute
    assert absolute.is_file()
    where = cli.ok("--db", "sqlite:///rel.db", "where").lines
    assert where[2].split() == ["store", str(tmp_path / "rel.db")]


def test_an_executable_that_is_neither_program_nor_script_is_refused_before_the_claim(
    cli, tmp_path
):
    _chunks(cli)
    job = tmp_path / "A.sh"
    before = state(tmp_path)
    for content in (bytes(range(256)) * 4, b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", b"echo hi\0bin"):
        job.write_bytes(content)
        job.chmod(0o755)
        refused(cli.runjob("./A.sh"), 2, "neither a program (ELF), a script with a '#!' line")
    assert state(tmp_path) == before
    # a text script without "#!" still runs with the shell, as the seed's loadbob.sh
    job.write_text('echo "ran $dataid" > ran\n')
    assert cli.runjob("./A.sh").code == 0 and (tmp_path / "ran").read_text() == "ran 1\n"


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
def test_a_dry_run_and_a_claim_given_back_take_no_run_number(cli, tmp_path):
    _chunks(cli)
    script(tmp_path, "A.sh", "exit 0")
    assert cli.runjob("./A.sh").code == 0

    def sequence():
        return rows(tmp_path, "select last_value, is_called from run_runid_seq")

    before, taken = state(tmp_path), sequence()
    assert cli.runjob("--dry-run", "./A.sh").out.startswith("would claim dataid 2")
    (tmp_path / "interp").mkdir()  # an interpreter that fails only at exec, after the claim
    (tmp_path / "A.sh").write_text(f"#!{tmp_path}/interp\n")
    refused(cli.runjob("./A.sh"), says="cannot run")
    assert state(tmp_path) == before and sequence() == taken
    script(tmp_path, "A.sh", "exit 0")
    assert cli.runjob("./A.sh").code == 0
    assert rows(tmp_path, "select runid, dataid from run order by runid") == [(1, "1"), (2, "2")]


@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)
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


def test_a_consumer_asked_to_rerun_while_it_ran_says_its_chunk_is_resubmit(cli, tmp_path):
    _chunks(cli)
    cli.ok("register-dataset", "out")
    cli.ok("register-job", "B", "--in", "dst", "--out", "out")
    script(tmp_path, "A.sh", "exit 0")
    assert cli.runjob("./A.sh").code == 0
    script(tmp_path, "B.sh", "touch started; while [ ! -e release ]; do sleep 0.05; done")
    consumer = start_runjob(cli, "./B.sh")
    wait_for(lambda: (tmp_path / "started").exists(), what="the consumer to start")
    assert "RESUBMIT when it ends" in cli.ok("resubmit", "A", "1", "--cascade").out
    (tmp_path / "release").touch()
    out, _ = consumer.communicate(timeout=60)
    assert consumer.returncode == 0
    assert "1 rows updated to RESUBMIT for B and 1" in out and "to READY" not in out, out
    ((dataid, _, status, exitcode, _, reason),) = history(tmp_path, "B")
    assert (dataid, status, exitcode) == ("1", "READY", 0)  # the run itself succeeded
    assert reason.startswith("its chunk set to RESUBMIT: resubmit --cascade of A 1")


IMPORTS = [
    ('"just text"', "the document must be an object, not text"),
    ("[1, 2]", "the document must be an object, not a list"),
    ('{"opendataflow": 1, "jobs": {}}', "the document has no 'datasets'"),
    ('{"opendataflow": 1, "datasets": {}, "jobs": {}}', "'datasets' must be a list, not an object"),
    ('{"opendataflow": 1, "datasets": [], "jobs": []}', "'jobs' must be an object, not a list"),
    ('{"opendataflow": 1, "datasets": ["x"], "jobs": {}}', "dataset 1 must be an object, not text"),
    ('{"opendataflow": 1, "datasets": [], "jobs": {"X": "a"}}', "job 'X' must be a list of items"),
    ('{"opendataflow": 1, "datasets": [], "jobs": {"X": {"a": 1}}}', "job 'X' must be a list"),
    (
        '{"opendataflow": 1, "datasets": [], "jobs": {"X": ["IN"]}}',
        "job 'X': item 1 must be an object",
    ),
    (
        '{"opendataflow": 1, "datasets": [], "jobs": {"X": [{}]}}',
        "job 'X': item 1: itemtype must be text, not null",
    ),
    (
        '{"opendataflow": 1, "datasets": [], "jobs": {"X": [null]}}',
        "item 1 must be an object, not null",
    ),
    ("{nope", "not JSON (Expecting property name"),
]


def test_an_import_of_the_wrong_shape_says_what_is_wrong_where(cli, tmp_path):
    _chunks(cli)
    before = state(tmp_path)
    for document, says in IMPORTS:
        (tmp_path / "bad.json").write_text(document)
        said = refused(cli.utility("import", "bad.json"), 2, says)
        assert "attribute" not in said.err and "object is not" not in said.err, said
    assert state(tmp_path) == before


@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)  # PostgreSQL holds no NUL
def test_a_dataid_that_cannot_name_a_chunk_is_warned_of_once_per_drain(cli, tmp_path):
    from dataflow.dataids import natural_key

    _chunks(cli)
    with closing(sqlite3.connect(tmp_path / "dataflow.db")) as conn, conn:
        conn.create_function("now", 0, lambda: "2026-01-01 00:00:00")
        conn.create_function("dataflow_natkey", 1, natural_key)
        conn.execute("insert into datastatus values ('src','up',?,'OUT','READY',now())", ("0\0x",))
    script(tmp_path, "A.sh", "exit 0")
    ran = cli.runjob("--all", "./A.sh")
    assert ran.code == 0 and "3 READY" in ran.out, ran
    assert ran.err.count("cannot name a chunk") == 1 and ran.err.count("\n") == 1, ran


def _small_files(limit: int):
    """A child whose files cannot grow past ``limit`` bytes (writes fail with EFBIG, as
    on a full disk; Python ignores SIGXFSZ)."""
    import resource

    def limited():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return limited


def test_copy_store_that_fails_part_way_leaves_no_file_behind(cli, tmp_path):
    _chunks(cli)
    write_many(
        tmp_path,
        "insert into run (jobid, dataid, attempt, status, started, command) "
        "values ('A', ?, 1, 'READY', '2026-01-01 00:00:00', ?)",
        [(str(n), "x" * 2000) for n in range(1500)],  # some 3 MB
    )
    before = state(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    target = str(out / "copy.db")
    failed = cli.utility("copy-store", "--to", target, preexec_fn=_small_files(1 << 20))
    refused(failed)
    assert list(out.iterdir()) == []  # no empty target, no -wal
    # over an existing store: it is left as it was
    cli.ok("--db", target, "createtables")
    cli.ok("--db", target, "register-dataset", "kept")

    def dump():
        with closing(sqlite3.connect(target)) as conn:
            return list(conn.iterdump())

    kept, names = dump(), sorted(p.name for p in out.iterdir())
    failed = cli.utility("copy-store", "--to", target, "--force", preexec_fn=_small_files(1 << 20))
    refused(failed)
    assert sorted(p.name for p in out.iterdir()) == names and dump() == kept
    assert state(tmp_path) == before
    assert "1500 run" in cli.ok("copy-store", "--to", target, "--force").out
    assert [p.name for p in out.iterdir() if not p.name.startswith("copy.db")] == []
    (tmp_path / "alias.db").symlink_to(target)  # a copy to a symlink fills its file
    assert "1500 run" in cli.ok("copy-store", "--to", "alias.db", "--force").out
    assert (tmp_path / "alias.db").is_symlink()


def _command_lines_holding(secret: bytes) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            line = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if secret in line:
            found.append(f"{proc.name}: {line!r}")
    return found


def test_a_passkey_given_as_an_argument_is_in_no_process_command_line(cli, tmp_path):
    """The seed's ``RunJob PASSKEY ./job.sh``: RunJob's own command line (and so its
    keeper's, forked from it) and the job's hold no passkey while the job runs."""
    _chunks(cli)
    secret = f"pk-{os.getpid()}-{id(cli)}-x"
    script(tmp_path, "A.sh", "touch started; while [ ! -e release ]; do sleep 0.05; done")
    runjob = start_runjob(cli, secret, "./A.sh")
    try:
        wait_for(lambda: (tmp_path / "started").exists(), what="the job to start")
        assert _command_lines_holding(secret.encode()) == []
    finally:
        (tmp_path / "release").touch()
        out, err = runjob.communicate(timeout=60)
    assert runjob.returncode == 0 and "1 rows updated to READY" in out and err == "", (out, err)


@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)  # no store involved
def test_crypt_with_two_words_and_a_passkey_set_is_ambiguous_and_refused(cli, tmp_path):
    for env in ({"PASSKEY": "right"}, {"PASSKEY_FILE": str(tmp_path / "key")}):
        (tmp_path / "key").write_text("right\n")
        refused(cli.utility("crypt", "-e", "hello", "world", env=env), 2, "takes one TEXT")
    token = cli.ok("crypt", "-e", "hello world", env={"PASSKEY": "right"}).out.strip()
    assert cli.ok("crypt", "-d", token, env={"PASSKEY": "right"}).out == "hello world\n"
    seed = cli.ok("crypt", "-e", "hello", "world").out.strip()  # the seed's form, no PASSKEY
    assert cli.ok("crypt", "-d", seed, env={"PASSKEY": "hello"}).out == "world\n"
