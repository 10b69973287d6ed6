"""Jobs run as thin Spark Connect clients (``spark_remote`` setting or ``$SPARK_REMOTE``)
against a real Spark Connect server: no spark-submit and no Java on RunJob's side; with
``def run(spark, job)`` one client drains every chunk over one session, each chunk with
its own claim, lock, history row, log and failure."""

from __future__ import annotations

import os
import re
import signal
import socket
from pathlib import Path

import pytest

from dataflow import crypto
from support import rows, start_runjob, statuses, wait_for

PASSKEY, PASSWORD, TOKEN = "test-passkey", "s3cret-pass", "tok-9f8e7d6c5b4a"
NO_JAVA = {"JAVA_HOME": "/nonexistent-java"}  # spark-submit's path would stop at this
SLEEP_QUERY = "reflect('java.lang.Thread', 'sleep', bigint(600000))"  # 10 min on the server
DRAIN_JOB = f"""\
import os, time
import dataflow.spark as df

BAD, SLOW = os.environ.get("BAD_CHUNK"), os.environ.get("SLOW_CHUNK")


def run(spark, job):
    n = int(job.dataid)
    if job.dataid == BAD:
        raise ValueError(f"chunk {{job.dataid}} cannot be {{n}} rows")
    if job.dataid == SLOW:  # an operation the server would run for 10 minutes
        spark.range(1).selectExpr("{SLEEP_QUERY}").collect()
    df.write(spark.range(n).withColumnRenamed("id", "n"), job.output())
    written = df.read(spark, df.context().output()).count()
    time.sleep(float(os.environ.get("CHUNK_SLEEP", "0")))
    kind = type(spark).__module__
    print(f"job: chunk {{job.dataid}} wrote {{written}} rows in {{kind}}, password {{job.input().password}}")
"""
PLAIN_JOB = f"""\
import os, sys
from dataflow import spark as df

ctx = df.context()
spark = ctx.session()
if os.environ.get("BAD_CHUNK") == ctx.dataid:
    raise ValueError(f"chunk {{ctx.dataid}} is bad")
if os.environ.get("SLOW_CHUNK") == ctx.dataid:
    spark.range(1).selectExpr("{SLEEP_QUERY}").collect()
df.write(spark.range(int(ctx.dataid) * 10).withColumnRenamed("id", "n"), ctx.output())
rows = df.read(spark, ctx.output()).count()
print(f"plain: chunk {{ctx.dataid}}: {{rows}} rows through {{type(spark).__module__}}")
"""


def setup_job(cli, chunks: int, settings: dict[str, str], script: str = DRAIN_JOB) -> Path:
    data = cli.cwd / "data"
    secret = crypto.encrypt(PASSWORD, PASSKEY)
    cli.ok("createtables")
    cli.ok(
        "dml",
        "insert into dataset values "
        f"('src', '', 'parquet', '{data}', 'src', 'etl', '{secret}'), "
        f"('dst', '', 'parquet', '{data}', 'dst', '', '')",
    )
    extra = "".join(f", ('job', '{k}', null, '{v}')" for k, v in settings.items())
    cli.ok(
        "dml",
        "insert into job (jobid, itemtype, datasetid, itemvalue) values ('job', 'IN', 'src', null), "
        f"('job', 'OUT', 'dst', null){extra}",
    )
    cli.ok(
        "dml",
        "insert into datastatus (dataid, datasetid, jobid, locktype, modified, status) "
        f"with recursive s(n) as (select 1 union all select n + 1 from s where n < {chunks}) "
        "select n, 'src', 'feed', 'OUT', now(), 'READY' from s",
    )
    job = cli.cwd / "job.py"
    job.write_text(script)
    job.chmod(0o755)
    return data


def logs_dir(cli) -> Path:
    return cli.cwd / "dataflow.db.d" / "logs" / "job"


def chunk_log(cli, dataid: str, attempt: int = 1) -> str:
    return (logs_dir(cli) / f"{dataid}.{attempt}.log").read_text()


def no_job_left_running(server) -> None:
    wait_for(lambda: server.running_jobs() == [], timeout=60, what="no job left on the server")


def test_a_plain_job_is_a_connect_client_and_spark_remote_wins(cli, connect_server):
    # the stored setting names a server that is down; the operator's $SPARK_REMOTE wins
    data = setup_job(cli, 2, {"spark_remote": "sc://127.0.0.1:9"}, PLAIN_JOB)
    env = {**NO_JAVA, "PASSKEY": PASSKEY, "SPARK_REMOTE": connect_server.url}
    result = cli.runjob("./job.py", env=env, timeout=300)
    assert result.code == 0, result
    assert "plain: chunk 1: 10 rows through pyspark.sql.connect.session" in result.lines
    assert (
        result.lines[-1] == "1 rows updated to READY for job and 1 1 IN file-local locks released"
    )
    assert list((data / "dst" / "dataid=1").glob("*.parquet"))
    (command,) = rows(cli.cwd, "select command from run")[0]
    assert "spark-submit" not in command and "sparkmain.py client ./job.py" in command
    bad = cli.runjob("./job.py", env={**env, "BAD_CHUNK": "2"}, timeout=300)
    assert bad.code == 1, bad
    assert rows(cli.cwd, "select reason from run where dataid = '2'") == [
        ("ValueError: chunk 2 is bad (exit code 1)",)
    ]
    log = (cli.cwd / "dataflow.db.d" / "logs" / "job" / "2.1.log").read_text()
    assert 'Traceback (most recent call last):\n  File "' in log and 'job.py", line 7' in log
    assert "runpy" not in log and "sparkmain" not in log  # as `python job.py` would say it

    # without $SPARK_REMOTE, the setting's server: down, so nothing is claimed
    down = cli.runjob("./job.py", env={**NO_JAVA, "PASSKEY": PASSKEY}, timeout=60)
    assert down.code == 2 and down.out == "", down
    assert down.err == (
        "error: cannot run ./job.py as a Spark Connect client: the Spark Connect server "
        "sc://127.0.0.1:9 does not answer (nothing accepts connections at 127.0.0.1:9): start "
        "it (sbin/start-connect-server.sh), or correct $SPARK_REMOTE / the job setting "
        "spark_remote\n"
    )
    assert statuses(cli.cwd, "job") == {"1": "READY", "2": "FAILED"}


def test_one_client_drains_every_chunk_one_raises_one_times_out(cli, connect_server):
    data = setup_job(cli, 8, {"spark_remote": connect_server.url, "timeout": "40"})
    env = {**NO_JAVA, "PASSKEY": PASSKEY, "BAD_CHUNK": "3", "SLOW_CHUNK": "6"}
    result = cli.runjob("--parallel", "2", "./job.py", env=env, timeout=600)
    assert result.code == 1, result
    failed = {"3": "ValueError: chunk 3 cannot be 3 rows", "6": "timeout after 40 s"}
    assert statuses(cli.cwd, "job") == {
        str(n): "FAILED" if str(n) in failed else "READY" for n in range(1, 9)
    }
    assert re.search(r": job: 6 READY, 2 FAILED in [\d.]+ s ", result.lines[-1]), result.out
    runs = rows(cli.cwd, "select dataid, status, reason, pid, command from run order by runid")
    assert sorted(r[0] for r in runs) == [str(n) for n in range(1, 9)]  # one row per chunk
    assert len({r[3] for r in runs}) == 1  # one process claimed them all: the client
    assert all("sparkmain.py drain ./job.py" in r[4] and "spark-submit" not in r[4] for r in runs)
    for dataid, status, reason, _, _ in runs:
        assert reason == failed.get(dataid), (dataid, reason)
        log = chunk_log(cli, dataid)
        if status == "READY":  # its own output only, through Connect, the password masked
            line = f"job: chunk {dataid} wrote {dataid} rows in pyspark.sql.connect.session"
            assert f"{line}, password ***\n" in log and log.count("job: chunk") == 1, log
            assert list((data / "dst" / f"dataid={dataid}").glob("*.parquet"))
    assert "ValueError: chunk 3 cannot be 3 rows" in chunk_log(cli, "3")
    assert not (data / "dst" / "dataid=3").exists()
    assert len(list(logs_dir(cli).glob("driver.*.log"))) == 1
    no_job_left_running(connect_server)  # the timed-out chunk's operation was interrupted


def test_kill_9_of_the_client_mid_drain_leaves_its_chunks_recoverable(cli, connect_server):
    setup_job(cli, 10, {"retries": "1"})
    env = {
        **cli.env,
        **NO_JAVA,
        "PASSKEY": PASSKEY,
        "CHUNK_SLEEP": "2",
        "SPARK_REMOTE": connect_server.url,
    }
    drain = start_runjob(cli, "--parallel", "2", "./job.py", env=env)
    try:

        def two_running_after_some_ready() -> bool:
            done = rows(cli.cwd, "select count(*) from run where status = 'READY'")[0][0]
            live = rows(cli.cwd, "select count(*) from run where status = 'RUNNING'")[0][0]
            return done >= 2 and live == 2

        wait_for(two_running_after_some_ready, timeout=300, what="a drain in full swing")
        (client,) = {r[0] for r in rows(cli.cwd, "select pid from run")}
        assert "sparkmain.py" in Path(f"/proc/{client}/cmdline").read_text()
        os.kill(client, signal.SIGKILL)
        out, err = drain.communicate(timeout=120)
    finally:
        if drain.poll() is None:
            drain.kill()
    assert drain.returncode == 1, out + err
    assert re.search(
        r"error: the Spark Connect client of job was killed by SIGKILL with 2 chunks RUNNING", err
    ), err
    running = [r[0] for r in rows(cli.cwd, "select dataid from run where status = 'RUNNING'")]
    assert len(running) == 2
    recovered = cli.ok("recover")
    assert "2 abandoned chunks recovered" in recovered.out
    again = cli.runjob("--all", "./job.py", env={**env, "CHUNK_SLEEP": "0"}, timeout=600)
    assert again.code == 0, again
    assert statuses(cli.cwd, "job") == {str(n): "READY" for n in range(1, 11)}
    for dataid in running:
        assert "wrote" in chunk_log(cli, dataid, 2)


def test_sigterm_interrupts_the_clients_operations_on_the_server(cli, connect_server):
    setup_job(cli, 1, {"spark_remote": connect_server.url}, PLAIN_JOB)
    env = {**cli.env, **NO_JAVA, "PASSKEY": PASSKEY, "SLOW_CHUNK": "1"}
    job = start_runjob(cli, "./job.py", env=env)
    try:
        wait_for(lambda: connect_server.running_jobs(), timeout=120, what="the chunk's query")
        job.send_signal(signal.SIGTERM)
        out, err = job.communicate(timeout=60)
    finally:
        if job.poll() is None:
            job.kill()
    assert job.returncode == 143, out + err
    assert rows(cli.cwd, "select status, reason from run") == [("FAILED", "interrupted by SIGTERM")]
    no_job_left_running(connect_server)  # not left to sleep its 10 minutes there


def test_unreachable_server_and_dry_run_never_show_the_token(cli):
    setup_job(cli, 2, {})
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        free_port = probe.getsockname()[1]
    url = f"sc://127.0.0.1:{free_port}/;token={TOKEN};user_id=etl"
    env = {**NO_JAVA, "PASSKEY": PASSKEY, "SPARK_REMOTE": url}
    dry = cli.runjob("--all", "--dry-run", "./job.py", env=env)
    assert dry.code == 0, dry
    assert re.fullmatch(
        r"would claim dataid 1 for job and run: \S+python\S* \S+/sparkmain\.py chunk \./job\.py",
        dry.lines[0],
    ), dry.lines[0]
    masked = f"sc://127.0.0.1:{free_port}/;token=***;user_id=etl"
    assert dry.lines[1] == f"as a Spark Connect client of {masked}"
    assert f"SPARK_REMOTE='{masked}'" in dry.lines and TOKEN not in dry.out + dry.err
    for args in (["--all", "./job.py"], ["./job.py"]):
        down = cli.runjob(*args, env=env, timeout=60)
        assert down.code == 2 and down.out == "", down
        assert down.err.startswith("error: ") and down.err.count("\n") == 1, down.err
        assert f"the Spark Connect server {masked} does not answer" in down.err
        assert TOKEN not in down.err and "Traceback" not in down.err
    bad = cli.runjob("./job.py", env={**env, "SPARK_REMOTE": "http://x:1"}, timeout=60)
    assert bad.err == (
        "error: cannot run ./job.py as a Spark Connect client: 'http://x:1' is not a Spark "
        "Connect address (sc://host:15002)\n"
    )
    assert rows(cli.cwd, "select count(*) from run") == [(0,)]  # nothing claimed


JDBC_JOB = """\
from dataflow import spark as df

ctx = df.context()
spark = ctx.session()
n = int(ctx.dataid)
frame = spark.range(n).selectExpr("id + 100 AS id", "'new' AS note")
df.write(frame, ctx.output())  # the chunk emptied first, then appended
print(f"jdbc: chunk {ctx.dataid} has {df.read(spark, ctx.output()).count()} rows")
"""


def test_a_jdbc_chunk_is_replaced_through_connect(cli, connect_server, postgres):
    postgres.sql(
        "DROP TABLE IF EXISTS cx_tgt; CREATE TABLE cx_tgt (id int, note text, shard int);"
        "INSERT INTO cx_tgt VALUES (1, 'old', 2), (2, 'old', 2), (3, 'keep', 9)"
    )
    postgres.sql("DROP TABLE IF EXISTS cx_fresh")
    secret = crypto.encrypt(postgres.env["PGPASSWORD"], PASSKEY)
    cli.ok("createtables")
    database, user = postgres.env["PGDATABASE"], postgres.env["PGUSER"]
    cli.ok(
        "dml",
        "insert into dataset values ('src', '', 'parquet', '/nowhere', 'src', '', ''), "
        f"('cx_tgt', '{postgres.hostname}', '{database}', 'public', 'cx_tgt', '{user}', "
        f"'{secret}'), ('cx_fresh', '{postgres.hostname}', '{database}', '', 'cx_fresh', "
        f"'{user}', '{secret}')",
    )
    for job, table in (("tojdbc", "cx_tgt"), ("fresh", "cx_fresh")):
        cli.ok(
            "dml",
            "insert into job (jobid, itemtype, datasetid, itemvalue) values "
            f"('{job}', 'IN', 'src', null), ('{job}', 'OUT', '{table}', null), "
            f"('{job}', 'dataid_column', null, 'shard'), "
            f"('{job}', 'spark_remote', null, '{connect_server.url}')",
        )
        (cli.cwd / f"{job}.py").write_text(JDBC_JOB)
    cli.ok(
        "dml",
        "insert into datastatus (dataid, datasetid, jobid, locktype, modified, status) values "
        "('2', 'src', 'feed', 'OUT', now(), 'READY'), ('3', 'src', 'feed', 'OUT', now(), 'READY')",
    )
    env = {**NO_JAVA, "PASSKEY": PASSKEY}
    result = cli.runjob("--all", "./tojdbc.py", env=env, timeout=300)
    assert result.code == 0, result
    table = postgres.sql("SELECT shard, id, note FROM cx_tgt ORDER BY shard, id")
    assert table.splitlines() == [
        "2|100|new",
        "2|101|new",
        "3|100|new",
        "3|101|new",
        "3|102|new",
        "9|3|keep",
    ]
    assert "jdbc: chunk 2 has 2 rows" in (
        logs := "".join(
            p.read_text() for p in (cli.cwd / "dataflow.db.d" / "logs" / "tojdbc").glob("*.log")
        )
    )
    assert postgres.env["PGPASSWORD"] not in logs
    fresh = cli.runjob("./fresh.py", env=env, timeout=300)  # a missing table: Spark creates it
    assert fresh.code == 0, fresh
    assert postgres.sql("SELECT shard, count(*) FROM cx_fresh GROUP BY shard") == "2|2\n"


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
def test_one_client_drains_a_shared_store(cli, connect_server):
    """A drain's Spark Connect client on a PostgreSQL store: its keeper is forked before
    gRPC starts (a keeper forked from a process with gRPC's threads died at once, and the
    drain failed with "cannot hold a run lock")."""
    setup_job(cli, 4, {"spark_remote": connect_server.url})
    result = cli.runjob("--all", "./job.py", env={**NO_JAVA, "PASSKEY": PASSKEY}, timeout=600)
    assert result.code == 0, result
    assert statuses(cli.cwd, "job") == {str(n): "READY" for n in range(1, 5)}
    assert rows(cli.cwd, "select count(distinct pid), count(*) from run") == [(1, 4)]
