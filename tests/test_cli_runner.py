"""The in-process ``utility`` of the tests (support.InProcessCli) says what the real entry
point says, and leaves nothing of one call behind for the next; and the real entry point,
``bin/utility.sh`` in a process, still works end to end."""

from __future__ import annotations

import os
import re
import sys

import pytest

from support import Cli, InProcessCli

pytestmark = pytest.mark.both_stores

CALLS = [
    ("createtables",),
    ("createtables",),
    ("dml", "insert into dataset (datasetid) values ('src'), ('dst')"),
    ("dml", "insert into job (jobid,itemtype,datasetid) values ('work','IN','src')"),
    ("dml", "insert into job (jobid,itemtype,datasetid) values ('work','OUT','dst')"),
    ("ready", "src", "1", "2", "10"),
    ("jobs",),
    ("datasets",),
    ("status", "work"),
    ("sql", "select dataid, status from datastatus order by 1"),
    ("sql", "delete from datastatus"),  # refused: read-only
    ("getjob", "nojob"),  # refused: unknown job
    ("frobnicate",),  # a usage error (argparse, exit 2)
    ("crypt", "-e", "x"),  # refused: no passkey
    ("--version",),  # argparse's SystemExit(0)
    ("jobs", "--json"),
]


@pytest.mark.empty_store
@pytest.mark.long
def test_in_process_and_the_real_entry_point_say_the_same(tmp_path, address):
    """The same calls on two stores, one through bin/utility.sh in a process, one in
    this process: the same exit codes, output and errors, but for the store's name and the times."""
    real_folder, here_folder = tmp_path / "real", tmp_path / "here"
    real_folder.mkdir()
    here_folder.mkdir()
    if isinstance(address, str):  # one PostgreSQL database: the real one goes first
        real, here = Cli(real_folder, address), InProcessCli(real_folder, address)
    else:
        real = Cli(real_folder, real_folder / "dataflow.db")
        here = InProcessCli(here_folder, here_folder / "dataflow.db")
    said = {}
    for cli in (real, here):
        if isinstance(address, str) and cli is here:
            cli.utility("dml", "delete from datastatus")
            cli.utility("dml", "delete from job")
            cli.utility("dml", "delete from dataset")
        found = []
        for call in CALLS:
            result = cli.utility(*call)
            text = (result.out + result.err).replace(str(cli.address), "STORE")
            text = re.sub(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?", "TIME", text)
            found.append((call, result.code, text))
        said[type(cli).__name__] = found
    for (call, code, text), (_, here_code, here_text) in zip(
        said["Cli"], said["InProcessCli"], strict=True
    ):
        if call == ("createtables",) and isinstance(address, str):
            continue  # the second store on PostgreSQL is the first: it is up to date
        assert (call, here_code, here_text) == (call, code, text)
    assert [code for _, code, _ in said["Cli"]] == [0] * 10 + [2, 2, 2, 2, 0, 0]


def test_nothing_of_one_call_is_left_for_the_next(tmp_path, address):
    here = InProcessCli(tmp_path, address)
    before = dict(os.environ), os.getcwd(), (sys.stdin, sys.stdout, sys.stderr)
    here.ok("createtables")
    # the seed's form sets PASSKEY for the command; a bad SQL fails; a --help exits
    assert here.utility("plugh", "crypt", "-e", "x").code == 0
    assert here.utility("sql", "selec").code != 0
    assert here.utility("jobs", "--help").code == 0
    assert here.utility("jobs", env={"PASSKEY": "elsewhere", "TZ": "Etc/GMT-14"}).code == 0
    assert (dict(os.environ), os.getcwd(), (sys.stdin, sys.stdout, sys.stderr)) == before
    missing = here.utility("crypt", "-e", "x")  # no PASSKEY left from the calls above
    assert missing.code == 2 and missing.err.startswith("error: crypt needs the passkey")
    assert here.utility("jobs", input="ignored").code == 0


@pytest.mark.long
def test_the_real_entry_point_runs_a_chain_end_to_end(tmp_path, address):
    """bin/utility.sh (the installed entry point, a process of its own) with RunJob."""
    real = Cli(tmp_path, address)
    real.ok("createtables")
    real.ok("dml", "insert into dataset (datasetid) values ('src'), ('dst')")
    real.ok(
        "dml",
        "insert into job (jobid,itemtype,datasetid) values ('work','IN','src'), "
        "('work','OUT','dst')",
    )
    real.ok("ready", "src", "1")
    (tmp_path / "work.sh").write_text("#!/usr/bin/env bash\necho ran $dataid\n")
    (tmp_path / "work.sh").chmod(0o755)
    ran = real.runjob("./work.sh")
    assert ran.code == 0 and "ran 1" in ran.out, ran
    status = real.ok("status", "work")
    assert "READY" in status.out, status
    assert real.utility("nosuchcommand").code == 2
