"""The store is data, the host runs code: a row may choose among what the host's policy
allows (dataflow.policy), never add to it. Each test is a statement of
docs/guarantees.md ("What a writer of the store can do")."""

from __future__ import annotations

import json
import socket
import subprocess

import pytest

from support import host_policy, rows, script, state, statuses
from support.receivers import http_receiver

pytestmark = pytest.mark.both_stores


def _job(cli, tmp_path, name: str = "G", body: str = "exit 0") -> None:
    cli.ok("createtables")
    cli.ok("register-dataset", "src")
    cli.ok("register-dataset", "dst")
    cli.ok("register-job", name, "--in", "src", "--out", "dst")
    cli.ok("ready", "src", "1")
    script(tmp_path, f"{name}.sh", body)


def _insert(cli, jobid: str, itemtype: str, value: str) -> None:
    """A row written by another client of the store (SQL), as any writer may."""
    value = value.replace("'", "''")
    cli.ok(
        "dml",
        f"insert into job (jobid, itemtype, itemvalue) values ('{jobid}', '{itemtype}', '{value}')",
    )


def _one_line(result, code: int = 2) -> str:
    assert result.code == code and result.err.count("\n") == 1, result
    assert "Traceback" not in result.err
    return result.err


GIT_HOOK = {  # git runs core.fsmonitor's command at `git status`
    "GIT_CONFIG_COUNT": "1",
    "GIT_CONFIG_KEY_0": "core.fsmonitor",
    "GIT_CONFIG_VALUE_0": "touch pwned; false",
}


def test_a_row_cannot_make_git_run_a_command_through_its_environment(cli, tmp_path):
    repo = tmp_path / "repo"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    _job(cli, tmp_path, body=f"cd {repo} && git status --short > ../status")
    before = state(tmp_path)
    refused = cli.utility("set", "G", *(f"{k}={v}" for k, v in GIT_HOOK.items()))
    assert "'GIT_CONFIG_COUNT' is not an environment name" in _one_line(refused)
    assert state(tmp_path) == before
    for name, value in GIT_HOOK.items():
        _insert(cli, "G", name, value)
    ran = cli.runjob("./G.sh")
    assert ran.code == 0, ran
    warned = [line for line in ran.err.splitlines() if line.startswith("warning:")]
    assert len(warned) == 3 and all("not an environment name" in w for w in warned), ran
    assert (tmp_path / "status").exists() and statuses(tmp_path, "G") == {"1": "READY"}
    assert not (repo / "pwned").exists() and not (tmp_path / "pwned").exists()


SPARK_ARGS = [
    ("--jars /tmp/evil.jar", "option --jars"),
    ("--py-files /tmp/evil.zip", "option --py-files"),
    ("--packages org.evil:evil:1.0", "option --packages"),
    ("--properties-file /tmp/evil.conf", "option --properties-file"),
    ("--driver-java-options -javaagent:/tmp/evil.jar", "option --driver-java-options"),
    ("--conf spark.plugins=org.evil.Plugin", "Spark conf spark.plugins"),
    ("--conf=spark.driver.extraJavaOptions=-javaagent:/tmp/a.jar", "Spark conf spark.driver"),
    ("-c spark.sql.extensions=org.evil.Ext", "Spark conf spark.sql.extensions"),
    ("--master spark://evil.example.com:7077", "option --master spark://evil"),
    ("--driver-memory 1g /tmp/evil.py", "'/tmp/evil.py' is not a spark-submit option"),
]


@pytest.mark.parametrize(  # the host's list judges them whatever the store: every one on
    ("store_kind", "spark_args", "named"),  # SQLite, two through PostgreSQL's rows
    [("sqlite", *case) for case in SPARK_ARGS]
    + [("postgres", *SPARK_ARGS[0]), ("postgres", *SPARK_ARGS[5])],
    indirect=["store_kind"],
)
def test_spark_args_give_only_the_options_and_confs_the_host_allows(
    cli, tmp_path, spark_args, named
):
    _job(cli, tmp_path, "S")
    (tmp_path / "S.py").write_text("raise SystemExit('the job must not run')\n")
    before = state(tmp_path)
    assert named in _one_line(cli.utility("set", "S", f"spark_args={spark_args}"))
    assert state(tmp_path) == before
    _insert(cli, "S", "spark_args", spark_args)
    before = state(tmp_path)
    err = _one_line(cli.runjob("./S.py"))  # refused before any claim
    assert named in err and "the job setting spark_args" in err, err
    assert state(tmp_path) == before


def test_spark_args_the_host_allows_are_taken(cli, tmp_path):
    _job(cli, tmp_path, "S")
    allowed = "--driver-memory 1g --master local[2] --conf spark.sql.shuffle.partitions=4"
    cli.ok("set", "S", f"spark_args={allowed}")
    jars = "--jars /opt/etl/jars/pg.jar"
    assert "option --jars" in _one_line(cli.utility("set", "S", f"spark_args={jars}"))
    host_policy(tmp_path, '[spark]\noptions = { "--jars" = ["/opt/etl/jars/*.jar"] }\n')
    cli.ok("set", "S", f"spark_args={jars}")
    sideways = "--jars /opt/etl/jars/../../../tmp/evil.jar"  # * never matches a /
    assert "option --jars" in _one_line(cli.utility("set", "S", f"spark_args={sideways}"))
    for listed in (
        "/opt/etl/jars/pg.jar,evil.jar",
        "/opt/etl/jars/pg.jar,",
        "/opt/etl/jars/a,b.jar",
    ):
        said = _one_line(cli.utility("set", "S", f"spark_args=--jars {listed}"))
        assert "option --jars" in said, listed  # each entry of a list is matched alone
    cli.ok("set", "S", "spark_args=--jars /opt/etl/jars/a.jar,/opt/etl/jars/b.jar")


def test_a_spark_connect_server_a_row_names_is_reached_only_if_the_host_allows_it(cli, tmp_path):
    _job(cli, tmp_path, "S")
    (tmp_path / "S.py").write_text("raise SystemExit('the job must not run')\n")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        server.settimeout(0.5)
        url = f"sc://127.0.0.1:{server.getsockname()[1]}"
        assert "is not one this host lets a store row name" in _one_line(
            cli.utility("set", "S", f"spark_remote={url}")
        )
        _insert(cli, "S", "spark_remote", url)
        before = state(tmp_path)
        err = _one_line(cli.runjob("./S.py"))
        assert "the job setting spark_remote" in err and "[spark] remotes" in err, err
        assert state(tmp_path) == before
        with pytest.raises(TimeoutError):  # nothing came to the server
            server.accept()


@pytest.fixture
def receiver():
    """An internal service on 127.0.0.1 (``receiver.got``: the path and headers of each
    POST), and its Apprise address."""
    with http_receiver(lambda path, headers, _: (path, dict(headers))) as server:
        server.url = f"json://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
        yield server


@pytest.mark.long
def test_an_alert_goes_only_to_a_target_the_host_allows_without_headers_or_files(
    cli, tmp_path, receiver
):
    cli.env["DATAFLOW_ALERT_TIMEOUT"] = "60"
    _job(cli, tmp_path, "F", "exit 3")
    internal = f"{receiver.url}/internal/admin?+X-Injected=yes"
    before = state(tmp_path)
    refused = cli.utility("set", "F", f"alerts={internal}")
    assert "alert target json://127.0.0.1 is not allowed by this host" in _one_line(refused)
    assert state(tmp_path) == before
    _insert(cli, "F", "alerts", internal)
    failed = cli.runjob("./F.sh")  # a real Apprise sender would POST it
    assert failed.code == 3, failed
    assert "is not allowed by this host" in failed.err and receiver.got == [], failed
    # the host allows its own service: a header parameter or a file is still never taken
    policy = f'[alerts]\ntargets = ["{receiver.url}", "fcm://"]\n'
    host_policy(tmp_path, policy)
    for url, param in (
        (internal, "+X-Injected"),
        ("fcm://p/device?keyfile=/etc/shadow", "keyfile"),
    ):
        said = _one_line(cli.utility("set", "F", f"alerts={url}"))
        assert f"alert parameter '{param}' is not allowed by this host" in said
    cli.ok("endjob", "F", "1", "RESUBMIT")
    failed = cli.runjob("./F.sh")
    assert "alert parameter '+X-Injected'" in failed.err and receiver.got == [], failed
    cli.ok("set", "F", f"alerts={receiver.url}/internal/admin")  # allowed: it is sent
    cli.ok("endjob", "F", "1", "RESUBMIT")
    assert cli.runjob("./F.sh").code == 3
    assert [path for path, _ in receiver.got] == ["/internal/admin"]
    assert "X-Injected" not in receiver.got[0][1]


def test_a_store_wide_alert_target_follows_the_same_rule(cli, tmp_path, receiver):
    _job(cli, tmp_path)
    refused = cli.utility("set", "*", f"alerts={receiver.url}")
    assert "store-wide setting alerts" in _one_line(refused)
    _insert(cli, "*", "alerts", receiver.url)
    tested = cli.utility("notify-test", "G")
    assert tested.code == 1 and "not allowed by this host" in tested.out, tested
    assert receiver.got == []


@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)  # no store is read
def test_a_policy_file_that_is_not_right_is_one_line(cli, tmp_path):
    _job(cli, tmp_path)
    for text, said in (
        ("[spark\n", "is not TOML"),
        ("[env]\nallow = 'X'\n", "[env] allow must be a list of strings"),
        ("[serve]\nroots = []\n", "unknown table [serve]"),
        ("[spark]\nconfz = []\n", "unknown key confz in [spark]"),
    ):
        host_policy(tmp_path, text)
        assert said in _one_line(cli.utility("set", "G", "X=1")), text
    for raw, said in ((b'[env]\nallow = ["\xff"]\n', "not UTF-8"), (b"a = " + b"[" * 5000, "")):
        host_policy(tmp_path).write_bytes(raw)
        assert said in _one_line(cli.utility("set", "G", "X=1")), raw[:20]
    missing = {"DATAFLOW_POLICY": str(tmp_path / "nowhere.toml")}
    assert "names no file" in _one_line(cli.utility("set", "G", "X=1", env=missing))
    relative = {"DATAFLOW_POLICY": "policy.toml"}
    assert "must be an absolute path" in _one_line(cli.utility("set", "G", "X=1", env=relative))


def test_the_defaults_carry_no_code_no_path_and_no_address(tmp_path):
    """What a host without a policy file allows: nothing to set in the environment, no
    Spark Connect server, no alert target; spark_args that size a job."""
    from dataflow.errors import PolicyError
    from dataflow.policy import load

    policy = load({"DATAFLOW_POLICY": str(host_policy(tmp_path))})
    assert not policy.env and not policy.remotes and not policy.targets
    assert policy.spark_args_refusal(["--master", "local[4]", "--executor-memory", "2g"]) is None
    for option, value in policy.options.items():
        assert all(v in ("", "*", "local", "local[*]", "client", "cluster") for v in value)
        assert option not in ("--jars", "--py-files", "--files", "--packages", "--repositories")
    assert not [c for c in policy.confs if "java" in c.lower() or c.endswith(("plugins", "*"))]
    with pytest.raises(PolicyError):
        load({"DATAFLOW_POLICY": ""})


def test_an_alert_url_is_parsed_as_apprise_reads_it(tmp_path):
    from dataflow.policy import load
    from dataflow.run.listeners.alerts import refusal

    policy = load(
        {"DATAFLOW_POLICY": str(host_policy(tmp_path, '[alerts]\ntargets = ["json://h"]'))}
    )
    assert refusal("json://u:p@h:80/a/b?format=text", policy) is None
    assert refusal("json://h.evil/a", policy) is not None
    assert "parameter 'verify'" in refusal("json://h/?format=text&verify=no", policy)
    assert "parameter '-x'" in refusal("json://h/a?-x=1", policy)
    assert "is ambiguous" in refusal("json://h/a?format=text#frag", policy)
    assert "is not a URL" in refusal("json://", policy)
    assert json.dumps(refusal("JSON://H", policy)) == "null"  # schemes and hosts: any case


def test_the_documented_policy_file_is_one_this_toolkit_reads(tmp_path):
    from pathlib import Path

    from dataflow.policy import load

    page = (Path(__file__).parent.parent / "docs" / "policy.md").read_text()
    example = page.split("```toml\n", 1)[1].split("```", 1)[0]
    policy = load({"DATAFLOW_POLICY": str(host_policy(tmp_path, example))})
    assert policy.env_allowed("ETL_BATCH") and policy.env_allowed("orders_dataid_column")
    assert not policy.env_allowed("ETL") and not policy.env_allowed("dataid")
    assert policy.spark_args_refusal(["--jars", "/opt/etl/jars/pg.jar", "--supervise"]) is None
    assert policy.remote_refusal("connect.etl.example.com", 15002) is None
    assert policy.alert_refusal("mailto", "smtp.example.com", None, ["mode", "to"]) is None


AMBIGUOUS = [  # read one way by a naive parser, another by Apprise (sweep of this change)
    "{url}@hooks.allowed.invalid/second-at",  # Apprise: the host after the first @
    "{url}/semi?format=text;+X-Evil=1",  # Apprise: ; separates parameters
    "{url}/hash?format=text#&+X-Evil=1",  # Apprise: a # in the query is kept
    "json://hooks.allowed.invalid/a;{url}/other",  # Apprise: ; before a scheme, two URLs
]


@pytest.mark.parametrize("shape", AMBIGUOUS)
@pytest.mark.long
def test_an_alert_url_apprise_would_read_otherwise_is_refused_and_never_sent(
    cli, tmp_path, receiver, shape
):
    cli.env["DATAFLOW_ALERT_TIMEOUT"] = "60"
    _job(cli, tmp_path, "F", "exit 3")
    sneaky = shape.format(url=receiver.url.replace("json://", "json://x@"))
    if "second-at" not in shape:
        sneaky = shape.format(url=receiver.url)
    allowed = ["json://hooks.allowed.invalid"] + ([receiver.url] if "Evil" in shape else [])
    host_policy(tmp_path, f"[alerts]\ntargets = {json.dumps(allowed)}\n")
    assert _one_line(cli.utility("set", "F", f"alerts={sneaky}")).startswith("error: job 'F'")
    _insert(cli, "F", "alerts", sneaky)
    assert cli.runjob("./F.sh").code == 3
    assert receiver.got == []


@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)  # no store is read
def test_the_sender_checks_the_url_as_apprise_reads_it(cli, tmp_path, receiver):
    """What reaches the sending process is checked again there, with Apprise's parser."""
    import sys

    from dataflow.run.listeners.alerts import SENDER

    host_policy(tmp_path, '[alerts]\ntargets = ["json://hooks.allowed.invalid"]\n')
    sneaky = receiver.url.replace("json://", "json://x@") + "@hooks.allowed.invalid/"
    request = {"urls": [sneaky], "title": "t", "body": "b", "wait": 5, "bound": 20}
    sent = subprocess.run(
        [sys.executable, SENDER],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        env=cli.env,
        timeout=60,
        check=True,
    )
    assert json.loads(sent.stdout) == [
        0,
        "refused",
        f"alert target json://127.0.0.1 is not allowed by this host: add it to [alerts] targets in the host's policy {host_policy(tmp_path)}",
    ]
    assert receiver.got == []


@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)  # PostgreSQL's text holds no NUL
def test_a_nul_in_a_datasets_metadata_is_one_line_before_any_claim(cli, tmp_path):
    _job(cli, tmp_path)
    cli.ok("dml", "update dataset set hostname = 'a' || char(0) || 'b' where datasetid = 'src'")
    before = state(tmp_path)
    said = _one_line(cli.runjob("./G.sh"))
    assert "the value of src_hostname holds a NUL character" in said
    assert state(tmp_path) == before


def test_a_family_the_host_allows_never_brings_a_name_that_starts_programs(cli, tmp_path):
    _job(cli, tmp_path)
    host_policy(tmp_path, '[env]\nallow = ["SPARK_*", "*"]\n')
    cli.ok("set", "G", "ETL_BATCH=7", "region=eu")
    for name in ("SPARK_SUBMIT_OPTS", "JAVA_TOOL_OPTIONS", "LD_PRELOAD", "PATH"):
        said = _one_line(cli.utility("set", "G", f"{name}=x"))
        assert "a host allows it only by its exact name" in said, name
    host_policy(tmp_path, '[env]\nallow = ["SPARK_SUBMIT_OPTS", "ETL_*", "region"]\n')
    cli.ok("set", "G", "SPARK_SUBMIT_OPTS=-Xmx1g")  # the host named it: its choice


def test_a_spark_connect_address_carries_only_pysparks_own_parameters(cli, tmp_path):
    _job(cli, tmp_path, "S")
    host_policy(tmp_path, '[spark]\nremotes = ["sc://127.0.0.1"]\n')
    cli.ok("set", "S", "spark_remote=sc://127.0.0.1:15002/;use_ssl=true;token=abc")
    said = _one_line(
        cli.utility("set", "S", "spark_remote=sc://127.0.0.1:15002/;x-forwarded-for=1")
    )
    assert "the Spark Connect parameter 'x-forwarded-for' is not one of" in said


@pytest.mark.long
def test_a_password_goes_only_to_the_address_it_was_set_for(cli, tmp_path):
    """A writer who points a dataset elsewhere (or at a query) gets no password sent
    there: the job is refused before any claim, in one line, and nothing claimed."""
    passkey = {"PASSKEY": "plugh"}
    _job(cli, tmp_path, body='echo "$src_hostname $src_password" > seen')
    cli.ok("register-dataset", "src", "--hostname", "db.internal:5432", "--password-stdin",
           input="s3cret\n", env=passkey)  # fmt: skip
    assert cli.runjob("./G.sh", env=passkey).code == 0
    assert (tmp_path / "seen").read_text() == "db.internal:5432 s3cret\n"
    cli.ok("endjob", "G", "1", "RESUBMIT")
    for column, value in (("hostname", "attacker.example:5432"), ("tablename", "(select 1) q")):
        cli.ok("dml", f"update dataset set {column} = '{value}' where datasetid = 'src'")
        before = state(tmp_path)
        ran = cli.runjob("./G.sh", env=passkey)
        said = _one_line(ran)
        assert "the password of dataset 'src' does not open" in said and "s3cret" not in said
        assert state(tmp_path) == before
        cli.ok("dml", "update dataset set hostname = 'db.internal:5432', tablename = null")
    # the owner moves it, with the passkey: the password follows; without, refused
    refused = cli.utility("register-dataset", "src", "--hostname", "db2.internal:5432")
    assert "changing the address needs the passkey" in _one_line(refused)
    cli.ok("register-dataset", "src", "--hostname", "db2.internal:5432", env=passkey)
    assert cli.runjob("./G.sh", env=passkey).code == 0
    assert (tmp_path / "seen").read_text() == "db2.internal:5432 s3cret\n"


@pytest.mark.long
def test_rekey_seals_a_password_written_by_sql(cli, tmp_path):
    passkey = {"PASSKEY": "plugh"}
    _job(cli, tmp_path, body='echo "$src_password" > seen')
    token = cli.ok("crypt", "-e", "s3cret", env=passkey).out.strip()
    cli.ok("dml", f"update dataset set encryptedpass = '{token}' where datasetid = 'src'")
    (tmp_path / "k").write_text("plugh\n")
    cli.ok("rekey", "--old-file", "k", "--new-file", "k")
    (sealed,) = rows(tmp_path, "select encryptedpass from dataset where datasetid = 'src'")[0]
    assert sealed.startswith("df2$")
    cli.ok("dml", "update dataset set hostname = 'attacker.example' where datasetid = 'src'")
    assert "does not open" in _one_line(cli.runjob("./G.sh", env=passkey))
