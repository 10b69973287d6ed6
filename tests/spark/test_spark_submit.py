"""spark-submit wrapping: the argv of a .py job, and the errors before any claim."""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import pytest

from dataflow.errors import BadSparkArgs, SparkUnavailable
from dataflow.run.spark import sparksubmit


def executable(path: Path, body: str = "#!/bin/sh\nexit 0\n") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(body)
    path.chmod(0o755)
    return path


@pytest.fixture
def homes(tmp_path: Path, lab_policy: Path) -> dict[str, str]:
    """A fake JAVA_HOME and SPARK_HOME: argv building only checks that the files exist."""
    executable(tmp_path / "java" / "bin" / "java")
    executable(tmp_path / "spark" / "bin" / "spark-submit")
    return {
        "JAVA_HOME": str(tmp_path / "java"),
        "SPARK_HOME": str(tmp_path / "spark"),
        "DATAFLOW_POLICY": str(lab_policy),
    }


def test_a_shell_job_runs_as_itself():
    assert sparksubmit.job_argv("./load.sh", ["a b", "c"], {"spark_args": "--x"}) == [
        "./load.sh",
        "a b",
        "c",
    ]


def test_a_py_job_runs_through_spark_submit_with_setting_then_environment(homes):
    environ = {**homes, "DATAFLOW_SPARK_ARGS": "--conf spark.x=env --driver-memory 2g"}
    settings = {"spark_args": "--master 'local[2]' --conf \"spark.app.name=my job\""}
    argv = sparksubmit.job_argv("./job.py", ["--day", "x y"], settings, environ)
    submit = f"{homes['SPARK_HOME']}/bin/spark-submit"
    python = [
        "--conf",
        f"spark.pyspark.driver.python={sys.executable}",
        "--conf",
        f"spark.pyspark.python={sys.executable}",
    ]
    setting = ["--master", "local[2]", "--conf", "spark.app.name=my job"]
    env = ["--conf", "spark.x=env", "--driver-memory", "2g"]
    quiet = ["--conf", "spark.log.level=WARN"]  # before the user's: theirs wins
    assert argv == [submit, *python, *quiet, *setting, *env, "./job.py", "--day", "x y"]


def test_on_a_cluster_the_executors_keep_their_own_python(homes):
    argv = sparksubmit.job_argv("./job.py", [], {"spark_args": "--master=yarn"}, homes)
    assert f"spark.pyspark.driver.python={sys.executable}" in argv
    assert not any(arg.startswith("spark.pyspark.python=") for arg in argv)


def test_a_python_chosen_by_the_user_is_left_alone(homes):
    environ = {**homes, "PYSPARK_PYTHON": "/opt/py/bin/python3"}
    argv = sparksubmit.job_argv("./job.py", [], {}, environ)
    quiet = ["--conf", "spark.log.level=WARN"]
    assert argv == [f"{homes['SPARK_HOME']}/bin/spark-submit", *quiet, "./job.py"]


def test_unbalanced_quotes_are_a_clear_error(homes):
    with pytest.raises(
        BadSparkArgs,
        match=r"cannot split the job setting spark_args into spark-submit arguments: No closing",
    ):
        sparksubmit.job_argv("./job.py", [], {"spark_args": "--conf 'a=b"}, homes)
    environ = {**homes, "DATAFLOW_SPARK_ARGS": '--conf "x'}
    with pytest.raises(BadSparkArgs, match=r"\$DATAFLOW_SPARK_ARGS"):
        sparksubmit.job_argv("./job.py", [], {}, environ)


def test_missing_java_and_spark_are_one_line_each(tmp_path, homes):
    bad_java = {**homes, "JAVA_HOME": str(tmp_path / "nowhere")}
    with pytest.raises(SparkUnavailable, match=r"JAVA_HOME=.*nowhere has no bin/java"):
        sparksubmit.job_argv("./job.py", [], {}, bad_java)
    no_java = {"PATH": str(tmp_path / "empty"), "SPARK_HOME": homes["SPARK_HOME"]}
    with pytest.raises(SparkUnavailable, match=r"Java is not installed"):
        sparksubmit.job_argv("./job.py", [], {}, no_java)
    bad_spark = {**homes, "SPARK_HOME": str(tmp_path / "nospark")}
    with pytest.raises(SparkUnavailable, match=r"SPARK_HOME=.*nospark has no bin/spark-submit"):
        sparksubmit.job_argv("./job.py", [], {}, bad_spark)


def test_without_spark_home_the_pyspark_package_provides_spark_submit(homes):
    environ = {"JAVA_HOME": homes["JAVA_HOME"], "PATH": os.defpath}
    submit = sparksubmit.job_argv("./job.py", [], {}, environ)[0]
    import pyspark

    assert submit == os.path.join(os.path.dirname(pyspark.__file__), "bin", "spark-submit")


def test_nothing_to_submit_with_is_a_clear_error(monkeypatch, tmp_path, homes):
    monkeypatch.setattr(sparksubmit, "_bundled", lambda: None)
    monkeypatch.setattr(sys, "executable", str(tmp_path / "venv" / "bin" / "python"))
    environ = {"JAVA_HOME": homes["JAVA_HOME"], "PATH": str(tmp_path / "empty")}
    with pytest.raises(SparkUnavailable, match=r"spark-submit not found: pip install pyspark"):
        sparksubmit.job_argv("./job.py", [], {}, environ)


# -- RunJob: the errors come before the claim -----------------------------------------------


def register(cli) -> None:
    cli.ok("createtables")
    cli.ok("dml", "insert into dataset (datasetid) values ('numbers'), ('doubled')")
    cli.ok(
        "dml",
        "insert into job (jobid, itemtype, datasetid) values "
        "('job', 'IN', 'numbers'), ('job', 'OUT', 'doubled')",
    )
    cli.ok(
        "dml",
        "insert into datastatus values ('numbers', 'feed', '1', 'OUT', 'READY', now())",
    )
    executable(cli.cwd / "job.py", "print('never runs')\n")


def unclaimed(cli) -> bool:
    rows = cli.ok("sql", "select count(*) as n from datastatus where jobid = 'job'", "--json")
    return '"n": 0' in rows.out


def test_runjob_without_java_says_so_and_claims_nothing(cli, tmp_path):
    register(cli)
    result = cli.runjob("./job.py", env={"JAVA_HOME": str(tmp_path / "nowhere")})
    assert result.code == 2
    assert result.out == ""
    assert result.err == (
        f"error: cannot run ./job.py through spark-submit: JAVA_HOME={tmp_path / 'nowhere'} "
        "has no bin/java (point it at a Java 17+ runtime, or unset it)\n"
    )
    assert unclaimed(cli)


def test_runjob_with_no_java_on_path_says_so_and_claims_nothing(cli, tmp_path):
    register(cli)
    tools = tmp_path / "tools"
    tools.mkdir()
    for tool in ("bash", "dirname", "readlink"):
        (tools / tool).symlink_to(shutil.which(tool))
    env = {k: v for k, v in cli.env.items() if k != "JAVA_HOME"}
    env["PATH"] = str(tools)
    cli.env = env
    result = cli.runjob("./job.py")
    assert result.code == 2, result
    assert result.err.startswith("error: cannot run ./job.py through spark-submit: Java is not")
    assert len(result.err.splitlines()) == 1
    cli.env["PATH"] = os.environ["PATH"]
    assert unclaimed(cli)


def test_runjob_with_a_wrong_spark_home_says_so_and_claims_nothing(cli, tmp_path):
    register(cli)
    result = cli.runjob("./job.py", env={"SPARK_HOME": str(tmp_path / "spark-3")})
    assert result.code == 2
    assert result.err == (
        f"error: cannot run ./job.py through spark-submit: SPARK_HOME={tmp_path / 'spark-3'} "
        "has no bin/spark-submit (fix SPARK_HOME, or unset it)\n"
    )
    assert unclaimed(cli)
