"""Where a file dataset's items land is read from its row alone (issue 46): neither
``utility drop`` nor ``utility serve``'s intake reads, let alone decrypts, a password,
and the server's side of a landing imports nothing of the Spark package."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dataflow.serve import intake

pytestmark = pytest.mark.both_stores

GARBAGE = "df1$garbage!!"  # no passkey opens it: a lookup that decrypted would fail


@pytest.fixture
def landing(cli):
    """Dataset ``landing`` (csv, folder data/in/landing) whose row holds a password no
    passkey opens; no passkey in the environment."""
    cli.ok("createtables")
    cli.ok(
        "register-dataset", "landing", "--database", "csv", "--schemaname",
        str(cli.cwd / "data"), "--tablename", "in/landing",
    )  # fmt: skip
    cli.ok("dml", f"update dataset set encryptedpass = '{GARBAGE}' where datasetid = 'landing'")
    for name in ("PASSKEY", "PASSKEY_FILE"):
        cli.env.pop(name, None)
    return cli.cwd / "data" / "in" / "landing"


def test_a_server_lookup_of_a_landing_reads_no_password(cli, landing, monkeypatch):
    monkeypatch.delenv("PASSKEY", raising=False)
    monkeypatch.delenv("PASSKEY_FILE", raising=False)
    (cli.cwd / "data" / "in" / "landing").mkdir(parents=True)
    found = intake.target(str(cli.address), "landing", roots=[cli.cwd.resolve()])
    assert (found.datasetid, found.folder, found.format) == ("landing", landing.resolve(), "csv")


def test_a_drop_reads_no_password(cli, landing):
    item = cli.cwd / "item.csv"
    item.write_text("a\n1\n")
    done = cli.ok("drop", "landing", str(item))
    assert done.out == f"1 item dropped into landing ({landing.resolve()})\n"
    assert (landing / "item.csv").read_text() == "a\n1\n"


@pytest.mark.parametrize("store_kind", ["sqlite"])
def test_the_server_side_of_a_landing_imports_nothing_of_spark(store_kind):
    code = (
        "import sys\n"
        "import dataflow.serve.intake\n"
        "print('dataflow.landing' in sys.modules)\n"
        "print(sorted(m for m in sys.modules if m.startswith(('dataflow.spark', 'pyspark'))))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "True\n[]\n", "")
