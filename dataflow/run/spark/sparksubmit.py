"""The command line of a job: the script itself, or ``spark-submit ... job.py`` for a ``.py`` job.

Built before the chunk is claimed, so a machine without Java or Spark (or a deploy mode
the cluster cannot run) says so while the store is still untouched. Only paths and
options go into the argv: the chunk's environment (passwords included) reaches the
Spark driver through the environment, which ``spark-submit`` passes on to the Python
driver in client mode. A driver in cluster deploy mode gets the chunk's variables,
passwords excepted, as driver-environment confs (see :mod:`.sparkrun`).
"""

from __future__ import annotations

import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ...errors import BadSparkArgs, SparkUnavailable
from ...policy import load, spark_options
from ..process.scripts import is_spark_job  # (there: a plain job imports nothing of Spark)

if TYPE_CHECKING:
    from .sparkcluster import Submission

SPARK_ARGS_ENV = "DATAFLOW_SPARK_ARGS"
SPARK_ARGS_SETTING = "spark_args"
ENTRY_POINT = "run"  # ``def run(spark, job)``: a job one Spark driver can call per chunk
BATCH_ENTRY_POINT = "run_batch"  # ``def run_batch(spark, batch)``: many chunks per call


def has_entry_point(script: str) -> bool:
    """Does the ``.py`` job define ``def run(spark, job)`` (or ``def run_batch(spark,
    batch)``) at its top level? Read with
    ``ast``, nothing of it executed (nor pyspark imported). A file that cannot be read
    or parsed has none: spark-submit will say what is wrong with it."""
    if not is_spark_job(script):
        return False
    import ast  # only for .py jobs

    try:
        with open(script, "rb") as file:
            tree = ast.parse(file.read(), script)
    except (OSError, SyntaxError, ValueError):
        return False
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name in (ENTRY_POINT, BATCH_ENTRY_POINT):
            arguments = node.args
            if len(arguments.posonlyargs + arguments.args) >= 2 or arguments.vararg is not None:
                return True
    return False


def job_argv(
    script: str,
    args: Sequence[str],
    settings: Mapping[str, str],
    environ: Mapping[str, str] | None = None,
) -> list[str]:
    """What RunJob executes for ``script``: ``[script, *args]``, or for a ``.py`` job
    ``spark-submit [python confs] [spark_args] [$DATAFLOW_SPARK_ARGS] script *args``."""
    return plan(script, args, settings, environ)[0]


def plan(
    script: str,
    args: Sequence[str],
    settings: Mapping[str, str],
    environ: Mapping[str, str] | None = None,
) -> tuple[list[str], Submission | None]:
    """:func:`job_argv`, and for a ``.py`` job where its driver runs (see sparkcluster)."""
    if not is_spark_job(script):
        return [script, *args], None
    return spark_argv(script, args, settings, os.environ if environ is None else environ)


def launcher_argv(
    launcher: Sequence[str],
    script: str,
    args: Sequence[str],
    settings: Mapping[str, str],
    environ: Mapping[str, str] | None = None,
) -> list[str]:
    """``spark-submit ... launcher... script *args``: spark-submit runs ``launcher`` (a
    Python file and its arguments), which calls the job's entry point."""
    environ = os.environ if environ is None else environ
    submit, _ = spark_argv(script, args, settings, environ)
    at = len(submit) - len(args) - 1  # the script's place
    return [*submit[:at], *launcher, *submit[at:]]


def spark_argv(
    script: str, args: Sequence[str], settings: Mapping[str, str], environ: Mapping[str, str]
) -> tuple[list[str], Submission]:
    """``spark-submit`` with the job's ``spark_args`` setting, then ``$DATAFLOW_SPARK_ARGS``.

    The setting is a row of the store: only options and confs the host's policy allows
    (:mod:`dataflow.policy`); the environment variable is the host's own.

    The environment variable comes last so that an operator's one-off
    ``DATAFLOW_SPARK_ARGS='--driver-memory 8g' RunJob ./job.py`` wins over the stored
    setting (for spark-submit, the last ``--conf`` or ``--master`` given wins).
    """
    from .sparkcluster import LOCAL, STANDALONE, describe  # only for a .py job (ms of regexes)

    find_java(script, environ)
    submit = find_spark_submit(script, environ)
    extra = split_args(settings.get(SPARK_ARGS_SETTING, ""), "the job setting spark_args")
    if extra and (why := load(environ).spark_args_refusal(extra)):  # a row: what the host allows
        raise SparkUnavailable(script, f"the job setting spark_args: {why}")
    extra += split_args(environ.get(SPARK_ARGS_ENV, ""), f"${SPARK_ARGS_ENV}")
    where = describe(extra, submit)
    if where.cluster and where.manager == STANDALONE:
        raise SparkUnavailable(
            script,
            f"a standalone Spark master ({where.master}) cannot run a Python driver in cluster "
            "deploy mode: leave out --deploy-mode cluster (client mode runs the driver here "
            "and its executors on the cluster), or use YARN or Kubernetes",
        )
    pythons = python_confs(extra, environ, where.cluster, where.manager == LOCAL)
    argv = [submit, *pythons, *LOG_LEVEL, *extra]
    return [*argv, script, *args], where._replace(script_at=len(argv))


# Spark logs at INFO by default: ~130 lines that bury the job's own output and traceback.
# Given before the user's arguments, so a --conf spark.log.level=... of theirs wins.
LOG_LEVEL = ("--conf", "spark.log.level=WARN")


def split_args(text: str, source: str) -> list[str]:
    """Split like a shell would (quotes respected), but without running one; an option
    left without its value at the end (``--conf``) is refused: spark-submit would fail
    only once the chunk is claimed."""
    if "\0" in text:
        raise BadSparkArgs(source, "a NUL character")
    try:
        words = shlex.split(text)
    except ValueError as exc:
        raise BadSparkArgs(source, str(exc)) from None
    try:
        spark_options(words, lenient=True)
    except ValueError as exc:  # an option without its value
        raise BadSparkArgs(source, str(exc)) from None
    return words


def _from_home(
    script: str, environ: Mapping[str, str], variable: str, tool: str, advice: str
) -> str | None:
    """``$VARIABLE/bin/tool`` when the variable is set (an error if it lacks the tool)."""
    home = environ.get(variable)
    if not home:
        return None
    path = os.path.join(home, "bin", tool)
    if _executable(path):
        return path
    raise SparkUnavailable(script, f"{variable}={home} has no bin/{tool} ({advice}, or unset it)")


def _on_path(tool: str, environ: Mapping[str, str]) -> str | None:
    from shutil import which  # only for .py jobs: shutil costs ~3 ms of every RunJob's start

    return which(tool, path=environ.get("PATH", os.defpath))


def find_java(script: str, environ: Mapping[str, str]) -> str:
    """The ``java`` spark-submit will use: ``$JAVA_HOME/bin/java``, else ``java`` on PATH."""
    java = _from_home(script, environ, "JAVA_HOME", "java", "point it at a Java 17+ runtime")
    if java:
        return java
    java = _on_path("java", environ)
    if java is None:
        raise SparkUnavailable(
            script,
            "Java is not installed: install a Java 17+ runtime "
            "(Debian: apt-get install openjdk-17-jre-headless) or set JAVA_HOME",
        )
    return java


def find_spark_submit(script: str, environ: Mapping[str, str]) -> str:
    """``$SPARK_HOME/bin/spark-submit``; else a Spark distribution's on PATH; else the one
    of the ``pyspark`` package this Python imports (what pip's ``spark-submit`` wrapper
    in the venv's bin would run, minus its need for a ``python3`` with pyspark on PATH)."""
    submit = _from_home(script, environ, "SPARK_HOME", "spark-submit", "fix SPARK_HOME")
    if submit:
        return submit
    on_path = _on_path("spark-submit", environ)
    if on_path and not _pip_wrapper(on_path):
        return on_path
    for submit in (_bundled(), str(Path(sys.executable).parent / "spark-submit"), on_path):
        if submit and _executable(submit):
            return submit
    raise SparkUnavailable(
        script,
        "spark-submit not found: pip install pyspark, put Spark's bin on PATH, or set SPARK_HOME",
    )


def python_confs(
    extra: Sequence[str], environ: Mapping[str, str], cluster: bool = False, local: bool = True
) -> list[str]:
    """Run the Spark driver with this Python (it has ``dataflow`` installed), and in local
    mode (``local``) the Python workers too; unless the user chose a Python already, or
    the driver runs on the cluster (``cluster``: this Python's path means nothing there)."""
    if cluster or environ.get("PYSPARK_PYTHON") or environ.get("PYSPARK_DRIVER_PYTHON"):
        return []
    from .sparkcluster import conf_args  # only for a .py job

    if any(pair.startswith("spark.pyspark.") for pair in conf_args(extra)[1::2]):
        return []
    confs = ["--conf", f"spark.pyspark.driver.python={sys.executable}"]
    if local:
        # on a cluster the executors' Python is theirs: this path may not exist there
        confs += ["--conf", f"spark.pyspark.python={sys.executable}"]
    return confs


def _executable(path: str) -> bool:
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _pip_wrapper(path: str) -> bool:
    """pip's ``spark-submit`` in a venv's bin asks ``python3`` on PATH where Spark is."""
    return os.path.exists(os.path.join(os.path.dirname(path), "find_spark_home.py"))


def _bundled() -> str | None:
    """``<site-packages>/pyspark/bin/spark-submit``, found without importing pyspark."""
    import importlib.util  # only for a .py job

    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.join(next(iter(spec.submodule_search_locations)), "bin", "spark-submit")
