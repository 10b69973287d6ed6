"""``utility init DIR``: a new project, from nothing to a tested pipeline in git.

It writes, into a new or empty folder, a project file (``dataflow.toml``: two file
datasets and one job), the job (a PySpark script ``jobs/<job>.py`` written with
``dataflow.spark``, its transformation a plain function), the job's unit test
(``tests/test_<job>.py``, with ``dataflow.testing`` in a local SparkSession), a
``README.md`` saying the four commands, a ``.gitignore`` and a CI file that runs the
tests and ``utility plan`` against a throwaway store. The templates are the strings
below.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from ..errors import UsageError
from ..run.claim.envnames import is_variable_name

JOB = "clean"  # the example job's name (utility init --job)
TEST = "python -m pytest -q tests"  # the project's test command ([project] test)

PROJECT = """\
# The pipeline of project {name}: its datasets and jobs, with every setting that decides
# what runs. Reviewed like the code: utility plan . says what applying it would change in
# a store, utility apply . makes the store match it (docs/projects.md of opendataflow).

[project]
name = {quoted}
test = "{test}"   # the project's checks: CI and utility deploy run them

# File datasets: database is the format (csv, parquet, json, orc), schemaname the lake's
# base (a folder, relative to where RunJob runs; or an absolute path, hdfs://, s3a://),
# tablename the dataset's folder there. Chunk D lives in <base>/<table>/dataid=D.
[datasets.orders_raw]
database = "csv"
schemaname = "data/lake"
tablename = "orders_raw"

[datasets.orders_clean]
database = "parquet"
schemaname = "data/lake"
tablename = "orders_clean"

# Job {job}: its script is jobs/{job}.py (run through spark-submit). A chunk of
# orders_raw made READY (utility ready orders_raw 2026-01-31) is a chunk to run.
[jobs.{job}]
in = ["orders_raw"]
out = ["orders_clean"]
retries = 2
timeout = 3600
"""

SCRIPT = '''\
"""Job {job}: a chunk (a day, say) of orders_raw (CSV) written to orders_clean (Parquet),
orders without an id dropped and amounts read as numbers.

    RunJob --all jobs/{job}.py     # every chunk whose input is READY, in one Spark driver

The transformation is the plain function ``tidy``: tests/test_{job}.py checks it on a
few rows. ``run`` only reads the chunk, calls it and writes the result.
"""

from dataflow import spark as df


def tidy(orders):
    """Orders with an id, their amount a number."""
    from pyspark.sql import functions as F

    return orders.where(F.trim(F.col("order_id")) != "").withColumn(
        "amount", F.col("amount").cast("double")
    )


def run(spark, job):  # one chunk: job.dataid, job.input(), job.output()
    orders = df.read(spark, job.input(), schema="order_id STRING, amount STRING")
    df.write(tidy(orders), job.output())
    print(f"{job}: chunk {{job.dataid}} cleaned")


if __name__ == "__main__":  # spark-submit jobs/{job}.py by hand, with a chunk's environment
    ctx = df.context()
    run(ctx.session(), ctx)
'''

UNIT_TEST = '''\
"""The transformation of job {job}, unit-tested on a few rows in a local Spark:
rows in, the rows expected out (dataflow.testing compares them as a multiset)."""

import sys
from pathlib import Path

import pytest
from dataflow.testing import check, session

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "jobs"))
from {job} import tidy  # noqa: E402  (jobs/{job}.py)


@pytest.fixture(scope="session")
def spark():
    spark = session()  # a small local SparkSession: one core, no UI
    yield spark
    spark.stop()


def test_tidy_drops_orders_without_an_id_and_reads_amounts_as_numbers(spark):
    check(
        tidy,
        input=[
            {{"order_id": "o1", "amount": "2.50"}},
            {{"order_id": "", "amount": "1.00"}},
            {{"order_id": None, "amount": "3.00"}},
        ],
        expected=[{{"order_id": "o1", "amount": 2.5}}],
        schema="order_id STRING, amount STRING",
        spark=spark,
    )
'''

README = """\
# {name}

A pipeline as code ([OpenDataFlow](https://pypi.org/project/opendataflow/)): its datasets
and jobs in `dataflow.toml`, each job a script in `jobs/`, unit-tested in `tests/`.

```bash
{test}             # the jobs' transformations, unit-tested
utility plan .                        # what applying would change in the store (exit 2: something)
utility apply .                       # the store made to match dataflow.toml, the deploy recorded
RunJob --all jobs/{job}.py            # run every chunk that is ready
```

No store yet? `utility createtables` makes one (`./dataflow.db`, or `--db` / `DATAFLOW_DB`).
"""

GITIGNORE = """\
__pycache__/
.pytest_cache/
# the lake of dataflow.toml's relative paths, and a store made here to try the project
data/
*.db
*.db-*
*.db.d/
"""

PLAN_STEP = """\
export DATAFLOW_DB="$RUNNER_TEMP/plan.db"
utility createtables
utility plan . || test $? -eq 2   # 2: the project would change a store (an empty one)
"""

CI = """\
# The project's checks, on every push and pull request: its tests, and a plan of it
# against a throwaway store (exit 2, "something would change", is what a plan of a new
# store says; 1 is a mistake in dataflow.toml).
name: dataflow
on: [push, pull_request]
jobs:
  check:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@v4
      - uses: actions/setup-python@v5
        with:
          python-version: "3.12"
      - uses: actions/setup-java@v4   # Spark 4 needs Java 17+
        with:
          distribution: temurin
          java-version: "17"
      - name: install
        run: pip install opendataflow pytest
      - name: tests
        run: {test}
      - name: plan
        run: |
{plan}"""


def files(name: str, job: str = JOB) -> dict[str, str]:
    """The project's files (path relative to its folder: text) for project ``name``."""
    from .project import _quoted

    plan = "".join(f"          {line}\n" for line in PLAN_STEP.splitlines())
    values = {"name": name, "quoted": _quoted(name), "job": job, "test": TEST, "plan": plan}
    return {
        "dataflow.toml": PROJECT.format(**values),
        f"jobs/{job}.py": SCRIPT.format(**values),
        f"tests/test_{job}.py": UNIT_TEST.format(**values),
        "README.md": README.format(**values),
        ".gitignore": GITIGNORE,
        ".github/workflows/dataflow.yml": CI.format(**values),
    }


def init(folder: str, job: str = JOB) -> list[str]:
    """Write a new project into ``folder`` (made if missing; refused unless empty); the
    files written. A failure midway leaves nothing of them."""
    root = Path(folder)
    if not is_variable_name(job):
        raise UsageError(f"job name '{job}': letters, digits and _, not starting with a digit")
    if root.is_symlink() or (root.exists() and not root.is_dir()):
        raise UsageError(f"{folder} is not a folder: utility init makes a new project's folder")
    existed = root.is_dir()
    if existed and any(root.iterdir()):
        raise UsageError(
            f"{folder} is not empty: utility init writes only into a new or empty folder"
        )
    made = files(root.resolve().name, job)
    written = []
    try:
        root.mkdir(parents=True, exist_ok=True)
        for relative, text in made.items():
            path = root / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "x", encoding="utf-8") as out:
                out.write(text)
            written.append(relative)
    except OSError as exc:
        _undo(root, existed)
        raise UsageError(f"cannot write the project into {folder}: {exc.strerror}") from None
    return written


def _undo(root: Path, existed: bool) -> None:
    """Remove what init wrote: the folder it made, or everything in the empty one it had."""
    if not existed:
        shutil.rmtree(root, ignore_errors=True)
        return
    for child in root.iterdir():
        if child.is_dir() and not child.is_symlink():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)
