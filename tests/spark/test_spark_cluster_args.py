"""Spark on a cluster, without one: the exact argv of a .py job on YARN and Kubernetes, the
commands that kill it or ask for its state, and what RunJob reads from spark-submit's
output (lines as Spark 4 and Hadoop 3 print them)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from spark_output import (
    APP,
    K8S,
    K8S_FAILED,
    K8S_STATUS,
    POD,
    STANDALONE_CLIENT,
    YARN_FAILED,
    YARN_STATUS,
)

from dataflow.errors import SparkUnavailable
from dataflow.run.spark import sparkcluster, sparkrun, sparksubmit
from dataflow.run.spark.sparkcluster import KUBERNETES, LOCAL, STANDALONE, YARN, Watch


def executable(path, body="#!/bin/sh\nexit 0\n"):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    path.chmod(0o755)
    return path


@pytest.fixture
def homes(tmp_path, lab_policy):
    executable(tmp_path / "java" / "bin" / "java")
    executable(tmp_path / "spark" / "bin" / "spark-submit")
    return {
        "JAVA_HOME": str(tmp_path / "java"),
        "SPARK_HOME": str(tmp_path / "spark"),
        "DATAFLOW_POLICY": str(lab_policy),
    }


def chunk_env() -> dict[str, str]:
    """What RunJob gives a chunk of job ``daily`` (raw: a JDBC dataset with a password)."""
    return {
        "PATH": "/usr/bin",
        "jobid": "daily",
        "dataid": "2026-11-23",
        "raw_hostname": "db:5432",
        "raw_HOSTNAME": "db:5432",
        "raw_password": "s3cret",
        "raw_PASSWORD": "s3cret",
        "raw_encryptedpass": "gAAAA-token",
        "raw_ENCRYPTEDPASS": "gAAAA-token",
        "shard_column": "s3cret",  # an item whose value happens to be the password
    }


VARIABLES = [k for k in chunk_env() if k not in ("PATH", "dataid")]


def planned(spark_args: str, homes: dict[str, str]) -> tuple[list[str], sparkcluster.Submission]:
    argv, where = sparksubmit.plan("./daily.py", ["--day", "x"], {"spark_args": spark_args}, homes)
    assert where is not None
    run = sparkrun.runner_for(where, VARIABLES)(argv, chunk_env(), secrets=["s3cret"])
    return run.argv, where


def test_yarn_cluster_mode_gives_the_driver_the_chunk_but_no_password(homes):
    argv, where = planned("--master yarn --deploy-mode cluster --queue etl", homes)
    submit = f"{homes['SPARK_HOME']}/bin/spark-submit"
    env = "spark.yarn.appMasterEnv."
    assert argv == [
        submit,
        *sparksubmit.LOG_LEVEL,  # before the user's arguments: theirs win
        "--master",
        "yarn",
        "--deploy-mode",
        "cluster",
        "--queue",
        "etl",
        *("--conf", f"{env}jobid=daily"),
        *("--conf", f"{env}raw_hostname=db:5432"),
        *("--conf", f"{env}raw_HOSTNAME=db:5432"),
        *("--conf", f"{env}dataid=2026-11-23"),
        "./daily.py",
        "--day",
        "x",
    ]
    assert (where.manager, where.cluster, where.wait, where.tracked) == (YARN, True, True, True)


def test_kubernetes_cluster_mode_uses_driver_env_and_keeps_waiting(homes):
    args = f"--master {K8S} --deploy-mode cluster --conf spark.kubernetes.namespace=spark"
    argv, where = planned(args, homes)
    at = argv.index("./daily.py")
    assert argv[at - 8 :] == [
        *("--conf", "spark.kubernetes.driverEnv.jobid=daily"),
        *("--conf", "spark.kubernetes.driverEnv.raw_hostname=db:5432"),
        *("--conf", "spark.kubernetes.driverEnv.raw_HOSTNAME=db:5432"),
        *("--conf", "spark.kubernetes.driverEnv.dataid=2026-11-23"),
        "./daily.py",
        "--day",
        "x",
    ]
    assert not any("pyspark" in arg for arg in argv)  # this host's Python means nothing there
    assert (where.manager, where.master, where.wait) == (KUBERNETES, K8S, True)
    assert where.confs == ["--conf", "spark.kubernetes.namespace=spark"]


def test_client_mode_keeps_the_chunk_in_the_environment_only(homes):
    argv, where = planned("--master yarn", homes)
    assert not any("appMasterEnv" in arg for arg in argv)
    assert f"spark.pyspark.driver.python={sys.executable}" in argv
    assert (where.cluster, where.tracked) == (False, False)
    argv, where = planned("--conf spark.master=yarn", homes)  # the master set as a conf
    assert where.manager == YARN
    assert not any(arg.startswith("spark.pyspark.python=") for arg in argv)


def test_a_wait_setting_of_false_is_seen_and_the_last_one_wins(homes):
    wait = "spark.yarn.submit.waitAppCompletion"
    _, where = planned(f"--master yarn --deploy-mode cluster --conf {wait}=false", homes)
    assert where.wait is False
    _, where = planned(f"--master yarn --deploy-mode=cluster --conf={wait}=FALSE", homes)
    assert where.wait is False
    _, where = planned(f"--master yarn --deploy-mode cluster -c {wait}=false -c {wait}=true", homes)
    assert where.wait is True
    k8s_wait = f"--conf spark.kubernetes.submission.waitAppCompletion=false --master {K8S}"
    _, where = planned(f"{k8s_wait} --conf spark.submit.deployMode=cluster", homes)
    assert (where.manager, where.cluster, where.wait) == (KUBERNETES, True, False)


def test_standalone_cluster_mode_for_python_is_one_clear_error(homes):
    with pytest.raises(SparkUnavailable) as raised:
        sparksubmit.plan(
            "./daily.py", [], {"spark_args": "--master spark://m:7077 --deploy-mode cluster"}, homes
        )
    assert str(raised.value) == (
        "cannot run ./daily.py through spark-submit: a standalone Spark master "
        "(spark://m:7077) cannot run a Python driver in cluster deploy mode: leave out "
        "--deploy-mode cluster (client mode runs the driver here and its executors on the "
        "cluster), or use YARN or Kubernetes"
    )


def test_local_and_shell_jobs_run_as_before(homes):
    _, where = sparksubmit.plan("./daily.py", [], {"spark_args": "--master local[2]"}, homes)
    assert where.manager == LOCAL
    runner = sparkrun.runner_for(where, [])  # a plain Run (the reason: its traceback's)
    assert runner.func is sparkrun.Run and runner.keywords == {"words": False}
    assert sparksubmit.plan("./load.sh", ["a"], {}, homes) == (["./load.sh", "a"], None)


masters = st.sampled_from(["yarn", "local[1]", "spark://m:7077", K8S, "local"])


@given(st.lists(st.tuples(masters, st.booleans()), min_size=1, max_size=5))
def test_the_last_master_given_is_the_one_followed(given_masters):
    args = []
    for master, joined in given_masters:
        args += [f"--master={master}"] if joined else ["--master", master]
    where = sparkcluster.describe(args, "/spark-submit")
    last = given_masters[-1][0]
    assert where.master == last
    expected = {"yarn": YARN, "spark://m:7077": STANDALONE, K8S: KUBERNETES}.get(last, LOCAL)
    assert where.manager == expected


# -- killing and asking ----------------------------------------------------------------------


def test_kill_and_status_commands(homes):
    _, yarn = planned("--master yarn --deploy-mode cluster", homes)
    assert sparkcluster.kill_argv(yarn, APP, {}) == ["yarn", "application", "-kill", APP]
    assert sparkcluster.status_argv(yarn, APP, {"HADOOP_HOME": "/opt/hadoop"}) == [
        "/opt/hadoop/bin/yarn",
        "application",
        "-status",
        APP,
    ]
    _, k8s = planned(
        f"--master {K8S} --deploy-mode cluster -c spark.kubernetes.namespace=spark", homes
    )
    submit = f"{homes['SPARK_HOME']}/bin/spark-submit"
    confs = ["--conf", "spark.kubernetes.namespace=spark"]
    assert sparkcluster.kill_argv(k8s, POD, {}) == [submit, "--master", K8S, *confs, "--kill", POD]
    assert sparkcluster.status_argv(k8s, POD, {}) == [
        *(submit, "--master", K8S, *confs),
        *("--status", POD),
    ]


# -- what spark-submit says ------------------------------------------------------------------


def watched(manager: str, output: str, cluster: bool = True) -> Watch:
    watch = Watch(sparkcluster.Submission(manager, "m", cluster, True, "s", []))
    for line in output.splitlines():
        watch.line(line)
    return watch


def test_a_failed_yarn_application_is_named_with_its_final_status():
    watch = watched(YARN, YARN_FAILED)
    assert watch.app_id == APP
    assert watch.note() == f"yarn application {APP} (FAILED)"


def test_a_kubernetes_driver_exit_code_is_read_from_the_final_statuses():
    watch = watched(KUBERNETES, K8S_FAILED)
    assert (watch.app_id, watch.exit_code, watch.state) == (POD, 3, "Failed")
    assert watch.note() == f"kubernetes submission {POD} (Failed)"


def test_a_standalone_client_application_is_named():
    watch = watched(STANDALONE, STANDALONE_CLIENT, cluster=False)
    assert watch.note() == "spark application app-20261123190115-0003"
    assert watched(LOCAL, STANDALONE_CLIENT + YARN_FAILED).note() is None


def test_a_standalone_driver_here_logs_the_line_naming_its_application(tmp_path):
    """spark.log.level=WARN hides the INFO line with the id, so a driver here on a
    standalone master gets a log4j2 configuration that keeps it; a user's own log4j2
    configuration wins."""

    def logs(manager, cluster=False, **environ):
        submission = sparkcluster.Submission(manager, "spark://m:7077", cluster, True, "s", [])
        return sparkcluster.log_env(submission, environ)

    (path,) = logs(STANDALONE).values()
    text = Path(path).read_text()
    assert "rootLogger.level = warn" in text
    assert "scheduler.cluster.StandaloneSchedulerBackend\nlogger.app.level = info" in text
    assert logs(LOCAL) == logs(YARN) == logs(STANDALONE, cluster=True) == {}
    assert logs(STANDALONE, LOG4J_CONFIGURATION_FILE="mine.xml") == {}
    assert logs(STANDALONE, SPARK_SUBMIT_OPTS="-Dlog4j2.configurationFile=mine.xml") == {}
    conf = tmp_path / "conf"
    conf.mkdir()
    assert logs(STANDALONE, SPARK_CONF_DIR=str(conf)) != {}
    (conf / "log4j2.properties").write_text("rootLogger.level = info\n")
    assert logs(STANDALONE, SPARK_CONF_DIR=str(conf)) == {}
    assert logs(STANDALONE, SPARK_HOME=str(tmp_path)) == {}


def test_lines_split_across_writes_are_read_whole():
    watch = Watch(sparkcluster.Submission(YARN, "yarn", True, True, "s", []))
    sink = sparkrun.Lines(watch)
    data = YARN_FAILED.encode()
    for at in range(0, len(data), 7):
        sink.write(data[at : at + 7])
    assert watch.note() == f"yarn application {APP} (FAILED)"


@pytest.mark.parametrize(
    ("state", "final", "expected"),
    [
        ("RUNNING", "UNDEFINED", (False, False, "RUNNING", None)),
        ("ACCEPTED", "UNDEFINED", (False, False, "ACCEPTED", None)),
        ("FINISHED", "SUCCEEDED", (True, True, "SUCCEEDED", None)),
        ("FINISHED", "FAILED", (True, False, "FAILED", None)),
        ("KILLED", "KILLED", (True, False, "KILLED", None)),
        ("FAILED", "FAILED", (True, False, "FAILED", None)),
    ],
)
def test_yarn_status(state, final, expected):
    where = sparkcluster.Submission(YARN, "yarn", True, False, "s", [])
    output = YARN_STATUS.format(state=state, final=final, finish=0)
    assert tuple(sparkcluster.parse_status(where, output)) == expected


@pytest.mark.parametrize(
    ("phase", "container", "code", "expected"),
    [
        ("Pending", "waiting", "", (False, False, "Pending", None)),
        ("Running", "running", "", (False, False, "Running", None)),
        ("Succeeded", "terminated", "\t\t exit code: 0\n", (True, True, "Succeeded", 0)),
        ("Failed", "terminated", "\t\t exit code: 137\n", (True, False, "Failed", 137)),
    ],
)
def test_kubernetes_status(phase, container, code, expected):
    where = sparkcluster.Submission(KUBERNETES, K8S, True, False, "s", [])
    output = K8S_STATUS.format(phase=phase, container=container, code=code)
    assert tuple(sparkcluster.parse_status(where, output)) == expected


def test_a_status_answer_without_a_state_is_no_answer():
    for manager in (YARN, KUBERNETES):
        where = sparkcluster.Submission(manager, "m", True, False, "s", [])
        assert sparkcluster.parse_status(where, "Application not found.\n") is None
