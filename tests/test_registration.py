"""Safe registration, export/import between stores, and rekeying passwords."""

from __future__ import annotations

import json
import subprocess

import pytest

from dataflow import crypto
from support import Cli, host_policy, rows, script

pytestmark = pytest.mark.both_stores


@pytest.fixture
def store(cli):
    cli.ok("createtables")
    return cli


def error(result, message):
    assert result.code == 2 and result.out == "" and result.err == f"error: {message}\n", result


def test_register_dataset_takes_the_password_from_stdin_only(store, tmp_path):
    keyfile = tmp_path / "key"
    keyfile.write_text("k\n")
    env = {"PASSKEY_FILE": str(keyfile)}
    added = store.utility(
        "register-dataset",
        "orders",
        "--hostname",
        "db1",
        "--username",
        "etl",
        "--password-stdin",
        input="s3cret\n",
        env=env,
    )
    assert added.out == "dataset orders registered\n"
    ((token, host),) = rows(tmp_path, "select encryptedpass, hostname from dataset")
    row = {"datasetid": "orders", "hostname": "db1", "username": "etl"}  # sealed to its address
    assert host == "db1" and token.startswith("df2$")
    assert crypto.decrypt(token, "k", seal=crypto.seal_of(row)) == "s3cret"
    error(  # its password is sealed to its address: moving it needs the passkey
        store.utility("register-dataset", "orders", "--tablename", "t"),
        "dataset 'orders': its password is sealed to its address; changing the address needs "
        "the passkey (PASSKEY or PASSKEY_FILE)",
    )
    moved = store.ok("register-dataset", "orders", "--tablename", "t", env=env)
    assert moved.out == "dataset orders updated\n"
    ((resealed, host, table),) = rows(
        tmp_path, "select encryptedpass, hostname, tablename from dataset"
    )
    assert (host, table) == ("db1", "t") and resealed != token
    assert crypto.decrypt(resealed, "k", seal=crypto.seal_of({**row, "tablename": "t"})) == "s3cret"
    error(
        store.utility("register-dataset", "bad-name"),
        "dataset name 'bad-name' must be usable in environment variable names (letters, digits and _, not starting with a digit) and not a clock "
        "('this_hour', 'today', 'this_week', 'this_month')",
    )
    error(
        store.utility("register-dataset", "x", "--password-stdin", input="pw\n"),
        "a password needs the passkey: set PASSKEY or PASSKEY_FILE",
    )
    prompt = store.utility("register-dataset", "x", "--password", stdin=subprocess.DEVNULL)
    error(prompt, "Password needs a terminal, or --password-stdin")
    refused = store.utility("register-dataset", "x", "--password", "hunter2")
    assert refused.code == 2 and "unrecognized arguments: hunter2" in refused.err  # never from argv


def test_register_job_validates_everything(store, tmp_path):
    host_policy(tmp_path, '[env]\nallow = ["region"]\n')
    for name in ("src", "mid", "out"):
        store.ok("register-dataset", name)
    assert (
        store.ok(
            "register-job",
            "load",
            "--in",
            "src",
            "--out",
            "mid",
            "--set",
            "retries=2",
            "--env",
            "region=eu",
        ).out
        == "job load registered\n"
    )
    assert json.loads(store.ok("export", "-").out)["jobs"]["load"] == [  # in the given order
        {"itemtype": "IN", "datasetid": "src"},
        {"itemtype": "OUT", "datasetid": "mid"},
        {"itemtype": "retries", "itemvalue": "2"},
        {"itemtype": "region", "itemvalue": "eu"},
    ]
    assert sorted(rows(tmp_path, "select itemtype, datasetid, itemvalue from job"), key=str) == [
        ("IN", "src", None),
        ("OUT", "mid", None),
        ("region", None, "eu"),
        ("retries", None, "2"),
    ]
    assert (
        store.ok("register-job", "load", "--in", "src", "--out", "mid").out == "job load replaced\n"
    )
    before = rows(tmp_path, "select * from job order by 1, 2, 3")
    error(
        store.utility("register-job", "x", "--in", "nope", "--out", "out"),
        "unknown dataset 'nope' (see 'utility datasets'); register it first: "
        "utility register-dataset nope",
    )
    error(
        store.utility("register-job", "x", "--in", "src", "--out", "mid"),
        "dataset 'mid' is already produced by job 'load'",
    )
    error(
        store.utility("register-job", "x", "--in", "src", "--out", "src"),
        "job 'x' cannot read and write the same dataset",
    )
    error(
        store.utility("register-job", "x", "--in", "mid", "--out", "out", "--set", "retries=many"),
        "job 'x' is misconfigured: setting retries must be a number from 0 to 1000000, not 'many'",
    )
    error(
        store.utility("register-job", "x", "--in", "mid", "--out", "out", "--env", "bad-name=1"),
        "job 'x': 'bad-name' cannot be an environment variable (letters, digits and _)",
    )
    error(
        store.utility("register-job", "x", "--in", "mid", "--out", "out", "--env", "novalue"),
        "--env must be NAME=VALUE, not 'novalue'",
    )
    error(
        store.utility("register-job", "x", "--in", "mid", "--out", "src"),
        "job 'x' would make a cycle: load -> x -> load",
    )
    assert rows(tmp_path, "select * from job order by 1, 2, 3") == before
    error(store.utility("unregister-dataset", "src"), "dataset 'src' is used by job(s) load")
    error(
        store.utility("unregister-job", "nojob"),
        "unknown job 'nojob': it has no rows in table job (see 'utility jobs')",
    )
    assert (
        store.ok("register-job", "daily", "--in", "today", "--out", "out").out
        == "job daily registered\n"
    )
    assert store.ok("unregister-job", "daily").out == "job daily removed\n"
    assert store.ok("unregister-dataset", "out").out == "dataset out removed\n"


def test_register_job_takes_its_datasets_after_one_flag_or_after_each(store, tmp_path):
    """``--in a b`` and ``--in a --in b`` say the same, as ``--set`` and ``--env`` do: the
    second ``--in`` of a daily job that reads a feed too was dropped, silently."""
    for name in ("feed", "out1", "log1", "out2", "log2"):
        store.ok("register-dataset", name)
    store.ok("register-job", "one", "--in", "today", "feed", "--out", "out1", "log1")
    store.ok(
        "register-job", "each", "--in", "today", "--in", "feed", "--out", "out2", "--out", "log2"
    )
    items = json.loads(store.ok("export", "-").out)["jobs"]
    for job, n in (("one", 1), ("each", 2)):
        assert items[job] == [
            {"itemtype": "IN", "datasetid": "today"},
            {"itemtype": "IN", "datasetid": "feed"},
            {"itemtype": "OUT", "datasetid": f"out{n}"},
            {"itemtype": "OUT", "datasetid": f"log{n}"},
        ]


@pytest.mark.long
def test_export_import_moves_the_configuration(store, tmp_path):
    store.ok("register-dataset", "src", "--hostname", "dev-db")
    store.ok("register-dataset", "dst", "--password-stdin", input="pw\n", env={"PASSKEY": "k"})
    store.ok("register-job", "copy", "--in", "src", "--out", "dst", "--set", "max_parallel=3")
    store.ok("export", "config.json")
    document = json.loads((tmp_path / "config.json").read_text())
    assert sorted(document["jobs"]) == ["copy"] and len(document["datasets"]) == 2

    prod = tmp_path / "prod"
    prod.mkdir()
    other = Cli(prod)
    other.ok("createtables")
    assert (
        other.ok("import", str(tmp_path / "config.json")).out == "2 datasets and 1 job imported\n"
    )
    assert other.ok("export", "-").out.strip() == (tmp_path / "config.json").read_text().strip()

    (prod / "broken.json").write_text(
        '{"opendataflow": 1, "datasets": [], "jobs": {"x": [{"itemtype": "IN", "datasetid": "nope"}, {"itemtype": "OUT", "datasetid": "dst"}]}}'
    )
    before = other.ok("export", "-").out
    error(other.utility("import", "broken.json"), "unknown dataset 'nope' (see 'utility datasets')")
    (prod / "junk.json").write_text("not json")
    assert other.utility("import", "junk.json").err.startswith("error: not an OpenDataFlow export:")
    assert other.ok("export", "-").out == before


def test_rekey_is_all_or_nothing(store, tmp_path):
    for name, password in (("a", "alpha"), ("b", "beta")):
        store.ok(
            "register-dataset",
            name,
            "--password-stdin",
            input=f"{password}\n",
            env={"PASSKEY": "old"},
        )
    old_file, new_file, wrong_file = (tmp_path / n for n in ("old", "new", "wrong"))
    old_file.write_text("old\n")
    new_file.write_text("new\n")
    wrong_file.write_text("nope\n")
    before = rows(tmp_path, "select * from dataset order by 1")
    wrong = store.utility("rekey", "--old-file", str(wrong_file), "--new-file", str(new_file))
    error(
        wrong,
        "cannot decrypt the password of dataset 'a' with the old passkey; nothing changed: wrong passkey or damaged ciphertext",
    )
    assert rows(tmp_path, "select * from dataset order by 1") == before
    assert (
        store.ok("rekey", "--old-file", str(old_file), "--new-file", str(new_file)).out
        == "2 passwords re-encrypted\n"
    )
    tokens = dict(rows(tmp_path, "select datasetid, encryptedpass from dataset"))
    seals = {k: crypto.seal_of({"datasetid": k}) for k in tokens}
    opened = {k: crypto.decrypt(v, "new", seal=seals[k]) for k, v in tokens.items()}
    assert opened == {"a": "alpha", "b": "beta"}


def test_a_setting_or_variable_row_without_a_value_reads_as_empty(chain, tmp_path):
    """An outside writer's job row whose itemvalue is NULL reads as '': a setting so left
    is refused for what it is, and a variable is handed to the job set, and empty."""
    host_policy(tmp_path, '[env]\nallow = ["region"]\n')
    script(tmp_path, "work.sh", 'echo "[${region-unset}]" > seen')
    chain.ok("dml", "insert into job (jobid, itemtype) values ('work', 'retries')")
    refused = chain.runjob("./work.sh")
    assert (refused.code, refused.err) == (
        2,
        "error: job 'work' is misconfigured: setting retries must be a number from 0 to "
        "1000000, not ''\n",
    )
    chain.ok("dml", "update job set itemtype = 'region' where itemtype = 'retries'")
    ran = chain.runjob("./work.sh")
    assert ran.code == 0, ran
    assert (tmp_path / "seen").read_text() == "[]\n"
