"""RunJob with a .py job on YARN and Kubernetes, without a cluster: a stand-in spark-submit
(and ``yarn``) that prints what Spark 4 and Hadoop 3 print, records how it was called,
and exits or hangs as the cluster would. RunJob, the store and the signals are real;
what is checked is RunJob's side: the history, the exit code, the kill on the cluster."""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path

import pytest
from spark_output import APP, K8S, K8S_FAILED, POD, YARN_STATUS

from support import Cli, history, start_runjob, statuses, wait_for

# one program plays spark-submit and yarn: it logs its argv, then acts out FAKE_PLAY
FAKE = f"""#!{sys.executable}
import json, os, sys, time
here = os.environ["FAKE_DIR"]
args = sys.argv[1:]
with open(os.path.join(here, "calls"), "a") as calls:
    calls.write(json.dumps([os.path.basename(sys.argv[0]), *args]) + "\\n")

def say(name):
    sys.stderr.write(open(os.path.join(here, name)).read())
    sys.stderr.flush()

if "--kill" in args or "-kill" in args:
    print("killed", args[-1])
    sys.exit(0)
if "--status" in args or "-status" in args:
    count = len(open(os.path.join(here, "calls")).read().splitlines())
    answer = os.path.join(here, f"status.{{count:02d}}")  # the answer to call number count
    if not os.path.exists(answer):  # the last one, again
        answer = os.path.join(here, max(n for n in os.listdir(here) if n.startswith("status.")))
    sys.stdout.write(open(answer).read())
    sys.exit(0)
say("submit")
open(os.path.join(here, "submitted"), "w").close()
play = os.environ["FAKE_PLAY"]
if play == "hang":  # RUNNING at once (a busy machine's timeout sees it), then each second
    while True:
        sys.stderr.write("INFO Client: Application report for {APP} (state: RUNNING)\\n")
        sys.stderr.flush()
        time.sleep(1)
sys.exit(int(play))
"""

YARN_SUBMITTED = f"""\
26/11/23 19:20:01 INFO Client: Requesting a new application from cluster with 3 NodeManagers
26/11/23 19:20:02 INFO Client: Submitting application {APP} to ResourceManager
26/11/23 19:20:02 INFO YarnClientImpl: Submitted application {APP}
26/11/23 19:20:03 INFO Client: Application report for {APP} (state: ACCEPTED)
"""
YARN_FAILED_END = f"""\
26/11/23 19:21:14 INFO Client: Application report for {APP} (state: FINISHED)
26/11/23 19:21:14 INFO Client: 
\t diagnostics: User application exited with status 1
\t final status: FAILED
Exception in thread "main" org.apache.spark.SparkException: Application {APP} finished with failed status
"""  # noqa: W291
K8S_DEPLOYED = (
    "26/11/23 19:30:02 INFO Client: Deployed Spark application daily-totals-7 with application "
    f"ID spark-5e2f0c9d8a7b4c3e and submission ID {POD} into Kubernetes\n"
)
JOB = "from dataflow.spark import context\nprint('never runs here', context().dataid)\n"


class Cluster:
    """The stand-in's folder: what it will say, and how it was called."""

    def __init__(self, cli: Cli, folder: Path):
        self.cli, self.folder = cli, folder
        for home, tool in (("spark", "spark-submit"), ("hadoop", "yarn")):
            path = folder / home / "bin" / tool
            path.parent.mkdir(parents=True)
            path.write_text(FAKE)
            path.chmod(0o755)
        cli.env.update(
            SPARK_HOME=str(folder / "spark"),
            HADOOP_HOME=str(folder / "hadoop"),
            FAKE_DIR=str(folder),
            DATAFLOW_SPARK_ARGS="",
        )

    def play(self, submit: str, then: str, *statuses: str) -> None:
        (self.folder / "submit").write_text(submit)
        for number, answer in enumerate(statuses, 2):  # call 1 is the submission
            (self.folder / f"status.{number:02d}").write_text(answer)
        self.cli.env["FAKE_PLAY"] = then

    def calls(self) -> list[list[str]]:
        path = self.folder / "calls"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
def cli(tmp_path):
    """The plain ``cli``: no real spark-submit here, so no JVM options to warm up."""
    return Cli(tmp_path)


@pytest.fixture
def cluster(cli, tmp_path) -> Cluster:
    cli.ok("createtables")
    cli.ok("dml", "insert into dataset (datasetid) values ('raw'), ('totals')")
    cli.ok(
        "dml",
        "insert into job (jobid, itemtype, datasetid) values "
        "('daily', 'IN', 'raw'), ('daily', 'OUT', 'totals')",
    )
    cli.ok("dml", "insert into datastatus values ('raw', 'feed', '7', 'OUT', 'READY', now())")
    job = tmp_path / "daily.py"
    job.write_text(JOB)
    job.chmod(0o755)
    return Cluster(cli, tmp_path / "cluster")


def spark_args(cli: Cli, value: str, timeout: str | None = None) -> None:
    cli.ok(
        "dml",
        f"insert into job (jobid, itemtype, itemvalue) values ('daily', 'spark_args', '{value}')",
    )
    if timeout:
        cli.ok(
            "dml",
            f"insert into job (jobid, itemtype, itemvalue) values ('daily', 'timeout', '{timeout}')",
        )


def logged(tmp_path: Path, text: str) -> None:
    """Wait until the run's log holds ``text`` (RunJob reads the output as it logs it)."""
    log = tmp_path / "dataflow.db.d" / "logs" / "daily" / "7.1.log"
    wait_for(lambda: log.exists() and text in log.read_text(), what=text)


YARN_CLUSTER = "--master yarn --deploy-mode cluster"
NO_WAIT = " --conf spark.yarn.submit.waitAppCompletion=false"


def test_a_failed_yarn_application_ends_failed_and_is_named_in_the_history(cli, cluster, tmp_path):
    spark_args(cli, YARN_CLUSTER)
    cluster.play(YARN_SUBMITTED + YARN_FAILED_END, "1")
    result = cli.runjob("./daily.py")
    assert result.code == 1, result
    assert statuses(tmp_path, "daily") == {"7": "FAILED"}
    assert history(tmp_path, "daily") == [
        ("7", 1, "FAILED", 1, None, f"exit code 1; yarn application {APP} (FAILED)")
    ]
    (submitted,) = cluster.calls()
    assert "spark.yarn.appMasterEnv.dataid=7" in submitted
    assert "spark.yarn.appMasterEnv.raw_itemtype=IN" in submitted
    assert submitted.index("spark.yarn.appMasterEnv.dataid=7") < submitted.index("./daily.py")


def test_sigterm_of_runjob_kills_the_yarn_application(cli, cluster, tmp_path):
    spark_args(cli, YARN_CLUSTER)
    cluster.play(YARN_SUBMITTED, "hang")
    runjob = start_runjob(cli, "./daily.py")
    logged(tmp_path, "(state: RUNNING)")  # read by RunJob as it logs it
    runjob.send_signal(signal.SIGTERM)
    out, err = runjob.communicate(timeout=60)
    assert runjob.returncode == 128 + signal.SIGTERM, (out, err)
    assert cluster.calls()[-1] == ["yarn", "application", "-kill", APP]
    (run,) = history(tmp_path, "daily")
    assert run[2:] == (
        "FAILED",
        None,
        "SIGTERM",
        f"interrupted by SIGTERM; yarn application {APP} (RUNNING); killed on the cluster",
    )


def test_a_timeout_while_polling_kills_the_application(cli, cluster, tmp_path):
    # 10 s: the first poll comes once spark-submit has returned, which on a machine busy
    # with other tests (these run at nice 19) can take seconds
    spark_args(cli, YARN_CLUSTER + NO_WAIT, timeout="10")
    running = YARN_STATUS.format(state="RUNNING", final="UNDEFINED", finish=0)
    cluster.play(YARN_SUBMITTED, "0", running)
    result = cli.runjob("./daily.py", timeout=60)
    assert result.code == 124, result
    calls = cluster.calls()
    assert calls[0][0] == "spark-submit"
    assert ["yarn", "application", "-status", APP] in calls
    assert calls[-1] == ["yarn", "application", "-kill", APP]
    (run,) = history(tmp_path, "daily")
    assert run[2] == "FAILED"
    assert run[5] == f"timeout after 10 s; yarn application {APP} (RUNNING); killed on the cluster"


@pytest.mark.parametrize(("final", "status"), [("SUCCEEDED", "READY"), ("FAILED", "FAILED")])
def test_without_waiting_spark_submit_the_application_is_polled_to_its_end(
    cli, cluster, tmp_path, final, status
):
    spark_args(cli, YARN_CLUSTER + NO_WAIT)
    running = YARN_STATUS.format(state="RUNNING", final="UNDEFINED", finish=0)
    ended = YARN_STATUS.format(state="FINISHED", final=final, finish=1763925702000)
    cluster.play(YARN_SUBMITTED, "0", running, ended)
    result = cli.runjob("./daily.py", timeout=60)
    assert result.code == (0 if status == "READY" else 1), result
    assert statuses(tmp_path, "daily") == {"7": status}
    (run,) = history(tmp_path, "daily")
    reason = f"yarn application {APP} ({final})"
    if status == "FAILED":
        reason = f"exit code 1; {reason}"
    assert run[2:] == (status, 0 if status == "READY" else 1, None, reason)
    assert [c[:3] for c in cluster.calls()[1:]] == [["yarn", "application", "-status"]] * 2


def test_a_kubernetes_driver_that_failed_fails_the_chunk_though_spark_submit_exits_0(
    cli, cluster, tmp_path
):
    spark_args(cli, f"--master {K8S} --deploy-mode cluster --conf spark.kubernetes.namespace=spark")
    cluster.play(K8S_FAILED, "0")
    result = cli.runjob("./daily.py")
    assert result.code == 3, result
    assert history(tmp_path, "daily") == [
        ("7", 1, "FAILED", 3, None, f"exit code 3; kubernetes submission {POD} (Failed)")
    ]


def test_sigterm_of_runjob_kills_the_kubernetes_driver(cli, cluster, tmp_path):
    spark_args(cli, f"--master {K8S} --deploy-mode cluster --conf spark.kubernetes.namespace=spark")
    cluster.play(K8S_DEPLOYED, "hang")
    runjob = start_runjob(cli, "./daily.py")
    logged(tmp_path, "into Kubernetes")
    runjob.send_signal(signal.SIGTERM)
    out, err = runjob.communicate(timeout=60)
    assert runjob.returncode == 128 + signal.SIGTERM, (out, err)
    assert cluster.calls()[-1] == [
        "spark-submit",
        "--master",
        K8S,
        "--conf",
        "spark.kubernetes.namespace=spark",
        "--kill",
        POD,
    ]
    (run,) = history(tmp_path, "daily")
    assert run[5] == f"interrupted by SIGTERM; kubernetes submission {POD}; killed on the cluster"


def test_a_kill_that_cannot_run_is_said_in_the_history(cli, cluster, tmp_path):
    spark_args(cli, YARN_CLUSTER, timeout="2")
    cluster.play(YARN_SUBMITTED, "hang")
    cli.env["HADOOP_HOME"] = str(tmp_path / "no-hadoop")
    result = cli.runjob("./daily.py", timeout=60)
    assert result.code == 124, result
    (run,) = history(tmp_path, "daily")
    assert run[5] == (
        f"timeout after 2 s; yarn application {APP} (RUNNING); not killed on the cluster: "
        f"{tmp_path}/no-hadoop/bin/yarn: No such file or directory"
    )


def test_standalone_cluster_mode_is_refused_before_the_claim(cli, cluster, tmp_path):
    spark_args(cli, "--master spark://127.0.0.1:7077 --deploy-mode cluster")
    result = cli.runjob("./daily.py")
    assert result.code == 2
    assert result.out == ""
    assert result.err.startswith(
        "error: cannot run ./daily.py through spark-submit: a standalone Spark master "
        "(spark://127.0.0.1:7077) cannot run a Python driver in cluster deploy mode"
    )
    assert len(result.err.splitlines()) == 1
    assert statuses(tmp_path, "daily") == {}
    assert cluster.calls() == []
