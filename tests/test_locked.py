"""A locked store (``utility set '*' locked=true``) takes its jobs only from a deploy:
set, unset, register-job, unregister-job and import refuse, in one line pointing at the
project, and change nothing; utility apply still writes; unset '*' locked unlocks."""

from __future__ import annotations

import json

import pytest

from support import SALES, rows, script, state

pytestmark = pytest.mark.both_stores

PROJECT = SALES.replace('ready_by = "06:00"\nenv = { region = "eu" }\n', "").replace(
    "retries = 2", "retries = {retries}"
)

REFUSAL = (
    "this store takes jobs only from a deploy: change dataflow.toml and run utility apply"
    " (the store-wide setting locked)"
)


def _project(tmp_path, retries: int):
    folder = tmp_path / "sales"
    (folder / "jobs").mkdir(parents=True, exist_ok=True)
    script(folder / "jobs", "load.sh", "true")
    (folder / "dataflow.toml").write_text(PROJECT.format(retries=retries))
    return folder


def _refused(result, what: str) -> None:
    assert result.code == 2, result
    assert result.err == f"error: {what}: {REFUSAL}\n", result.err
    assert result.out == ""


def test_a_locked_store_changes_jobs_only_through_apply(cli, tmp_path):
    cli.ok("createtables")
    _project(tmp_path, retries=2)
    cli.ok("apply", "sales")
    cli.ok("register-dataset", "other")
    cli.ok("set", "*", "locked=true")
    document = tmp_path / "export.json"
    document.write_text(
        json.dumps(
            {
                "opendataflow": 1,
                "datasets": [],
                "jobs": {"new": [{"itemtype": "IN", "datasetid": "raw"}]},
            }
        )
    )

    before = state(tmp_path)
    _refused(cli.utility("set", "load", "retries=5"), "job 'load' not changed")
    _refused(cli.utility("set", "load", "region=eu"), "job 'load' not changed")
    _refused(cli.utility("unset", "load", "retries"), "job 'load' not changed")
    _refused(
        cli.utility("register-job", "load", "--in", "raw", "--out", "other"),
        "job 'load' not registered",
    )
    _refused(
        cli.utility("register-job", "new", "--in", "raw", "--out", "other"),
        "job 'new' not registered",
    )
    _refused(cli.utility("unregister-job", "load"), "job 'load' not removed")
    _refused(cli.utility("import", str(document)), "nothing imported")
    assert state(tmp_path) == before  # nothing changed

    _project(tmp_path, retries=5)  # the project changes: a deploy still writes
    assert cli.utility("plan", "sales").code == 2
    assert "~ job load: retries: '2' -> '5'" in cli.ok("apply", "sales").lines
    assert cli.utility("plan", "sales").code == 0
    assert rows(
        tmp_path, "select itemvalue from job where jobid='load' and itemtype='retries'"
    ) == [("5",)]
    assert rows(tmp_path, "select itemvalue from job where jobid='*' and itemtype='locked'") == [
        ("true",)
    ]  # an apply leaves the store-wide settings alone

    cli.ok("unset", "*", "locked")
    cli.ok("set", "load", "retries=7")
    assert cli.utility("plan", "sales").code == 2  # the store drifted from the project


def test_locked_is_true_or_false_and_false_does_not_lock(cli, tmp_path):
    cli.ok("createtables")
    _project(tmp_path, retries=2)
    cli.ok("apply", "sales")
    wrong = cli.utility("set", "*", "locked=yes")
    assert (wrong.code, wrong.err) == (
        2,
        "error: setting locked must be true or false, not 'yes'\n",
    )
    cli.ok("set", "*", "locked=false")
    cli.ok("set", "load", "retries=3")
    cli.ok("set", "*", "locked=true")
    _refused(cli.utility("set", "load", "retries=4"), "job 'load' not changed")
    other = cli.utility("set", "*", "color=red")
    assert other.code == 2 and "(only alerts and locked are)" in other.err, other
