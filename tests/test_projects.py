"""Pipelines as code: a project's file (dataflow.toml) planned and applied to the store
(utility plan, utility apply, utility export --project), with real CLIs and stores."""

from __future__ import annotations

import hashlib
import itertools
import json
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support import SALES as PROJECT
from support import host_policy, rows, script, start_runjob, state, wait_for

pytestmark = pytest.mark.both_stores


def _project(folder: Path, text: str = PROJECT, scripts=("load",)) -> Path:
    (folder / "jobs").mkdir(parents=True, exist_ok=True)
    (folder / "dataflow.toml").write_text(text)
    for name in scripts:
        script(folder / "jobs", f"{name}.sh", "echo ran $dataid >> ran")
    return folder


@pytest.fixture
def project(cli, tmp_path) -> Path:
    cli.ok("createtables")
    host_policy(tmp_path, '[env]\nallow = ["region"]\n')
    return _project(tmp_path / "sales")


def test_plan_apply_plan_then_one_changed_setting_is_one_change(cli, tmp_path, project):
    before = state(tmp_path)
    planned = cli.utility("plan", "sales")
    assert planned.code == 2, planned
    assert planned.lines == [
        "+ dataset raw",
        "+ dataset clean",
        "+ job load",
        "plan: 3 added, 0 changed, 0 removed",
    ]
    assert state(tmp_path) == before  # a plan changes nothing
    assert cli.ok("apply", "sales").lines[-1] == "applied: 3 added, 0 changed, 0 removed"
    assert cli.utility("plan", "sales").code == 0
    assert cli.ok("apply", "sales").out == "no changes: the store matches the project\n"
    deploys = json.loads(cli.ok("--json", "deploys").out)
    assert [d["changes"] for d in deploys] == [
        "0 added, 0 changed, 0 removed",
        "3 added, 0 changed, 0 removed",
    ]
    digest = hashlib.sha256((project / "dataflow.toml").read_bytes()).hexdigest()
    assert {d["digest"] for d in deploys} == {digest}
    assert {d["project"] for d in deploys} == {str(project.resolve())}
    assert {d["revision"] for d in deploys} == {None}  # not a git checkout
    found = json.loads(cli.ok("export", "-").out)
    assert {i["itemtype"]: i.get("itemvalue") for i in found["jobs"]["load"]} == {
        "IN": None,
        "OUT": None,
        "retries": "2",
        "ready_by": "06:00",
        "region": "eu",
    }
    (project / "dataflow.toml").write_text(PROJECT.replace("retries = 2", "retries = 5"))
    changed = cli.utility("--json", "plan", "sales")
    assert changed.code == 2, changed
    assert json.loads(changed.out)["changes"] == [
        {
            "action": "change",
            "sign": "~",
            "kind": "job",
            "name": "load",
            "detail": "retries: '2' -> '5'",
        }
    ]
    cli.ok("apply", "sales")
    cli.ok("ready", "raw", "1")  # a cron tick runs the project's script
    assert cli.run_job(str(project / "jobs" / "load.sh")).exit_code == 0
    assert (tmp_path / "ran").read_text() == "ran 1\n"


def test_prune_is_refused_while_a_removed_job_has_a_live_run(cli, tmp_path, project):
    cli.ok("apply", "sales")
    cli.ok("register-dataset", "extra")
    cli.ok("register-job", "old", "--in", "clean", "--out", "extra")
    kept = cli.utility("plan", "sales")
    assert kept.code == 0 and "job old: in the store, not in the project (kept" in kept.out
    cli.ok("ready", "clean", "1")
    script(tmp_path, "old.sh", "touch started; until [ -e go ]; do sleep 0.05; done")
    runjob = start_runjob(cli, "./old.sh")
    try:
        wait_for(lambda: (tmp_path / "started").exists(), what="the old job to start")
        before = state(tmp_path)
        refused = cli.utility("apply", "sales", "--prune")
        assert refused.code == 2 and refused.err.count("\n") == 1, refused
        assert "job 'old' is not in the project, but a run of it lives (dataid 1)" in refused.err
        assert state(tmp_path) == before
    finally:
        (tmp_path / "go").touch()
        runjob.wait(60)
    pruned = cli.ok("apply", "sales", "--prune")
    assert pruned.lines == [
        "- job old",
        "- dataset extra",
        "applied: 0 added, 0 changed, 2 removed",
    ]
    assert cli.utility("plan", "sales", "--prune").code == 0


MISTAKES = [
    ("[project\n", 1, "Expected ']'"),
    (PROJECT + "color = 'red'\n", 20, "unknown key 'color' in job 'load'"),
    (PROJECT + "\n[jobs.nothing]\nin = ['raw']\nout = ['other']\n", 21, "job 'nothing': no script"),
    (PROJECT.replace('out = ["clean"]', 'out = ["clean", "mystery"]'), 16, "does not declare"),
    (
        PROJECT + "\n[jobs.back]\nscript = 'jobs/back.sh'\nin = ['clean']\nout = ['raw']\n",
        21,
        "job 'back' would make a cycle: back -> load -> back",
    ),
    (
        PROJECT.replace('tablename = "raw"', 'tablename = "raw"\npassword = "hunter2"'),
        8,
        "a password is never in clear",
    ),
    (PROJECT.replace("retries = 2", "retries = 'many'"), 17, "setting retries must be a number"),
    (PROJECT.replace("[jobs.load]", "[jobz.load]"), 14, "unknown table [jobz]"),
]


@pytest.mark.parametrize(("text", "line", "said"), MISTAKES)
def test_every_mistake_is_one_line_naming_file_and_line_and_changes_nothing(
    cli, tmp_path, project, text, line, said
):
    _project(project, text, scripts=("load", "back"))
    before = state(tmp_path)
    for command, code in (("plan", 1), ("apply", 2)):
        refused = cli.utility(command, "sales")
        assert refused.code == code and refused.err.count("\n") == 1, (command, refused)
        assert refused.err.startswith(f"error: sales/dataflow.toml:{line}: "), refused.err
        assert said in refused.err and "Traceback" not in refused.err, refused.err
    assert state(tmp_path) == before


def test_a_password_from_a_host_file_is_stored_encrypted_and_unchanged_if_the_same(
    cli, tmp_path, project
):
    secret = tmp_path / "raw.password"
    secret.write_text("s3cret\n")
    text = PROJECT.replace(
        'tablename = "raw"', f'tablename = "raw"\npassword = {{ file = "{secret}" }}'
    )
    _project(project, text)
    passkey = {"PASSKEY": "plugh"}
    refused = cli.utility("apply", "sales")
    assert refused.code == 2 and "needs the passkey" in refused.err, refused
    cli.ok("apply", "sales", env=passkey)
    (token,) = rows(tmp_path, "select encryptedpass from dataset where datasetid = 'raw'")[0]
    assert token and "s3cret" not in token
    assert cli.utility("plan", "sales", env=passkey).code == 0  # the same password
    secret.write_text("new one\n")
    changed = cli.utility("plan", "sales", env=passkey)
    assert changed.code == 2 and "~ dataset raw: encryptedpass changed" in changed.out, changed
    assert "new one" not in changed.out + changed.err


_NAME = st.text("abcdefgh", min_size=1, max_size=6)
_TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\0"), max_size=12)


SETTING_VALUES = {"retries": ["0", "3"], "timeout": ["3", "7.5"], "ready_by": ["07:30", "23:59+1"]}


@st.composite
def _registrations(draw):
    """Datasets with any metadata, and a chain of jobs with some settings and names."""
    names = draw(st.lists(_NAME, min_size=2, max_size=5, unique=True))
    datasets = {
        name: {c: draw(st.none() | _TEXT) for c in ("hostname", "schemaname", "tablename")}
        for name in names
    }
    jobs = {}
    for n, (source, target) in enumerate(itertools.pairwise(names)):
        jobs[f"j{n}"] = {
            "in": [source],
            "out": [target],
            "settings": {
                key: draw(st.sampled_from(values))
                for key, values in SETTING_VALUES.items()
                if draw(st.booleans())
            },
            "env": draw(
                st.dictionaries(st.sampled_from(["region", "checkpoint"]), _TEXT, max_size=2)
            ),
        }
    return datasets, jobs


@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)
@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(found=_registrations())
def test_export_then_apply_then_plan_shows_nothing(cli, tmp_path, found):
    """Whatever registrations a store holds, its project file applied to a new store
    makes the same store: plan shows nothing on either."""
    import os

    from dataflow.ops import plans, project
    from dataflow.run.claim.settings import settings_of
    from dataflow.store import create_store

    datasets, jobs = found
    policy = host_policy(tmp_path, '[env]\nallow = ["region", "checkpoint"]\n')
    saved, os.environ["DATAFLOW_POLICY"] = os.environ.get("DATAFLOW_POLICY"), str(policy)
    stores = []
    for n in range(2):
        path = tmp_path / f"case{n}.db"
        path.unlink(missing_ok=True)
        stores.append(create_store(path)[0])
    source, target = stores
    try:
        with source.transaction():
            for name, columns in datasets.items():
                source.put_dataset({"datasetid": name, "database": "csv", **columns})
            for jobid, job in jobs.items():
                settings_of(jobid, job["settings"])
                items = [("IN", d, None) for d in job["in"]] + [
                    ("OUT", d, None) for d in job["out"]
                ]
                items += [(k, None, v) for k, v in {**job["settings"], **job["env"]}.items()]
                source.put_job(jobid, items)
        folder = tmp_path / "exported"
        folder.mkdir(exist_ok=True)
        (folder / "dataflow.toml").write_text(project.dump(source.datasets(), source.job_rows()))
        for jobid in jobs:
            script(folder, f"{jobid}.sh", "true")
        text = (folder / "dataflow.toml").read_text()
        text = text.replace("[project]", "[project]", 1)
        for jobid in jobs:
            text = text.replace(f"[jobs.{jobid}]\n", f'[jobs.{jobid}]\nscript = "{jobid}.sh"\n')
        (folder / "dataflow.toml").write_text(text)
        read = project.read(folder)
        assert [c for c in plans.plan(source, read, None) if plans.is_change(c)] == []
        plans.apply(target, read, None)
        assert [c for c in plans.plan(target, read, None) if plans.is_change(c)] == []
        assert target.datasets() == source.datasets()
        assert _items(target) == _items(source)
    finally:
        for store in stores:
            store.close()
        if saved is None:
            os.environ.pop("DATAFLOW_POLICY")
        else:
            os.environ["DATAFLOW_POLICY"] = saved


def _items(store) -> list[tuple]:
    return sorted(
        (r["jobid"], r["itemtype"], r["datasetid"], r["itemvalue"]) for r in store.job_rows()
    )


def test_export_project_writes_a_file_that_plan_reads(cli, tmp_path, project):
    cli.ok("apply", "sales")
    exported = cli.ok("export", "--project", "-").out
    assert "[jobs.load]" in exported and 'region = "eu"' in exported and "retries = 2" in exported
    again = _project(
        tmp_path / "again",
        exported.replace("[jobs.load]\n", '[jobs.load]\nscript = "jobs/load.sh"\n'),
    )
    assert cli.utility("plan", str(again)).code == 0
    assert textwrap.dedent(exported).startswith("# written by utility export --project")


def test_an_apply_from_a_git_checkout_records_its_commit(cli, tmp_path, project):
    import subprocess

    def git(*args: str) -> str:
        done = subprocess.run(
            [
                "git",
                "-C",
                str(project),
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@example.com",
                *args,
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.strip()

    git("init", "-q")
    git("add", ".")
    git("commit", "-q", "-m", "the sales pipeline")
    cli.ok("apply", "sales")
    (deploy,) = json.loads(cli.ok("--json", "deploys").out)
    assert deploy["revision"] == git("rev-parse", "HEAD")


def test_a_sealed_password_kept_while_its_dataset_moves_is_one_line_at_its_line(
    cli, tmp_path, project
):
    passkey = {"PASSKEY": "plugh"}
    cli.ok("apply", "sales")
    cli.ok("register-dataset", "raw", "--password-stdin", input="s3cret\n", env=passkey)
    exported = cli.ok("export", "--project", "-").out  # the password as its sealed token
    moved = exported.replace('tablename = "raw"', 'tablename = "elsewhere"')
    moved = moved.replace("[jobs.load]\n", '[jobs.load]\nscript = "jobs/load.sh"\n')
    _project(project, moved)
    line = (
        moved.splitlines().index(next(x for x in moved.splitlines() if x.startswith("password")))
        + 1
    )
    refused = cli.utility("plan", "sales", env=passkey)
    assert refused.code == 1 and refused.err.count("\n") == 1, refused
    assert refused.err.startswith(
        f"error: sales/dataflow.toml:{line}: the password of dataset 'raw'"
    )
    assert "does not open" in refused.err and "s3cret" not in refused.err


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (
            lambda t: t.replace("env = {", "env = { retries = '5',"),
            "'retries' is a setting or a row",
        ),
        (
            lambda t: t.replace(
                'tablename = "raw"', 'tablename = "raw"\npassword = { encrypted = "hunter2" }'
            ),
            "not a password in clear",
        ),
        (
            lambda t: t.replace("[jobs.load]\n", '[jobs.load]\nscript = "../outside.sh"\n'),
            "is not a file of the project",
        ),
    ],
)
def test_a_project_cannot_pass_a_setting_as_env_a_clear_token_or_a_script_outside(
    cli, tmp_path, project, change, said
):
    script(tmp_path, "outside.sh", "true")
    _project(project, change(PROJECT))
    refused = cli.utility("plan", "sales")
    assert refused.code == 1 and said in refused.err, refused


def test_a_script_linked_outside_or_named_for_another_job_is_not_the_jobs(cli, tmp_path, project):
    (project / "jobs" / "load.sh").unlink()
    script(tmp_path, "elsewhere.sh", "true")
    (project / "jobs" / "load.sh").symlink_to(tmp_path / "elsewhere.sh")
    assert "is not a file of the project" in cli.utility("plan", "sales").err
    (project / "jobs" / "load.sh").unlink()
    script(project / "jobs", "load.extra.sh", "true")  # RunJob runs it as job load.extra
    assert "job 'load': no script" in cli.utility("plan", "sales").err


def test_a_renamed_job_applies_with_prune_and_odd_names_round_trip(cli, tmp_path, project):
    cli.ok("apply", "sales")
    renamed = PROJECT.replace("[jobs.load]", "[jobs.'load orders']")
    _project(project, renamed, scripts=("load orders",))
    assert "already produced by job 'load'" in cli.utility("apply", "sales").err
    assert cli.ok("apply", "sales", "--prune").lines[0] == "- job load"
    exported = cli.ok("export", "--project", "-").out
    assert '[jobs."load orders"]' in exported
    (project / "dataflow.toml").write_text(exported)
    assert cli.utility("plan", "sales").code == 0


def test_a_plan_checks_the_jobs_it_would_not_change(cli, tmp_path, project):
    cli.ok("apply", "sales")
    host_policy(tmp_path, "")  # the host no longer lets a row set 'region'
    refused = cli.utility("plan", "sales")
    assert refused.code == 1 and "'region' is not an environment name" in refused.err, refused


def test_moving_a_dataset_that_keeps_its_sealed_token_is_refused_without_the_passkey(
    cli, tmp_path, project
):
    cli.ok("apply", "sales")
    cli.ok("register-dataset", "raw", "--password-stdin", input="s3cret\n", env={"PASSKEY": "k"})
    exported = cli.ok("export", "--project", "-").out.replace(
        "[jobs.load]\n", '[jobs.load]\nscript = "jobs/load.sh"\n'
    )
    _project(project, exported.replace('tablename = "raw"', 'tablename = "moved"'))
    before = state(tmp_path)
    refused = cli.utility("apply", "sales")  # no passkey here
    assert refused.code == 2 and "its password is sealed to its address" in refused.err, refused
    assert state(tmp_path) == before
