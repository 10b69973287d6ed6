"""Bad arguments, settings and host variables through ``utility`` and ``RunJob`` on both
stores: every kind is one ``error: ...`` line on stderr, a non-zero exit, no traceback,
and the store as it was. Signals and crashes are not the point here, so ``utility`` runs
in this process (``dataflow.cli.utility.main``), as a shell would call it, hundreds in
seconds; a traceback escapes ``main`` and fails the test. RunJob, whose checks before a
claim are the point, and ``utility serve``, which would listen, run as real processes."""

from __future__ import annotations

import itertools
import os

import pytest

from dataflow.cli import utility
from support import (
    _chunks,
    refused,
    script,
    state,
)
from support.badinput import LONG_NAME, _one_line, _setup

COUNTS = [
    ("runs", "--limit", "-1"),
    ("runs", "--limit", "0"),
    ("runs", "--limit", "99999999999999999999"),
    ("history", "--limit", "-5"),
    ("history", "A", "--limit", "1e9"),
    ("log", "A", "1", "--attempt", "-1"),
]


UNKNOWN = [
    (("recover", "nosuch"), "unknown job 'nosuch'"),
    (("ready", "src", "77", "--by", "A"), "job 'A' does not produce 'src'"),
    (("ready", "dst", "77", "--by", "nosuch"), "job 'nosuch' does not produce 'dst'"),
    (("resubmit", "A", "--from", "9", "--to", "1"), "--from 9 comes after --to 1"),
    (("ready", "src", "--from", "9", "--to", "1"), "--from 9 comes after --to 1"),
]


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


@pytest.mark.both_stores
def test_a_negative_or_huge_count_is_a_usage_error(cli, tmp_path):
    _chunks(cli)
    before = state(tmp_path)
    for args in COUNTS:
        refused(cli.utility(*args), 2, "must be a whole number from 1 to 1000000")
    assert state(tmp_path) == before


@pytest.mark.both_stores
def test_an_unknown_job_producer_or_an_empty_range_is_refused(cli, tmp_path):
    _chunks(cli)
    before = state(tmp_path)
    for args, says in UNKNOWN:
        refused(cli.utility(*args), 2, says)
    assert state(tmp_path) == before


@pytest.mark.both_stores
@pytest.mark.long
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
@pytest.mark.both_stores
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


@pytest.mark.both_stores
def test_an_import_of_the_wrong_shape_says_what_is_wrong_where(cli, tmp_path):
    _chunks(cli)
    before = state(tmp_path)
    for document, says in IMPORTS:
        (tmp_path / "bad.json").write_text(document)
        said = refused(cli.utility("import", "bad.json"), 2, says)
        assert "attribute" not in said.err and "object is not" not in said.err, said
    assert state(tmp_path) == before


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


@pytest.mark.both_stores
@pytest.mark.long
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


@pytest.mark.both_stores
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


@pytest.mark.both_stores
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


@pytest.mark.both_stores
@pytest.mark.long
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
@pytest.mark.both_stores
def test_bad_serve_options_are_one_line_before_anything_listens(cli, tmp_path):
    _setup(cli, tmp_path)
    (tmp_path / "token").write_text("t0ken-of-at-least-16-characters\n")
    wrong = []
    for option in SERVE:
        done = cli.utility("serve", "--token-file", "token", *option, timeout=30)
        if not _one_line(done.code, done.out, done.err):
            wrong.append((option, done.code, done.out[:200], done.err[:300]))
    assert wrong == []
