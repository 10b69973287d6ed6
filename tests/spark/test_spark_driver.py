"""One Spark driver per drain: ``RunJob --all ./job.py`` for a job that defines
``def run(spark, job)`` starts one spark-submit whose driver claims chunk after chunk.
Each chunk keeps its own claim, lock, history row, log, failure and timeout; a driver
killed with SIGKILL leaves its chunks to be recovered."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path

import pytest

from dataflow import crypto
from dataflow.run.drain.driven import is_running
from support import rows, start_runjob, statuses, wait_for

PASSKEY, PASSWORD = "test-passkey", "s3cret-pass"
SPARK_ARGS = (
    "--master local[2] --conf spark.ui.enabled=false --conf spark.ui.showConsoleProgress=false "
    "--conf spark.log.level=ERROR"
)
JOB = """\
import os, time
import dataflow.spark as df

BAD, SLOW = os.environ.get("BAD_CHUNK"), os.environ.get("SLOW_CHUNK")


def run(spark, job):
    began = time.time()
    pool = spark.sparkContext.getLocalProperty("spark.scheduler.pool")
    splits = spark.conf.get("spark.sql.files.minPartitionNum")
    mode = spark.sparkContext.getConf().get("spark.scheduler.mode")
    n = int(job.dataid)
    if job.dataid == BAD:
        raise ValueError(f"chunk {job.dataid} cannot be {n} rows")
    if job.dataid == SLOW:  # a Spark job that would run for an hour: its timeout cancels it
        spark.range(1).rdd.map(lambda x: time.sleep(3600)).count()
    frame = spark.range(n).withColumnRenamed("id", "n")
    df.write(frame, job.output())
    written = df.read(spark, df.context().output()).count()  # df.context(): this chunk's
    time.sleep(float(os.environ.get("CHUNK_SLEEP", "0")))
    print(f"job: chunk {job.dataid} wrote {written} rows, password {job.input().password}")
    print(f"job: pool {pool} from {began:.3f} to {time.time():.3f}, splits {splits}, {mode}")


if __name__ == "__main__":  # not run by the one driver: it imports the script
    raise SystemExit("the __main__ block ran")
"""


def setup_job(cli, chunks: int, settings: dict[str, str], spark_args: str = SPARK_ARGS) -> Path:
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
        f"('job', 'OUT', 'dst', null), ('job', 'spark_args', null, '{spark_args}'){extra}",
    )
    cli.ok(
        "dml",
        "insert into datastatus (dataid, datasetid, jobid, locktype, modified, status) "
        f"with recursive s(n) as (select 1 union all select n + 1 from s where n < {chunks}) "
        "select n, 'src', 'feed', 'OUT', now(), 'READY' from s",
    )
    job = cli.cwd / "job.py"
    job.write_text(JOB)
    job.chmod(0o755)
    return data


def driver_logs(cli) -> list[Path]:
    return sorted((cli.cwd / "dataflow.db.d" / "logs" / "job").glob("driver.*.log"))


def chunk_log(cli, dataid: str, attempt: int = 1) -> str:
    return (cli.cwd / "dataflow.db.d" / "logs" / "job" / f"{dataid}.{attempt}.log").read_text()


def test_one_driver_drains_20_chunks_one_raises_one_times_out(cli):
    # the timeout covers every chunk, the first one's Spark warm-up included: generous
    # (30 s was not, under a load average of 15: chunk 1 timed out too)
    data = setup_job(cli, 20, {"timeout": "45"})
    env = {"PASSKEY": PASSKEY, "BAD_CHUNK": "7", "SLOW_CHUNK": "12"}
    result = cli.runjob("--all", "./job.py", env=env, timeout=900)
    assert result.code == 1, result  # some chunk FAILED
    failed = {"7": "ValueError: chunk 7 cannot be 7 rows", "12": "timeout after 45 s"}
    assert statuses(cli.cwd, "job") == {
        str(n): "FAILED" if str(n) in failed else "READY" for n in range(1, 21)
    }
    lines = [line for line in result.lines if re.search(r": job \d+ (READY|FAILED) ", line)]
    assert len(lines) == 20, result.out
    assert re.search(r": job: 18 READY, 2 FAILED in [\d.]+ s ", result.lines[-1]), result.out

    runs = rows(
        cli.cwd, "select dataid, attempt, status, reason, pid, logpath from run order by runid"
    )
    assert [r[0] for r in runs] == [str(n) for n in range(1, 21)]  # one history row each
    assert {r[4] for r in runs} != {None} and len({r[4] for r in runs}) == 1  # one process
    assert len(driver_logs(cli)) == 1  # one spark-submit for the whole drain
    for dataid, attempt, status, reason, _, logpath in runs:
        assert logpath.endswith(f"/job/{dataid}.1.log") and attempt == 1
        assert reason == failed.get(dataid), (dataid, reason)
        log = chunk_log(cli, dataid)
        if status == "READY":  # its own output, and only its own; the password masked
            assert f"job: chunk {dataid} wrote {dataid} rows, password ***\n" in log, log
            assert len(re.findall(r"job: chunk", log)) == 1 and PASSWORD not in log
    bad = chunk_log(cli, "7")
    assert "Traceback" in bad and 'job.py", line' in bad and bad.count("ValueError") == 2, bad
    assert "dataflow/run" not in bad  # the traceback starts at the job's own code
    assert "(Spark's own log of this drain: " in bad
    assert PASSWORD not in "".join(p.read_text() for p in driver_logs(cli))
    assert "the __main__ block ran" not in result.out + result.err
    # each chunk's data in its own folder, rewritten by that chunk only
    for n in (1, 6, 20):
        parts = list((data / "dst" / f"dataid={n}").glob("*.parquet"))
        assert parts, n
    assert not (data / "dst" / "dataid=7").exists()


def test_parallel_2_in_one_driver_and_a_killed_driver_is_recovered(cli):
    setup_job(cli, 16, {"retries": "1"})
    env = {**cli.env, "PASSKEY": PASSKEY, "CHUNK_SLEEP": "1.5"}
    drain = start_runjob(cli, "--parallel", "2", "./job.py", env=env)
    try:

        def two_running_after_some_ready() -> bool:
            done = rows(cli.cwd, "select count(*) from run where status = 'READY'")[0][0]
            live = rows(cli.cwd, "select count(*) from run where status = 'RUNNING'")[0][0]
            return done >= 6 and live == 2

        wait_for(two_running_after_some_ready, timeout=600, what="a drain in full swing")
        pids = {r[0] for r in rows(cli.cwd, "select pid from run")}
        assert len(pids) == 1  # every chunk claimed by one process: the driver
        (driver,) = pids
        assert "sparkmain.py" in Path(f"/proc/{driver}/cmdline").read_text()
        os.kill(driver, signal.SIGKILL)
        out, err = drain.communicate(timeout=120)
    finally:
        if drain.poll() is None:
            drain.kill()
    assert drain.returncode == 1, out + err
    assert re.search(
        r"error: the Spark driver of job exited with code 137 \(SIGKILL\) with 2 chunks RUNNING",
        err,
    ), err
    running = [r[0] for r in rows(cli.cwd, "select dataid from run where status = 'RUNNING'")]
    assert len(running) == 2

    recovered = cli.ok("recover")
    assert "2 abandoned chunks recovered" in recovered.out
    for dataid in running:
        first = rows(cli.cwd, "select status, reason from run where dataid=? and attempt=1", dataid)
        assert first == [("FAILED", "abandoned")]

    again = cli.runjob("--parallel", "2", "./job.py", env={"PASSKEY": PASSKEY}, timeout=900)
    assert again.code == 0, again
    assert set(statuses(cli.cwd, "job").values()) == {"READY"}
    assert len(statuses(cli.cwd, "job")) == 16
    for dataid in running:  # retried (setting retries 1): attempt 2, its own log
        assert f"job: chunk {dataid} wrote {dataid} rows" in chunk_log(cli, dataid, 2)

    # --parallel 2: two chunks at once, each in a scheduler pool of its own
    spans = []
    for dataid, attempt in rows(cli.cwd, "select dataid, attempt from run where status='READY'"):
        pool, began, ended = re.search(
            r"job: pool (\S+) from ([\d.]+) to ([\d.]+)", chunk_log(cli, dataid, attempt)
        ).groups()
        spans.append((float(began), float(ended), pool))
    at_once = [[s for s in spans if s[0] <= t[0] < s[1]] for t in spans]
    assert max(len(spanning) for spanning in at_once) == 2, spans  # two at once, never three
    for spanning in at_once:  # chunks running at once are in different pools
        assert len({pool for _, _, pool in spanning}) == len(spanning), spans
    assert {pool for _, _, pool in spans} == {"chunk0", "chunk1"}
    assert len(driver_logs(cli)) == 2  # one driver per drain
    # a scan is split in four tasks a core at least (local[2]), unless the job says
    assert "splits 8, FAIR\n" in chunk_log(cli, running[0], 2)


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
def test_one_driver_drains_a_shared_store(cli):
    """On PostgreSQL the driver claims through its own keeper, forked from the driver's
    Python (which runs Spark's threads): every chunk once, by the one driver."""
    chosen = " --conf spark.sql.files.minPartitionNum=3 --conf spark.scheduler.mode=FIFO"
    setup_job(cli, 6, {}, SPARK_ARGS + chosen)
    done = cli.runjob("--parallel", "2", "./job.py", env={"PASSKEY": PASSKEY}, timeout=900)
    assert done.code == 0, done
    assert statuses(cli.cwd, "job") == {str(n): "READY" for n in range(1, 7)}
    runs = rows(cli.cwd, "select dataid, attempt, pid from run")
    assert sorted(int(r[0]) for r in runs) == list(range(1, 7)) and {r[1] for r in runs} == {1}
    assert len({r[2] for r in runs}) == 1  # every chunk claimed by the driver
    (log,) = rows(cli.cwd, "select logpath from run where dataid = '1'")[0]
    assert "splits 3, FIFO\n" in Path(log).read_text()  # the job's own choices stand


def test_one_chunk_calls_the_entry_point_and_sigterm_ends_the_driver(cli):
    setup_job(cli, 8, {})
    env = {"PASSKEY": PASSKEY}
    dry = cli.runjob("--all", "--dry-run", "./job.py", env=env)
    assert dry.code == 0 and dry.lines[0].startswith("would claim dataid 1 for job and run: ")
    assert "sparkmain.py chunk ./job.py" in dry.lines[0] and PASSWORD not in dry.out
    assert not driver_logs(cli) and rows(cli.cwd, "select count(*) from run") == [(0,)]

    single = cli.runjob("./job.py", env=env, timeout=300)  # one chunk: one spark-submit of its own
    assert single.code == 0, single
    assert "job: chunk 1 wrote 1 rows, password ***" in single.lines  # echoed, as any job's
    assert (
        single.lines[-1] == "1 rows updated to READY for job and 1 1 IN file-local locks released"
    )
    assert not driver_logs(cli)

    drain = start_runjob(cli, "--parallel", "2", "./job.py", env={**env, "CHUNK_SLEEP": "30"})
    try:
        running = "select count(*) from run where status = 'RUNNING'"
        wait_for(lambda: rows(cli.cwd, running) == [(2,)], timeout=300, what="two chunks running")
        (driver,) = {r[0] for r in rows(cli.cwd, "select pid from run where status='RUNNING'")}
        time.sleep(1)  # both inside their sleep
        drain.send_signal(signal.SIGTERM)
        out, err = drain.communicate(timeout=60)
    finally:
        if drain.poll() is None:
            drain.kill()
    assert drain.returncode == 143, out + err
    ended = rows(
        cli.cwd, "select dataid, status, signal, reason from run where dataid in ('2', '3')"
    )
    assert sorted(ended) == [
        (dataid, "FAILED", "SIGTERM", "interrupted by SIGTERM") for dataid in ("2", "3")
    ]
    assert statuses(cli.cwd, "job") == {"1": "READY", "2": "FAILED", "3": "FAILED"}
    assert not is_running(driver)  # RunJob waited for the driver's records
    assert re.search(r": job: 0 READY, 2 FAILED in ", out), out


def test_a_driver_that_cannot_start_claims_nothing(cli):
    setup_job(cli, 3, {})
    (cli.cwd / "job.py").write_text("import no_such_module\n\n\ndef run(spark, job):\n    pass\n")
    result = cli.runjob("--all", "./job.py", env={"PASSKEY": PASSKEY}, timeout=300)
    assert result.code == 2, result
    assert re.fullmatch(
        r"error: the Spark driver of job could not start: \./job\.py: ModuleNotFoundError: "
        r"No module named 'no_such_module'; its log: \S+/logs/job/driver\.\S+\.log\n",
        result.err,
    ), result.err
    assert result.out == ""
    assert rows(cli.cwd, "select count(*) from run") == [(0,)]
    assert statuses(cli.cwd, "job") == {}
    (log,) = driver_logs(cli)
    assert "Traceback" in log.read_text() and PASSWORD not in log.read_text()


def test_an_idle_cron_tick_starts_no_driver(cli):
    """Nothing claimable: ``RunJob --all ./job.py`` says what a shell job says and starts
    no Spark driver (no JVM, no driver log), however often cron asks."""
    setup_job(cli, 1, {})
    cli.ok("dml", "update datastatus set status = 'RUNNING' where jobid = 'feed'")
    (cli.cwd / "job.sh").write_text("#!/bin/sh\nexit 0\n")
    (cli.cwd / "job.sh").chmod(0o755)
    said = {}
    for script in ("./job.py", "./job.sh"):
        result = cli.runjob("--all", script, env={"PASSKEY": PASSKEY}, timeout=300)
        assert result.code == 0, result
        said[script] = re.sub(r"^.*\d{4}: ", "", result.out + result.err, flags=re.MULTILINE)
    assert said["./job.py"] == said["./job.sh"]
    assert "no suitable data" in said["./job.py"]
    assert driver_logs(cli) == []

    # once a chunk is there, the drain runs it in its driver
    cli.ok("dml", "update datastatus set status = 'READY' where jobid = 'feed'")
    result = cli.runjob("--all", "./job.py", env={"PASSKEY": PASSKEY}, timeout=300)
    assert result.code == 0, result
    assert statuses(cli.cwd, "job") == {"1": "READY"}
    assert len(driver_logs(cli)) == 1
