"""``copy-store --retire``: a store that moved refuses all work with one line naming where
it went, so a cron line left on it cannot run a chunk a second time; its history stays
readable; a failed copy retires nothing."""

from __future__ import annotations

import re
import sqlite3

from dataflow.cli.commands import COMMANDS
from dataflow.cli.utility import parser as _registers_commands  # noqa: F401
from dataflow.store import shown
from support import InProcessCli as Cli  # utility in this process; RunJob a process
from support import script

# every utility command that opens the store, with arguments it accepts
REFUSED = {
    "board": ["--html", "board.html"],
    "explain": ["work", "1"],
    "status": [],
    "lineage": ["dst", "1"],
    "resubmit": ["work", "1"],
    "ready": ["src", "3"],
    "hold": ["work", "2"],
    "release": ["work", "2"],
    "purge": ["--days-old", "30", "--dry-run"],
    "check": [],
    "register-dataset": ["other"],
    "register-job": ["other", "--in", "src", "--out", "dst"],
    "set": ["work", "retries=2"],
    "unset": ["work", "retries"],
    "notify-test": ["work"],
    "unregister-dataset": ["src"],
    "unregister-job": ["work"],
    "export": ["export.json"],
    "import": ["export.json"],
    "rekey": ["--old-file", "old.key", "--new-file", "new.key"],
    "serve": ["--port", "0", "--token-file", "token"],
    "stream": ["work.py"],
    "drop": ["src", "export.json"],
    "createtables": [],
    "copy-store": ["--to", "again.db"],
    "plan": ["proj"],
    "apply": ["proj"],
    "deploy": ["origin.git", "--into", "srv"],
    "dml": ["delete from job"],
    "ddl": ["create table t(x int)"],
    "runs": [],
    "chunks": [],
    "jobs": [],
    "datasets": [],
    "getjob": ["work"],
    "endjob": ["work", "1", "FAILED"],
    "forcejob": ["work", "5"],
    "deleterun": ["work", "1"],
    "recover": [],
}
# what a retired store still does: read its history (for audit), take the mark back; and
# the commands that never open a store
ALLOWED = {
    *("history", "actions", "log", "sql", "unretire", "where", "crypt", "validate", "deploys"),
    "init",
}


def _laptop(cli: Cli) -> None:
    cli.ok("createtables")
    cli.ok("register-dataset", "src")
    cli.ok("register-dataset", "dst")
    cli.ok("register-job", "work", "--in", "src", "--out", "dst", "--set", "retries=1")
    cli.ok("ready", "src", "1", "2")
    script(cli.cwd, "work.sh", "true")
    (cli.cwd / "work.py").write_text("from dataflow import spark\n")
    (cli.cwd / "export.json").write_text("{}")
    (cli.cwd / "proj").mkdir()
    (cli.cwd / "proj" / "dataflow.toml").write_text("[project]\nname = 'empty'\n")
    (cli.cwd / "token").write_text("a-token-long-enough-for-serve-0123456789\n")
    (cli.cwd / "token").chmod(0o600)
    for name in ("old.key", "new.key"):
        (cli.cwd / name).write_text(f"{name} passkey\n")
    assert cli.run_job("./work.sh").exit_code == 0  # chunk 1 READY


def _refused(result, target: str) -> None:
    line = re.escape(f"error: this store moved to {target} (copy-store --retire on ")
    pattern = line + r"\d{4}-\d\d-\d\d \d\d:\d\d" + re.escape(f"); use --db {target}") + "\n"
    assert result.code != 0, result
    assert re.fullmatch(pattern, result.err), result.err
    assert result.out == "", result.out


def _dataids(address) -> list[str]:
    with sqlite3.connect(address) as conn:
        return [r[0] for r in conn.execute("select dataid from datastatus order by 1")]


def test_every_command_but_reading_the_history_is_refused_on_a_store_moved_to_postgresql(
    tmp_path, pg_database
):
    laptop = Cli(tmp_path)
    _laptop(laptop)
    before = (tmp_path / "dataflow.db").read_bytes()
    url = pg_database.replace("postgres@", "postgres:s3cret@")  # (the test server trusts)
    moved = laptop.ok("copy-store", "--to", url, "--retire")
    target = shown(url)
    assert ":***@" in target and "s3cret" not in moved.out
    assert f"retired: its commands now refuse work and name {target}" in moved.out

    assert set(REFUSED) | ALLOWED == set(COMMANDS)  # a new command is listed here
    for name, args in REFUSED.items():
        _refused(laptop.utility(name, *args), target)
    _refused(laptop.runjob("./work.sh"), target)  # cron's line, left on the laptop
    _refused(laptop.runjob("--all", "./work.sh"), target)
    assert _dataids(tmp_path / "dataflow.db") == ["1", "1", "2"]  # nothing ran, nothing changed
    after = (tmp_path / "dataflow.db").read_bytes()
    assert after != before and b"s3cret" not in after  # (but the mark, without the password)

    audit = laptop.ok("history", "work")
    assert "READY" in audit.out
    assert laptop.ok("log", "work", "1").code == 0
    assert "work" in laptop.ok("sql", "select jobid from run").out
    assert laptop.ok("where").code == 0

    shared = Cli(tmp_path, pg_database)  # the target works, chunk 2 runs there (once)
    ran = shared.runjob("./work.sh")
    assert ran.code == 0 and "READY for work and 2 " in ran.out, ran
    assert "retire" not in shared.ok("jobs").out  # the mark stays with the source

    back = laptop.ok("unretire")
    assert f"accepts work again (it had moved to {target})" in back.out
    assert laptop.run_job("./work.sh").exit_code == 0


def test_a_store_moved_to_another_file_refuses_runjob_and_changes(tmp_path):
    laptop = Cli(tmp_path)
    _laptop(laptop)
    target = tmp_path / "shared" / "moved.db"
    target.parent.mkdir()
    laptop.ok("copy-store", "--to", str(target), "--retire")
    for args in (["ready", "src", "9"], ["set", "work", "retries=3"], ["status"]):
        _refused(laptop.utility(*args), str(target))
    _refused(laptop.runjob("./work.sh"), str(target))
    _refused(laptop.utility("--db", str(tmp_path / "dataflow.db"), "explain", "work"), str(target))
    assert Cli(tmp_path, target).run_job("./work.sh").exit_code == 0
    assert _dataids(target) == ["1", "1", "2", "2"]


def test_a_postgresql_store_moved_back_to_a_file_is_retired_too(tmp_path, pg_database):
    laptop = Cli(tmp_path)
    _laptop(laptop)
    laptop.ok("copy-store", "--to", pg_database, "--retire")
    shared = Cli(tmp_path, pg_database)
    back = tmp_path / "back.db"
    shared.ok("copy-store", "--to", str(back), "--retire")
    _refused(shared.utility("ready", "src", "3"), str(back))
    _refused(shared.runjob("./work.sh"), str(back))
    assert "READY" in shared.ok("history", "work").out
    assert Cli(tmp_path, back).run_job("./work.sh").exit_code == 0
    assert _dataids(back) == ["1", "1", "2", "2"]
    # copying a store over a retired one (with --force) brings it back to life
    Cli(tmp_path, back).ok("copy-store", "--to", pg_database, "--force")
    shared.ok("ready", "src", "2")


def test_a_copy_that_fails_retires_nothing(tmp_path, pg_database):
    laptop = Cli(tmp_path)
    _laptop(laptop)
    with sqlite3.connect(tmp_path / "dataflow.db") as conn:  # a time PostgreSQL cannot read
        conn.execute("update datastatus set modified = 'the day before' where dataid = '2'")
    failed = laptop.utility("copy-store", "--to", pg_database, "--retire")
    assert failed.code != 0 and failed.err.startswith("error: ") and "moved" not in failed.err
    assert laptop.ok("status").code == 0
    assert laptop.run_job("./work.sh").exit_code == 0  # chunk 2 runs on the laptop still
    refused = laptop.utility("copy-store", "--to", str(tmp_path / "dataflow.db"), "--retire")
    assert refused.code != 0 and "moved" not in refused.err
    assert laptop.ok("status").code == 0
