"""Every user mistake: one line on stderr, a non-zero exit, no traceback, store unchanged."""

from __future__ import annotations

import socket

import pytest

from dataflow.store import shown
from support import script, state

pytestmark = pytest.mark.both_stores

# what each driver says of a statement that is wrong
SAYS = {
    "sqlite": {
        "syntax": 'SQL failed: near "selec"',
        "table": "SQL failed: no such table",
        "column": "SQL failed: no such column",
        "unique": "SQL failed: UNIQUE constraint failed",
    },
    "postgres": {
        "syntax": 'SQL failed: syntax error at or near "selec"',
        "table": 'SQL failed: relation "nope" does not exist',
        "column": 'SQL failed: column "x" of relation "job" does not exist',
        "unique": "SQL failed: duplicate key value violates unique constraint",
    },
}


@pytest.fixture
def loadbob(cli, tmp_path):
    cli.ok("createtables")
    for sql in (
        "insert into dataset (datasetid) values ('bobin')",
        "insert into dataset (datasetid) values ('bobout')",
        "insert into job (datasetid,itemtype,jobid) values ('bobout','OUT','loadbob')",
        "insert into job (datasetid,itemtype,jobid) values ('bobin','IN','loadbob')",
        "insert into datastatus values ('bobin','fakejob','1.0','OUT','READY',now())",
    ):
        cli.ok("dml", sql)
    script(tmp_path, "loadbob.sh", "echo ran $dataid")
    return cli


def one_line_error(result, starts):
    assert result.code != 0, result
    assert result.out == ""
    assert result.err.count("\n") == 1 and result.err.startswith(f"error: {starts}"), result.err
    assert "Traceback" not in result.err


@pytest.mark.empty_store
def test_read_commands_never_create_a_store(cli, tmp_path, store_kind):
    # an SQLite store is a file; a PostgreSQL one is a database's tables (its empty
    # database is the test's, made for it)
    before = None if store_kind == "sqlite" else state(tmp_path)
    missing = "no dataflow store at" if store_kind == "sqlite" else "postgresql://"
    for args in (["runs"], ["jobs"], ["datasets"], ["sql", "select 1"], ["getjob", "x"]):
        result = cli.utility(*args)
        one_line_error(result, missing)
        assert "run 'utility createtables'" in result.err
    script(tmp_path, "loadbob.sh", "true")
    one_line_error(cli.runjob("./loadbob.sh"), missing)
    assert not (tmp_path / "dataflow.db").exists()
    if before is not None:
        assert state(tmp_path) == before


@pytest.mark.empty_store
def test_createtables_is_idempotent(cli, address):
    assert cli.ok("createtables").out.startswith("tables created in")
    assert cli.ok("createtables").out == f"store {shown(address)} is up to date\n"


def test_sql_mistakes(loadbob, tmp_path, store_kind):
    says = SAYS[store_kind]
    before = state(tmp_path)
    one_line_error(loadbob.utility("sql", "delete from datastatus"), "'utility sql' is read-only")
    one_line_error(loadbob.utility("sql", "selec * from job"), says["syntax"])
    one_line_error(loadbob.utility("sql", "select 1; select 2"), "SQL failed")
    one_line_error(loadbob.utility("dml", "insert into nope values (1)"), says["table"])
    one_line_error(loadbob.utility("dml", "update job set x = 1"), says["column"])
    one_line_error(loadbob.utility("ddl", "create table dataset (x int)"), "SQL failed: ")
    # a duplicate registration is refused by the schema, not silently doubled
    one_line_error(
        loadbob.utility(
            "dml", "insert into job (jobid,itemtype,datasetid) values ('loadbob','IN','bobin')"
        ),
        says["unique"],
    )
    assert state(tmp_path) == before
    assert loadbob.ok("sql", "select count(*) as n from datastatus").lines[-1].strip() == "1"


def test_utility_usage_errors(loadbob):
    bad = loadbob.utility("frobnicate")
    assert (
        bad.code == 2 and "invalid choice: 'frobnicate'" in bad.err and "Traceback" not in bad.err
    )
    one_line_error(loadbob.utility("getjob", "nojob"), "unknown job 'nojob'")
    one_line_error(
        loadbob.utility("endjob", "loadbob", "9.9", "READY"),
        "job 'loadbob' has no chunk with dataid '9.9'",
    )
    one_line_error(loadbob.utility("endjob", "loadbob", "1.0", "DONE"), "status must be one of")
    one_line_error(
        loadbob.utility("deleterun", "loadbob", "9.9"),
        "job 'loadbob' has no chunk with dataid '9.9'",
    )
    for name in (
        "createtables",
        "sql",
        "dml",
        "runs",
        "jobs",
        "datasets",
        "getjob",
        "endjob",
        "crypt",
        "forcejob",
        "deleterun",
        "where",
    ):
        helped = loadbob.utility(name, "--help")
        assert helped.code == 0 and "usage: utility" in helped.out, name


@pytest.mark.long
def test_runjob_mistakes_leave_the_store_unchanged(loadbob, tmp_path):
    before = state(tmp_path)
    for argv in ((), ("--all",), ("--bogus", "./loadbob.sh")):
        usage = loadbob.runjob(*argv)
        one_line_error(usage, "")  # what is wrong, not argparse's usage text above it
        assert usage.code == 2 and usage.err.endswith(" (see 'RunJob --help')\n"), usage
    assert "RunJob ./loadbob.sh" in loadbob.runjob().err  # it says what is missing
    one_line_error(loadbob.runjob("./missing.sh"), "cannot run ./missing.sh: no such file")
    (tmp_path / "noexec.sh").write_text("echo hi\n")
    one_line_error(loadbob.runjob("./noexec.sh"), "cannot run ./noexec.sh: it is not executable")
    script(tmp_path, "nojob.sh", "true")
    one_line_error(loadbob.runjob("./nojob.sh"), "unknown job 'nojob'")

    loadbob.ok("dml", "insert into job (jobid,itemtype,datasetid) values ('noout','IN','bobin')")
    script(tmp_path, "noout.sh", "true")
    one_line_error(
        loadbob.runjob("./noout.sh"), "job 'noout' is misconfigured: it has no OUT dataset"
    )
    loadbob.ok("dml", "insert into job (jobid,itemtype,datasetid) values ('blank','IN','')")
    script(tmp_path, "blank.sh", "true")  # (an outside writer's row: NULL is refused, '' not)
    one_line_error(
        loadbob.runjob("./blank.sh"), "job 'blank' is misconfigured: an IN row has no datasetid"
    )
    loadbob.ok("dml", "insert into job (jobid,itemtype,datasetid) values ('noin','OUT','bobin')")
    script(tmp_path, "noin.sh", "true")
    one_line_error(
        loadbob.runjob("./noin.sh"),
        "job 'noin' is misconfigured: it has no IN dataset; add one, or IN dataset 'today'"
        " for a daily job",
    )
    for clock in ("today", "this_hour"):  # register-job refuses this; an outside writer not
        loadbob.ok(
            "dml", f"insert into job (jobid,itemtype,datasetid) values ('two','IN','{clock}')"
        )
    loadbob.ok("dml", "insert into job (jobid,itemtype,datasetid) values ('two','OUT','bobin')")
    script(tmp_path, "two.sh", "true")
    one_line_error(
        loadbob.runjob("./two.sh"),
        "job 'two' is misconfigured: it has two clocks as IN datasets: today and this_hour\n",
    )

    loadbob.ok("dml", "insert into dataset (datasetid) values ('bad-name')")
    loadbob.ok("dml", "insert into job (jobid,itemtype,datasetid) values ('badname','IN','bobin')")
    loadbob.ok(
        "dml", "insert into job (jobid,itemtype,datasetid) values ('badname','OUT','bad-name')"
    )
    script(tmp_path, "badname.sh", "true")
    one_line_error(
        loadbob.runjob("./badname.sh"),
        "job 'badname' is misconfigured: dataset name 'bad-name' cannot be",
    )

    token = loadbob.ok("crypt", "-e", "pw", env={"PASSKEY": "right"}).out.strip()
    loadbob.ok("dml", f"update dataset set encryptedpass = '{token}' where datasetid = 'bobin'")
    before = state(tmp_path)
    one_line_error(
        loadbob.runjob("./loadbob.sh"),
        "job 'loadbob' uses the password of dataset 'bobin', so it needs the passkey",
    )
    one_line_error(
        loadbob.runjob("./loadbob.sh", env={"PASSKEY": "wrong"}),
        "cannot decrypt the password of dataset 'bobin': wrong passkey",
    )
    assert state(tmp_path) == before
    assert "RUNNING" not in loadbob.ok("sql", "select status from datastatus").out


def test_failed_job_exit_code_and_rerun(loadbob, tmp_path):
    script(tmp_path, "loadbob.sh", "echo broken; exit 7")
    failed = loadbob.runjob("./loadbob.sh")
    assert failed.code == 7
    assert failed.lines[-2].endswith("Job ./loadbob.sh has failed. Updating status")
    assert (
        failed.lines[-1]
        == "1 rows updated to FAILED for loadbob and 1.0 1 IN file-local locks released"
    )
    # FAILED stays FAILED (retries default to 0) until someone resubmits it
    assert "no suitable data" in loadbob.runjob("./loadbob.sh").out
    loadbob.ok("endjob", "loadbob", "1.0", "resubmit")
    script(tmp_path, "loadbob.sh", "echo fixed")
    assert loadbob.runjob("./loadbob.sh").lines[-1].startswith("1 rows updated to READY")


def test_seed_passkey_as_first_argument(loadbob, tmp_path):
    token = loadbob.ok("crypt", "-e", "--seed-format", "pw", env={"PASSKEY": "plugh"}).out.strip()
    loadbob.ok("dml", f"update dataset set encryptedpass = '{token}' where datasetid = 'bobin'")
    script(tmp_path, "loadbob.sh", 'test "$bobin_password" = pw && test -z "${PASSKEY:-}"')
    ran = loadbob.runjob("plugh", "./loadbob.sh")
    assert ran.code == 0, ran
    assert ran.lines[-1].startswith("1 rows updated to READY")


def test_options_before_the_command_are_not_a_passkey(loadbob):
    as_json = loadbob.utility("--json", "runs")
    assert as_json.code == 0 and as_json.out.startswith("[")
    assert loadbob.utility("--db", str(loadbob.address), "runs").code == 0


@pytest.mark.utility_process
def test_help_before_a_command_lists_every_command(cli):
    """utility builds the parser of the command its line names alone; a line it cannot
    read that way (the help asked first) gets the whole parser."""
    full = cli.utility("--help")
    assert full.code == 0 and "register-dataset" in full.out and "history" in full.out
    for argv in (("-h", "status"), ("--help", "log"), ("--json", "--help", "jobs")):
        helped = cli.utility(*argv)
        assert (helped.code, helped.out) == (0, full.out), argv


def test_an_abbreviated_db_option_reads_as_the_whole_option(cli, tmp_path):
    cli.ok("createtables")
    whole = cli.utility("--db", "log", "jobs")
    short = cli.utility("--d", "log", "jobs")
    assert whole.code == 2 and "no dataflow store at" in whole.err, whole
    assert (short.code, short.out, short.err) == (whole.code, whole.out, whole.err)


def free_port() -> int:
    """A local TCP port nothing listens on (bound, then let go)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
@pytest.mark.long
def test_postgresql_addresses_that_lead_nowhere(cli, tmp_path, pg_server):
    """A server that refuses, a database that is not there, a URL that cannot be one:
    one line for every command, nothing left behind."""
    server = f"{pg_server.user}@{pg_server.host}"
    nowhere = {
        f"postgresql://{server}:{free_port()}/x": "Connection refused",
        f"postgresql://{server}:{pg_server.port}/nosuchdb": (
            "the server has no database 'nosuchdb': create it (createdb nosuchdb), then run"
        ),
        f"postgresql://{server}:{pg_server.port}/nul%00byte": "forbidden value %00",
        f"postgresql://{server}:{pg_server.port}/x?bogus=1": 'invalid URI query parameter: "bogus"',
        f"postgresql://{pg_server.user}:secret@[::1/x": 'matching "]" in IPv6 host address',
        f"postgresql://{pg_server.user}:secret@{pg_server.host}:{free_port()}/x": "refused",
        f"postgresql://{server}:{free_port()}/x?password=secret&bogus=1": "bogus",
    }
    script(tmp_path, "loadbob.sh", "true")
    for url, says in nowhere.items():
        for argv in (["createtables"], ["runs"], ["sql", "select 1"], ["status"]):
            result = cli.utility("--db", url, *argv)
            one_line_error(result, "")
            assert says in result.err, (url, argv, result.err)
            assert "secret" not in result.err  # a password in the URL is never shown
        ran = cli.runjob("./loadbob.sh", env={"DATAFLOW_DB": url})
        one_line_error(ran, "")
        assert says in ran.err, (url, ran.err)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loadbob.sh"]
