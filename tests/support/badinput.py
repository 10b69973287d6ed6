"""Shared by the tests of bad input (test_bad_arguments) and of what a store's writer
may do (test_trust_writers): a store with a job, chunks, datasets beside it, and jobs
of every broken kind in a folder."""

from __future__ import annotations

import json

LONG_NAME = "n" * 10_000  # a dataset's or a job's name


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
