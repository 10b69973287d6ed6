"""The open store is a trust boundary: whoever writes a row decides which chunk runs and
with which metadata, never which code runs nor which file our commands read or delete."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from dataflow.store import open_store
from support import (
    _admin,
    host_policy,
    rows,
    script,
    state,
    statuses,
)

pytestmark = pytest.mark.both_stores

# names that change how a process, a shell, the loader, an interpreter, git, a pager, a
# TLS library or a proxy-aware client starts: none is on any host's list unless it says so
UNSAFE = [
    "BASH_ENV",
    "ENV",
    "LD_PRELOAD",
    "PATH",
    "PYTHONSTARTUP",
    "JAVA_TOOL_OPTIONS",
    "PERL5OPT",
    "GIT_CONFIG_PARAMETERS",
    "GIT_ASKPASS",
    "PAGER",
    "LESSOPEN",
    "OPENSSL_CONF",
    "HTTPS_PROXY",
    "npm_config_script_shell",
]


def _job(cli, tmp_path):
    cli.ok("createtables")
    cli.ok("register-dataset", "src")
    cli.ok("register-dataset", "dst")
    cli.ok("register-job", "M", "--in", "src", "--out", "dst")
    cli.ok("ready", "src", "1")
    script(tmp_path, "M.sh", "echo ran > ran")
    (tmp_path / "evil.sh").write_text(f"touch {tmp_path / 'pwned'}\n")


@pytest.mark.parametrize(  # the host's list judges a name whatever the store: every one
    ("store_kind", "name"),  # on SQLite, two through PostgreSQL's rows
    [("sqlite", name) for name in UNSAFE] + [("postgres", "PATH"), ("postgres", "LD_PRELOAD")],
    indirect=["store_kind"],
)
def test_a_job_row_whose_name_the_host_does_not_allow_is_refused_and_never_set(cli, tmp_path, name):
    _job(cli, tmp_path)
    before = state(tmp_path)
    refused = cli.utility("register-job", "M", "--in", "src", "--out", "dst", "--env", f"{name}=x")
    assert refused.code == 2 and refused.err.count("\n") == 1, refused
    assert f"'{name}' is not an environment name this host lets a store row set" in refused.err
    assert "[env] allow" in refused.err and str(host_policy(tmp_path)) in refused.err
    assert state(tmp_path) == before
    # another client writes the row anyway: the run says so once (a warning, which RunJob
    # prints in one line: test_host_policy), and the job runs without it
    evil = str(tmp_path / "evil.sh")
    cli.ok("dml", f"insert into job (jobid, itemtype, itemvalue) values ('M', '{name}', '{evil}')")
    script(tmp_path, "M.sh", f'echo "${{{name}-unset}}" > ran')
    ran = cli.run_job("./M.sh")
    assert ran.exit_code == 0, ran
    warned = ran.warnings
    assert len(warned) == 1 and f"its row '{name}' is not an environment name" in warned[0]
    assert evil not in (tmp_path / "ran").read_text()  # PATH is the host's own
    assert not (tmp_path / "pwned").exists()


def test_a_name_the_host_allows_is_set_and_the_toolkits_own_never_are(cli, tmp_path):
    _job(cli, tmp_path)
    host_policy(tmp_path, '[env]\nallow = ["REGION", "ETL_*", "DATAFLOW_*", "dataid"]\n')
    cli.ok("set", "M", "REGION=eu", "ETL_BATCH=7")
    for own in ("DATAFLOW_STORE=/elsewhere", "dataid=99"):
        refused = cli.utility("set", "M", own)
        assert refused.code == 2 and "a variable of the toolkit's own" in refused.err, refused
    script(tmp_path, "M.sh", 'echo "$REGION $ETL_BATCH $dataid" > ran')
    assert cli.run_job("./M.sh").exit_code == 0
    assert (tmp_path / "ran").read_text() == "eu 7 1\n"


def test_an_import_and_a_dataset_name_follow_the_same_rule(cli, tmp_path):
    _job(cli, tmp_path)
    cli.ok("export", "export.json")
    exported = json.loads((tmp_path / "export.json").read_text())
    exported["jobs"]["M"].append({"itemtype": "LD_PRELOAD", "itemvalue": "/tmp/evil.so"})
    (tmp_path / "export.json").write_text(json.dumps(exported))
    refused = cli.utility("import", "export.json")
    assert refused.code == 2 and "'LD_PRELOAD' is not an environment name" in refused.err
    refused = cli.utility("register-dataset", "LD")  # LD_hostname, LD_password...
    assert refused.code == 2 and "dataset name 'LD'" in refused.err, refused
    # written by another client: the job that uses it is refused, nothing claimed
    cli.ok("dml", "insert into dataset (datasetid) values ('LD')")
    cli.ok("dml", "insert into job (jobid, itemtype, datasetid) values ('M', 'IN', 'LD')")
    ran = cli.runjob("./M.sh")
    assert ran.code == 2 and "dataset 'LD'" in ran.err and ran.err.count("\n") == 1, ran
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize("where", ["elsewhere", "beside"])
def test_purge_and_log_touch_only_the_stores_own_log_folder(cli, tmp_path, where):
    """A history row names a file elsewhere (or in a folder beside the log folder whose
    name starts as its name does: ``logs-old``): ``log`` prints the run's own log,
    ``purge`` deletes the run's own log, and the other file is never read nor deleted."""
    _job(cli, tmp_path)
    script(tmp_path, "M.sh", "echo the job says hello")
    assert cli.run_job("./M.sh").exit_code == 0
    (own,) = rows(tmp_path, "select logpath from run")[0]
    logs = Path(own).parent.parent  # <store's folder>/logs (then the job's, then its log)
    outside = tmp_path / "precious.txt"
    if where == "beside":
        outside = logs.with_name("logs-old") / "precious.txt"
        outside.parent.mkdir()
    outside.write_text("keep me\n")
    cli.ok("dml", f"update run set logpath = '{outside}'")
    shown = cli.ok("log", "M", "1").out
    assert shown == "the job says hello\n"

    def rerun() -> None:  # a next attempt: the one before may be purged
        cli.ok("resubmit", "M", "1")
        assert cli.run_job("./M.sh").exit_code == 0

    rerun()
    assert "1 run purged" in cli.ok("purge", "--days-old", "0").out
    assert outside.read_text() == "keep me\n" and not Path(own).exists()
    # a symlink at the run's own log path that leads out of the folder is no way out
    (logpath,) = rows(tmp_path, "select logpath from run")[0]
    os.unlink(logpath)
    os.symlink(outside, logpath)
    stored = cli.ok("log", "M", "1")  # the store's copy of the run's log, not the file
    assert stored.out == "the job says hello\n"
    cli.ok("dml", "delete from runlog")
    refused = cli.utility("log", "M", "1")
    assert refused.code == 2 and "not in the store's log folder" in refused.err, refused
    assert "keep me" not in refused.out
    rerun()
    assert "1 run purged" in cli.ok("purge", "--days-old", "0").out
    assert outside.read_text() == "keep me\n"


@pytest.mark.parametrize(
    "argv",
    [
        ("runs", "--limit", "99999999999999999999"),
        ("history", "--limit", "-1"),
        ("history", "--limit", "0"),
        ("log", "M", "1", "--attempt", "99999999999999999999"),
    ],
)
def test_limits_and_attempts_out_of_range_are_one_line(cli, tmp_path, argv):
    _job(cli, tmp_path)
    before = state(tmp_path)
    refused = cli.utility(*argv)
    assert refused.code == 2 and refused.err.count("\n") == 1, refused
    assert "must be a whole number from 1 to 1000000" in refused.err
    assert state(tmp_path) == before


@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)  # no store is read
def test_passkey_files_and_imports_are_read_with_a_bound(cli, tmp_path):
    (tmp_path / "binary.key").write_bytes(b"\xff\xfe\x00\x01")
    cases = {
        ("crypt", "-e", "hello"): {"PASSKEY_FILE": "/dev/zero"},
        ("crypt", "-e", "hello "): {"PASSKEY_FILE": str(tmp_path / "binary.key")},
        ("rekey", "--old-file", "/dev/zero", "--new-file", "/dev/zero"): {},
        ("import", "/dev/zero"): {},
    }
    cli.ok("createtables")
    for argv, env in cases.items():
        refused = cli.utility(*argv, env=env, timeout=60)
        assert refused.code == 2 and refused.err.count("\n") == 1, (argv, refused)
        assert "Traceback" not in refused.err
    (tmp_path / "deep.json").write_text("[" * 200_000)
    refused = cli.utility("import", "deep.json")
    assert refused.code == 2 and "nested too deeply" in refused.err, refused


def test_repeated_env_and_set_options_all_count(cli, tmp_path):
    _job(cli, tmp_path)
    host_policy(tmp_path, '[env]\nallow = ["A", "B"]\n')
    argv = ["register-job", "M", "--in", "src", "--out", "dst", "--env", "A=1", "--env", "B=2"]
    cli.ok(*argv, "--set", "retries=3", "--set", "timeout=50")
    found = rows(tmp_path, "select itemtype, itemvalue from job where itemvalue is not null")
    assert sorted(found) == [("A", "1"), ("B", "2"), ("retries", "3"), ("timeout", "50")]


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
def test_a_password_holding_an_at_sign_is_never_shown(cli, address):
    host = str(address).split("@", 1)[1]
    bad = f"postgresql://someone:su@pported@{host}"
    refused = cli.utility("--db", bad, "runs")
    assert refused.code == 2 and refused.err.count("\n") == 1, refused
    assert "pported" not in refused.err and "percent-encode" in refused.err
    assert "someone:***@" in refused.err


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
def test_purge_reads_the_age_of_runs_on_the_servers_clock(cli, tmp_path, address, monkeypatch):
    """A host whose clock is three days ahead must not purge yesterday's runs."""
    import datetime as real

    from dataflow.ops import housekeeping
    from dataflow.store import base

    _job(cli, tmp_path)
    assert cli.run_job("./M.sh").exit_code == 0

    class Ahead(real.datetime):
        @classmethod
        def now(cls, tz=None):
            return real.datetime.now(tz) + real.timedelta(days=3)

    for module in (base, housekeeping):  # this host's clock, wherever it is read
        monkeypatch.setattr(module, "datetime", Ahead, raising=False)
    with open_store(str(address)) as store:
        runs = housekeeping.purge(store, days_old=1, dry_run=True)
    assert runs == []


@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)  # logs are on this host
def test_a_log_stops_growing_at_its_cap_and_the_run_is_recorded(cli, tmp_path):
    """A job's output cannot fill the store's disk through its log: the log is cut at
    DATAFLOW_LOG_MAX_MB, with a note, and the run ends READY as it should."""
    _job(cli, tmp_path)
    script(
        tmp_path, "M.sh", "yes xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx | head -c 3000000; echo done"
    )
    ran = cli.runjob("./M.sh", env={"DATAFLOW_LOG_MAX_MB": "1"})
    assert ran.code == 0 and ran.out.rstrip().endswith("1 IN file-local locks released"), ran
    assert ran.out.count("x") == 2_925_000 and "done" in ran.out  # the console got it all
    (logpath,) = rows(tmp_path, "select logpath from run")[0]
    log = Path(logpath).read_bytes()
    assert len(log) < (1 << 20) + 200 and log.endswith(b"MB (DATAFLOW_LOG_MAX_MB)]\n")
    assert rows(tmp_path, "select status, reason from run") == [("READY", None)]


def _chunks(chain, last: int) -> None:
    """Chunks 4..last of src READY too (the chain has 1..3)."""
    chain.ok(
        "dml",
        f"with recursive n(i) as (select 4 union all select i+1 from n where i < {last}) "
        "insert into datastatus select 'src','fakejob',i,'OUT','READY',now() from n",
    )


def test_a_hostile_run_row_is_one_line_and_blocks_only_its_chunk(chain, tmp_path, address):
    """A last run whose attempt no claim can add one to (text, which any SQLite client
    may write into the typeless column; on PostgreSQL the integer's limit) is said in
    one line and its chunk skipped; every other chunk of the job runs."""
    attempt = "2147483647" if isinstance(address, str) else "'x'"
    _chunks(chain, 6)
    chain.ok("dml", "insert into datastatus values ('dst','work','2','OUT','FAILED',now())")
    chain.ok("dml", "insert into job (jobid, itemtype, itemvalue) values ('work', 'retries', '3')")
    _admin(
        tmp_path,
        "insert into run (jobid, dataid, attempt, retry, status, started)"
        f" values ('work', '2', {attempt}, 0, 'FAILED', '2026-01-01 00:00:00')",
    )
    script(tmp_path, "work.sh", 'echo "$dataid" >> ran')
    done = chain.runjob("--all", "--parallel", "3", "./work.sh")
    assert done.code == 0, done.err
    assert done.err.splitlines() == [
        "warning: dataid '2' of work has a last run whose attempt or retry is not a "
        "count: skipped; correct or delete its rows"
    ]
    assert sorted((tmp_path / "ran").read_text().split()) == ["1", "3", "4", "5", "6"]
    assert statuses(tmp_path, "work")["2"] == "FAILED"
