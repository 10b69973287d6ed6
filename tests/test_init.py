"""utility init DIR: a new project (an example Spark job, its unit test, dataflow.toml,
README, .gitignore, a CI file) that goes from nothing to a tested pipeline in git: init,
git init, its test command, utility plan, utility apply. Real CLIs and stores."""

from __future__ import annotations

import tomllib

import pytest

from dataflow.ops import scaffold
from support import Cli

pytestmark = pytest.mark.both_stores

FILES = [
    "dataflow.toml",
    "jobs/clean.py",
    "tests/test_clean.py",
    "README.md",
    ".gitignore",
    ".github/workflows/dataflow.yml",
]


def _tree(folder) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.long
def test_init_then_plan_then_apply_then_plan_is_empty(cli, tmp_path):
    cli.ok("createtables")
    made = cli.ok("init", "sales")
    assert made.lines == [*(f"wrote {name}" for name in FILES), made.lines[-1]]
    assert made.lines[-1] == f"next: cd sales && git init && {scaffold.TEST} && utility plan ."
    sales = tmp_path / "sales"
    assert sorted(str(p.relative_to(sales)) for p in sales.rglob("*") if p.is_file()) == sorted(
        FILES
    )
    project = tomllib.loads((sales / "dataflow.toml").read_text())
    assert project["project"] == {"name": "sales", "test": scaffold.TEST}
    assert {d["database"] for d in project["datasets"].values()} == {"csv", "parquet"}
    assert list(project["jobs"]) == ["clean"]

    first = cli.sh("cd sales && git init -q && utility plan .")  # the newcomer's lines
    assert first.code == 2, first
    assert first.out.splitlines() == [
        "+ dataset orders_raw",
        "+ dataset orders_clean",
        "+ job clean",
        "plan: 3 added, 0 changed, 0 removed",
    ]
    assert cli.ok("apply", "sales").lines[-1] == "applied: 3 added, 0 changed, 0 removed"
    again = cli.utility("plan", "sales")
    assert (again.code, again.out) == (0, "no changes: the store matches the project\n")


def test_init_names_its_job(cli, tmp_path):
    cli.ok("createtables")
    cli.ok("init", "--job", "tidy_orders", "shop")
    shop = tmp_path / "shop"
    assert (shop / "jobs" / "tidy_orders.py").is_file()
    assert "from tidy_orders import tidy" in (shop / "tests" / "test_tidy_orders.py").read_text()
    assert cli.utility("plan", "shop").lines[-2] == "+ job tidy_orders"


@pytest.mark.parametrize("store_kind", ["sqlite"])
def test_init_writes_only_into_a_new_or_empty_folder(cli, tmp_path):
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine\n")
    (tmp_path / "afile").write_text("mine\n")
    before = _tree(tmp_path)
    for folder, why in (("full", "is not empty"), ("afile", "is not a folder")):
        refused = cli.utility("init", folder)
        assert refused.code == 2, refused
        assert refused.out == ""
        assert refused.err.count("\n") == 1 and refused.err.startswith(f"error: {folder} {why}: ")
    named = cli.utility("init", "--job", "2bad", "new")
    assert named.code == 2 and named.err.count("\n") == 1, named
    assert _tree(tmp_path) == before  # nothing written
    (tmp_path / "empty").mkdir()
    cli.ok("init", "empty")
    assert (tmp_path / "empty" / "dataflow.toml").is_file()


@pytest.mark.parametrize("store_kind", ["sqlite"])
def test_the_ci_files_plan_step_passes_on_a_throwaway_store(cli, tmp_path):
    cli.ok("init", "sales")
    ci = (tmp_path / "sales" / ".github" / "workflows" / "dataflow.yml").read_text()
    assert f"run: {scaffold.TEST}\n" in ci
    assert "".join(f"          {line}\n" for line in scaffold.PLAN_STEP.splitlines()) in ci
    (tmp_path / "runner").mkdir()
    env = {"RUNNER_TEMP": str(tmp_path / "runner"), "DATAFLOW_DB": str(tmp_path / "nowhere.db")}
    step = cli.sh(f"cd sales && set -e\n{scaffold.PLAN_STEP}", env=env)
    assert step.code == 0, step
    assert "plan: 3 added, 0 changed, 0 removed" in step.out
    assert (tmp_path / "runner" / "plan.db").is_file()
    assert not (tmp_path / "dataflow.db").exists()


@pytest.mark.spark
def test_the_generated_unit_test_passes_with_a_local_spark(tmp_path, quick_jvm):
    cli = Cli(tmp_path)
    cli.ok("init", "sales")
    env = {"SPARK_LOCAL_IP": "127.0.0.1", "PYTHONDONTWRITEBYTECODE": "1"}
    env["PYSPARK_SUBMIT_ARGS"] = f"{quick_jvm} pyspark-shell"  # its JVM's start only
    command = f"cd sales && {scaffold.TEST} -p no:cacheprovider"
    ran = cli.sh(command, env=env, timeout=600)
    assert ran.code == 0, ran
    assert "1 passed" in ran.out
    broken = tmp_path / "sales" / "jobs" / "clean.py"
    broken.write_text(broken.read_text().replace('!= ""', '!= "o1"'))
    failed = cli.sh(command, env=env, timeout=600)
    assert failed.code == 1 and "TransformationMismatch" in failed.out, failed
