"""A sweep of bad input through ``utility`` and ``RunJob`` on both stores: every kind is
one ``error: ...`` line on stderr, a non-zero exit, no traceback, and the store as it was.

Signals and crashes are not the point here, so ``utility`` runs in this process
(``dataflow.cli.utility.main``), as a shell would call it, hundreds in seconds; a
traceback escapes ``main`` and fails the test. RunJob, whose checks before a claim are
the point, and ``utility serve``, which would listen, run as real processes. Also: what
a writer of the store does by SQL (an expression that comes out NULL, a name longer than
our commands write, a live run's rows deleted) is refused, handled or told."""

from __future__ import annotations

import itertools
import json
import os
import zlib

import pytest

from dataflow.cli import utility
from dataflow.dataids import MAX_NAME
from support import history, rows, script, start_runjob, state, wait_for

pytestmark = pytest.mark.both_stores

# values no registered name, chunk, status or number is: each makes its place wrong
BAD = [
    "nosuch",
    " ",
    "\n",
    "x\ny",
    "\x1b[2J\x1b]0;title\x07",
    "tab\there",
    "\x7f\x85\u2028",
    "-1",
    "0",
    "99999999999999999999",
    "1e309",
    "nan",
    "'; drop table job; --",
    "%s %d ?1 $1",
    "../../../etc/passwd",
    "x" * 5000,
    "\u2603 snow",
    "-",
]

TEMPLATES = [
    ("endjob", "A", "{}", "READY"),
    ("endjob", "{}", "1", "READY"),
    ("endjob", "A", "1", "{}"),
    ("deleterun", "{}", "1"),
    ("deleterun", "A", "{}"),
    ("release", "{}", "1"),
    ("recover", "{}"),
    ("history", "{}"),
    ("log", "A", "{}"),
    ("log", "{}", "1"),
    ("getjob", "{}"),
    ("explain", "{}"),
    ("lineage", "src", "{}"),
    ("lineage", "{}", "1"),
    ("ready", "{}", "1"),
    ("unregister-job", "{}"),
    ("unregister-dataset", "{}"),
    ("register-job", "A", "--in", "{}", "--out", "dst"),
    ("import", "{}"),
    ("--db", "{}/x.db", "runs"),
]

NUMBERS = [  # values of whole-number options: none is one from 1 to 1000000
    ("runs", "--limit", "{}"),
    ("history", "--limit", "{}"),
    ("log", "A", "1", "--attempt", "{}"),
]

SPECIFIC = [
    ("sql", "delete from job"),
    ("sql", "select * from nosuch"),
    ("sql", "attach database 'x.db' as x"),
    ("sql", "pragma journal_mode = delete"),
    ("dml", "select * from nosuch"),
    ("dml", "insert into nosuch values (1)"),
    ("ready", "src"),
    ("ready", "src", "--from", "1"),
    ("ready", "src", "--from", "3", "--to", "1"),
    ("ready", "src", "--from", "a", "--to", "b"),
    ("ready", "src", "1", "--by", "A"),
    ("resubmit", "A", "--from", "9", "--to", "1"),
    ("resubmit", "A"),
    ("resubmit", "nosuch", "1"),
    ("set", "A", "retries"),
    ("set", "A", "retries=-1"),
    ("set", "nosuch", "retries=1"),
    ("crypt", "-d", "not-a-token"),
    ("crypt", "-e", "two", "words"),
    ("copy-store", "--to", "{store}"),
    ("copy-store", "--to", "mysql://u@h/db"),
    ("--db", "mysql://u:secret@h/db", "runs"),
    ("--db", "sqlite://", "runs"),
    ("nosuch-command",),
    ("runs", "--nosuch"),
    ("purge", "--days-old", "abc"),
    ("endjob", "A", "1", "RUNNING"),
    ("check", "--at", ""),
    ("resubmit", "A", "--match", "["),
    ("resubmit", "A", "--match", "2025-[0-9"),
    # on SQLite 1/0 is NULL: a gating row is never nulled (PostgreSQL refuses 1/0)
    ("dml", "update datastatus set status = 1/0"),
    ("dml", "update job set datasetid = 1/0"),
    ("dml", "insert into datastatus values ('src', 'x', '9', 1/0, 'READY', now())"),
    # names over dataids.MAX_NAME, wherever our commands write one
    ("register-dataset", "{long_name}"),
    ("register-job", "{long_name}", "--in", "src", "--out", "dst2"),
    ("register-job", "B", "--in", "{long_name}", "--out", "dst2"),
    ("ready", "src", "{long_id}"),
    ("ready", "src", "1", "{long_id}"),
    ("endjob", "A", "{long_id}", "READY"),
    ("forcejob", "A", "{long_id}"),
    ("hold", "A", "{long_id}"),
    ("resubmit", "A", "{long_id}"),
    ("import", "long.json"),
]

LONG_ID = "d" * 10240  # a 10 KB dataid
LONG_NAME = "n" * 10_000  # a dataset's or a job's name


def _cases() -> list[tuple[str, ...]]:
    found = [
        tuple(word.replace("{}", bad) for word in template)
        for template, bad in itertools.product(TEMPLATES + NUMBERS, BAD)
    ]
    found += [("runs", "--limit", n) for n in ("1000001", "0x10", "1.5", "")]
    return list(dict.fromkeys(found + SPECIFIC))  # each kind once


CASES = _cases()

RUNJOB = [  # RunJob's own mistakes, refused before any claim
    ("./nosuch.sh",),
    ("./folder",),
    ("./plain.sh",),  # not executable
    ("./garbage.sh",),  # neither a program nor a script
    ("./B.sh",),  # no such job
    ("./missing-interp.sh",),
    ("./crlf/A.sh",),
    ("./envmissing/A.sh",),
    ("--all", "./crlf/A.sh"),
    ("--parallel", "2", "./envmissing/A.sh"),
    ("--parallel", "0", "./A.sh"),
    ("--parallel", "abc", "./A.sh"),
    ("--db", "mysql://h/db", "./A.sh"),
    ("--db", "nosuch/x.db", "./A.sh"),
    ("--validate", "./nosuch-check", "./A.sh"),
    ("--nosuch", "./A.sh"),
    (),
]


SETTINGS = [  # job settings, each refused where it is written (utility set)
    ("set", "A", "retries=99999999999999999999"),
    ("set", "A", "alerts=json://"),
    ("set", "A", "alerts=notaurl"),
    ("set", "A", "spark_remote=notaurl"),
    ("set", "A", "spark_args='unbalanced"),
    ("set", "A", "ready_by=25:00"),
    ("set", "A", "retry_delay=abc"),
    ("set", "A", "retry_delay=5x-1"),
    ("set", "A", "batch=0"),
    ("set", "A", "batch=99999999999999999999"),
    ("set", "A", "max_parallel=0"),
    ("set", "A", "timeout=nan"),
    # well formed, but beyond what the host's policy allows (its defaults here): a row
    # that would run code, open a file or reach an address on a host
    ("set", "A", "GIT_CONFIG_COUNT=1"),
    ("set", "A", "LD_PRELOAD=/tmp/evil.so"),
    ("set", "A", "spark_args=--jars /tmp/evil.jar"),
    ("set", "A", "spark_args=--conf spark.plugins=org.evil.Plugin"),
    ("set", "A", "spark_remote=sc://127.0.0.1:15002"),
    ("set", "A", "alerts=json://127.0.0.1:8080/admin?+X-Injected=yes"),
    ("set", "A", "alerts=fcm://p/device?keyfile=/etc/shadow"),
    ("set", "*", "alerts=json://127.0.0.1:8080/admin"),
]

ENVIRONMENT = [  # DATAFLOW_* of the host, each refused wherever it is read
    ("DATAFLOW_LOG_MAX_MB", "abc"),
    ("DATAFLOW_LOG_MAX_MB", "-1"),
    ("DATAFLOW_LOG_MAX_MB", "inf"),
    ("DATAFLOW_LOG_KEEP_KB", "abc"),
    ("DATAFLOW_LOG_KEEP_KB", "-1"),
    ("DATAFLOW_LOG_EVERY", "0"),
    ("DATAFLOW_LOG_EVERY", "nan"),
    ("DATAFLOW_ALERT_TIMEOUT", "abc"),
    ("DATAFLOW_ALERT_TIMEOUT", "0"),
    ("DATAFLOW_STATE", ""),
    ("DATAFLOW_STATE", "relative/state"),
    ("DATAFLOW_LIVENESS_TIMEOUT", "abc"),
    ("DATAFLOW_BUSY_TIMEOUT", "-1"),
    ("DATAFLOW_HOST", "two\nlines"),
    ("DATAFLOW_POLICY", ""),
    ("DATAFLOW_POLICY", "relative/policy.toml"),
    ("DATAFLOW_POLICY", "/nosuch/policy.toml"),
]

READ_BY_RUNJOB = [  # variables read only where a job needs them: (name, value, script)
    ("DATAFLOW_SPARK_ARGS", "'unbalanced", "./spark/A.py"),
    ("DATAFLOW_SPARK_ARGS", "--driver-memory 1g --conf", "./spark/A.py"),
    ("PASSKEY_FILE", "/nosuch/passkey", "./A.sh"),
]

SERVE = [  # utility serve's options (a valid token file given)
    ("--port", "-1"),
    ("--port", "70000"),
    ("--max-body", "abc"),
    ("--rate", "-1"),
    ("--refresh", "0"),
    ("--max-connections", "0"),
    ("--max-connections", "abc"),
    ("--header-timeout", "0"),
    ("--header-timeout", "abc"),
    ("--body-timeout", "-1"),
    ("--body-timeout", "nan"),
    ("--landing-root", "relative/root"),
    ("--landing-root", "/nosuch/root"),
]


def _jobs(folder) -> None:
    (folder / "folder").mkdir()
    (folder / "plain.sh").write_text("#!/bin/sh\n")
    for name, body in (
        ("garbage.sh", bytes(range(256))),
        ("B.sh", b"#!/bin/sh\n"),
        ("A.sh", b"#!/bin/sh\ntouch ran\n"),
        ("missing-interp.sh", b"#!/nosuch/interp\n"),
        ("crlf/A.sh", b"#!/bin/sh\r\ntouch ran\r\n"),  # Windows line ends
        ("envmissing/A.sh", b"#!/usr/bin/env nosuch-interp-42\ntouch ran\n"),
        ("spark/A.py", b"def run(spark, job):\n    open('ran', 'w')\n"),
    ):
        (folder / name).parent.mkdir(exist_ok=True)
        (folder / name).write_bytes(body)
        (folder / name).chmod(0o755)


def _run(capsys, argv: tuple[str, ...], main=utility.main) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's --help / version: never for bad input
        code = exc.code if isinstance(exc.code, int) else 1
    except Exception as exc:  # what a person would see as a traceback
        capsys.readouterr()
        return 1, "", f"Traceback: {exc!r}"[:300]
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _one_line(code: int, out: str, err: str) -> bool:
    """A refusal: non-zero, nothing on stdout, one ``error: ...`` line, no traceback."""
    return code != 0 and not out and err.startswith("error: ") and err.count("\n") == 1


def _setup(cli, tmp_path) -> None:
    cli.ok("createtables")
    cli.ok("register-dataset", "src")
    cli.ok("register-dataset", "dst")
    cli.ok("register-dataset", "dst2")
    cli.ok("register-job", "A", "--in", "src", "--out", "dst")
    cli.ok("ready", "src", "1", "2")
    dataset = {"datasetid": LONG_NAME}
    (tmp_path / "long.json").write_text(
        json.dumps({"opendataflow": 1, "datasets": [dataset], "jobs": {}})
    )
    _jobs(tmp_path)


def _in_process(tmp_path, address, monkeypatch) -> None:
    """This process's environment as a shell's of the test's host."""
    for name in [n for n in os.environ if n.startswith("DATAFLOW_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("DATAFLOW_DB", str(address))
    monkeypatch.setenv("DATAFLOW_STATE", str(tmp_path / "state"))
    monkeypatch.setenv("PASSKEY", "k")
    monkeypatch.chdir(tmp_path)


def _which_changed(tmp_path, capsys, before, cases) -> list:
    changed = []
    for argv in cases:
        _run(capsys, argv)
        if state(tmp_path) != before:
            changed.append(argv)
            before = state(tmp_path)
    return changed


def test_hundreds_of_bad_inputs_are_each_one_line_and_change_nothing(
    cli, tmp_path, address, capsys, monkeypatch
):
    assert len(CASES) >= 300
    _setup(cli, tmp_path)
    _in_process(tmp_path, address, monkeypatch)
    before = state(tmp_path)
    cases = [
        tuple(
            w.replace("{store}", str(address))
            .replace("{long_id}", LONG_ID)
            .replace("{long_name}", LONG_NAME)
            for w in argv
        )
        for argv in CASES
    ]
    wrong = []
    for argv in cases:
        code, out, err = _run(capsys, argv)
        if not _one_line(code, out, err) or "Traceback" in err:
            wrong.append((tuple(w[:40] for w in argv), code, out[:200], err[:300]))
    assert wrong == [], f"{len(wrong)} of {len(cases)}: {wrong[:20]}"
    if state(tmp_path) != before:  # which one? (the store is compared once, for speed)
        pytest.fail(f"the store was changed by {_which_changed(tmp_path, capsys, before, cases)}")


def test_runjob_refuses_its_own_mistakes_before_any_claim(cli, tmp_path):
    """Real RunJob processes: a script that cannot run (Windows line ends, an interpreter
    that env would not find...) is refused in one line before anything is claimed."""
    _setup(cli, tmp_path)
    before = state(tmp_path)
    wrong = []
    for argv in RUNJOB:
        done = cli.runjob(*argv, timeout=60)
        if not _one_line(done.code, done.out, done.err) or state(tmp_path) != before:
            wrong.append((argv, done.code, done.out[:200], done.err[:300]))
    assert not (tmp_path / "ran").exists()
    assert wrong == []


def test_bad_job_settings_are_refused_where_they_are_written(
    cli, tmp_path, address, capsys, monkeypatch
):
    _setup(cli, tmp_path)
    _in_process(tmp_path, address, monkeypatch)
    before = state(tmp_path)
    wrong = [(argv, *_run(capsys, argv)) for argv in SETTINGS]
    wrong = [
        (argv, code, out, err) for argv, code, out, err in wrong if not _one_line(code, out, err)
    ]
    assert wrong == []
    assert state(tmp_path) == before, _which_changed(tmp_path, capsys, before, SETTINGS)


def test_bad_host_variables_are_refused_by_utility_and_runjob(
    cli, tmp_path, address, capsys, monkeypatch
):
    """Each DATAFLOW_* the toolkit reads, set to what it cannot take: one line naming it,
    from utility (in this process) and from RunJob (a real process), nothing claimed."""
    _setup(cli, tmp_path)
    before = state(tmp_path)
    wrong = []
    for name, value in ENVIRONMENT:
        done = cli.runjob("./A.sh", env={name: value}, timeout=60)
        if not _one_line(done.code, done.out, done.err) or name not in done.err:
            wrong.append(("RunJob", name, value, done.code, done.out[:200], done.err[:300]))
        with monkeypatch.context() as patch:
            _in_process(tmp_path, address, patch)
            patch.setenv(name, value)
            for argv in (("runs",), ("check",), ("recover",)):
                code, out, err = _run(capsys, argv)
                if not _one_line(code, out, err) or name not in err:
                    wrong.append((argv, name, value, code, out[:200], err[:300]))
    for name, value, job in READ_BY_RUNJOB:
        done = cli.runjob(job, env={name: value}, timeout=60)
        if not _one_line(done.code, done.out, done.err) or name not in done.err:
            wrong.append(("RunJob", job, name, value, done.code, done.out[:200], done.err[:300]))
    assert not (tmp_path / "ran").exists()
    assert wrong == []
    assert state(tmp_path) == before


@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)  # the store is not asked
def test_bad_serve_options_are_one_line_before_anything_listens(cli, tmp_path):
    _setup(cli, tmp_path)
    (tmp_path / "token").write_text("t0ken-of-at-least-16-characters\n")
    wrong = []
    for option in SERVE:
        done = cli.utility("serve", "--token-file", "token", *option, timeout=30)
        if not _one_line(done.code, done.out, done.err):
            wrong.append((option, done.code, done.out[:200], done.err[:300]))
    assert wrong == []


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
    assert cli.runjob("./A.sh").code == 0
    assert history(tmp_path, "A")[0][:3] == ("1", 1, "READY")


def test_hostile_log_and_audit_rows_are_shown_safely_or_refused_in_one_line(cli, tmp_path, address):
    """A writer's rows of runlog (sizes that are not sizes, a body that is not zlib, one
    that inflates past what it says) and of action (control characters, 100 KB of detail):
    utility log, actions and history show them escaped or refuse in one line."""
    _setup(cli, tmp_path)
    script(tmp_path, "A.sh", "echo hello")
    assert cli.runjob("./A.sh").code == 0
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
