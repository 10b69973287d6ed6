"""A sweep of bad input through ``utility`` on both stores: every kind is one
``error: ...`` line on stderr, a non-zero exit, no traceback, and the store as it was.

Signals and crashes are not the point here, so the commands run in this process
(``dataflow.cli.utility.main``), as a shell would call them, hundreds in seconds; a
traceback escapes ``main`` and fails the test. The subprocess paths are covered by
tests/test_trust_low.py and tests/test_bad_input.py."""

from __future__ import annotations

import itertools

import pytest

from dataflow.cli import runjob, utility
from support import state

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
]


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
    ("--parallel", "0", "./A.sh"),
    ("--parallel", "abc", "./A.sh"),
    ("--db", "mysql://h/db", "./A.sh"),
    ("--db", "nosuch/x.db", "./A.sh"),
    ("--validate", "./nosuch-check", "./A.sh"),
    ("--nosuch", "./A.sh"),
    (),
]


def _jobs(folder) -> None:
    (folder / "folder").mkdir()
    (folder / "plain.sh").write_text("#!/bin/sh\n")
    for name, body in (
        ("garbage.sh", bytes(range(256))),
        ("B.sh", b"#!/bin/sh\n"),
        ("A.sh", b"#!/bin/sh\ntouch ran\n"),
        ("missing-interp.sh", b"#!/nosuch/interp\n"),
    ):
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


def test_hundreds_of_bad_inputs_are_each_one_line_and_change_nothing(
    cli, tmp_path, address, capsys, monkeypatch
):
    assert len(CASES) >= 300
    cli.ok("createtables")
    cli.ok("register-dataset", "src")
    cli.ok("register-dataset", "dst")
    cli.ok("register-job", "A", "--in", "src", "--out", "dst")
    cli.ok("ready", "src", "1", "2")
    for name in [n for n in list(__import__("os").environ) if n.startswith("DATAFLOW_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("DATAFLOW_DB", str(address))
    monkeypatch.setenv("DATAFLOW_STATE", str(tmp_path / "state"))
    monkeypatch.setenv("PASSKEY", "k")
    monkeypatch.chdir(tmp_path)
    before = state(tmp_path)
    cases = [tuple(w.replace("{store}", str(address)) for w in argv) for argv in CASES]
    wrong = []
    for argv in cases:
        code, out, err = _run(capsys, argv)
        one_line = err.startswith("error: ") and err.count("\n") == 1
        if code == 0 or not one_line or "Traceback" in err or out:
            wrong.append((argv, code, out[:200], err[:300]))
    _jobs(tmp_path)
    for argv in RUNJOB:
        code, out, err = _run(capsys, argv, runjob.main)
        if code == 0 or err.count("\n") != 1 or not err.startswith("error: ") or out:
            wrong.append((("RunJob", *argv), code, out[:200], err[:300]))
    assert not (tmp_path / "ran").exists()
    assert wrong == [], f"{len(wrong)} of {len(cases) + len(RUNJOB)}: {wrong[:20]}"
    if state(tmp_path) != before:  # which one? (the store is compared once, for speed)
        changed = []
        for argv in cases:
            _run(capsys, argv)
            if state(tmp_path) != before:
                changed.append(argv)
                before = state(tmp_path)
        pytest.fail(f"the store was changed by {changed}")
