"""utility deploy: a project's git ref fetched into DIR/releases/<commit>, checked,
applied, made DIR/current; --rollback. Real git (a bare repository in tmp_path, commits,
tags), real RunJob ticks through DIR/current."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from support import script, start_runjob, state, wait_for

pytestmark = pytest.mark.both_stores

PROJECT = """\
[project]
name = "sales"
test = "{test}"

[datasets.raw]
database = "csv"

[datasets.clean]
database = "parquet"

[jobs.load]
in = ["raw"]
out = ["clean"]
retries = {retries}
"""
# the job says which release ran it; chunk 1 waits for the file "go" (a long run)
JOB = 'echo "{version} $dataid" >> ran; [ "$dataid" != 1 ] || {{ touch started; until [ -e go ]; do sleep 0.05; done; }}'


def _git(folder: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(folder), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


class Origin:
    """A project's repository: a bare one, and a working copy that pushes releases to it."""

    def __init__(self, tmp_path: Path) -> None:
        self.bare, self.work = tmp_path / "origin.git", tmp_path / "work"
        subprocess.run(["git", "init", "-q", "--bare", str(self.bare)], check=True)
        subprocess.run(["git", "init", "-q", str(self.work)], check=True)

    def release(self, tag: str, retries: int = 2, test: str = "true") -> str:
        (self.work / "dataflow.toml").write_text(PROJECT.format(test=test, retries=retries))
        (self.work / "jobs").mkdir(exist_ok=True)
        script(self.work / "jobs", "load.sh", JOB.format(version=tag))
        _git(self.work, "add", ".")
        _git(self.work, "commit", "-q", "-m", tag)
        _git(self.work, "tag", tag)
        _git(self.work, "push", "-q", str(self.bare), "HEAD:refs/heads/main", "--tags")
        return _git(self.work, "rev-parse", "HEAD")


@pytest.fixture
def origin(cli, tmp_path) -> Origin:
    cli.ok("createtables")
    return Origin(tmp_path)


def _deploy(cli, origin: Origin, *args: str, env=None):
    return cli.utility("deploy", str(origin.bare), "--into", "srv", *args, env=env)


def _retries(cli) -> str:
    items = json.loads(cli.ok("export", "-").out)["jobs"]["load"]
    return next(i["itemvalue"] for i in items if i["itemtype"] == "retries")


def test_a_deploy_under_a_running_job_lets_it_finish_on_its_release_then_rollback(
    cli, tmp_path, origin
):
    first = origin.release("v1")
    done = _deploy(cli, origin, "--ref", "v1")
    assert done.code == 0, done
    assert done.lines[-1].startswith(f"deployed {first[:12]}: 3 added, 0 changed, 0 removed")
    current = tmp_path / "srv" / "current"
    assert current.resolve() == (tmp_path / "srv" / "releases" / first).resolve()
    assert cli.utility("plan", str(current)).code == 0
    cli.ok("ready", "raw", "1", "2")
    job = str(current / "jobs" / "load.sh")  # cron's line: RunJob DIR/current/jobs/...
    running = start_runjob(cli, job)
    try:
        wait_for(lambda: (tmp_path / "started").exists(), what="the v1 job to start")
        second = origin.release("v2", retries=5)
        done = _deploy(cli, origin, "--ref", "v2")
        assert done.code == 0 and "~ job load: retries: '2' -> '5'" in done.out, done
        assert current.resolve().name == second and _retries(cli) == "5"
    finally:
        (tmp_path / "go").touch()
    assert running.wait(60) == 0
    assert cli.run_job(job).exit_code == 0  # the next tick runs the new release
    assert (tmp_path / "ran").read_text().splitlines() == ["v1 1", "v2 2"]
    deploys = json.loads(cli.ok("--json", "deploys").out)
    assert [d["revision"] for d in deploys] == [second, first]
    back = cli.utility("deploy", "--rollback", "--into", "srv")
    assert back.code == 0 and back.lines[-1].startswith(f"rolled back to {first[:12]}"), back
    assert current.resolve().name == first and _retries(cli) == "2"


@pytest.mark.parametrize(
    ("break_it", "said"),
    [
        ({"test": "exit 3"}, "the project's test command failed (exit code 3"),
        ({"ref": "v9"}, "cannot fetch v9 of"),
        ({"retries": "'many'"}, "setting retries must be a number"),
    ],
)
def test_a_deploy_that_fails_a_check_changes_nothing(cli, tmp_path, origin, break_it, said):
    first = origin.release("v1")
    assert _deploy(cli, origin, "--ref", "v1").code == 0
    if "ref" not in break_it:
        origin.release("v2", retries=break_it.get("retries", 5), test=break_it.get("test", "true"))
    before = state(tmp_path)
    failed = _deploy(cli, origin, "--ref", break_it.get("ref", "v2"))
    assert failed.code == 2 and failed.err.count("\n") == 1, failed
    assert said in failed.err and "Traceback" not in failed.err, failed.err
    assert state(tmp_path) == before
    assert (tmp_path / "srv" / "current").resolve().name == first


def test_a_rollback_with_no_previous_release_is_one_line(cli, tmp_path, origin):
    origin.release("v1")
    assert _deploy(cli, origin, "--ref", "v1").code == 0
    refused = cli.utility("deploy", "--rollback", "--into", "srv")
    assert refused.code == 2 and "no previous release to go back to" in refused.err, refused
    both = cli.utility("deploy", str(origin.bare), "--rollback", "--into", "srv")
    assert both.code == 2 and "not both" in both.err


@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)  # the example's own store
@pytest.mark.long
def test_the_project_example_deploys_plans_and_rolls_back(cli, tmp_path):
    run = Path(__file__).resolve().parent.parent / "examples" / "project" / "run.sh"
    result = cli(str(run), env={"DEMO_DIR": str(tmp_path / "demo")}, timeout=300)
    assert result.code == 0, result.out[-3000:] + result.err[-3000:]
    out = result.out
    assert "deployed " in out and ": 3 added, 0 changed, 0 removed; current -> " in out
    assert "total: 2 READY, 0 FAILED" in out
    assert "~ job total: retries: '2' -> '5'\nplan: 0 added, 1 changed, 0 removed\n(exit 2" in out
    assert "rolled back to " in out and "~ job total: retries: '5' -> '2'" in out
    totals = sorted((tmp_path / "demo" / "data" / "orders_total").glob("dataid=*/total.csv"))
    assert [p.read_text() for p in totals] == ["2025-11-01,25.50\n", "2025-11-02,35.50\n"]


def test_the_test_command_runs_in_a_copy_without_the_passkey_or_the_store(cli, tmp_path, origin):
    """A ref under review is not trusted with the passkey, the store's address, or the
    release folder cron runs (its test may write anything in its own copy)."""
    test = (
        "if env | grep -q '^PASSKEY\\\\|^DATAFLOW_DB'; then exit 7; fi; echo '# x' >> dataflow.toml"
    )
    commit = origin.release("v1", test=test)
    done = _deploy(cli, origin, "--ref", "v1", env={"PASSKEY": "plugh"})
    assert done.code == 0, done
    release = tmp_path / "srv" / "releases" / commit
    assert not (release / "dataflow.toml").read_text().endswith("# x\n")
    assert _git(release, "status", "--porcelain") == ""
    assert _deploy(cli, origin, "--ref", "v1").code == 0  # the same release, again


def test_a_deploy_from_a_hook_through_a_linked_folder_and_a_relative_path(cli, tmp_path, origin):
    origin.release("v1")
    hooked = tmp_path / "hook.git"
    subprocess.run(["git", "init", "-q", "--bare", str(hooked)], check=True)
    (tmp_path / "deep" / "srv").mkdir(parents=True)
    (tmp_path / "linked").symlink_to(tmp_path / "deep" / "srv")
    done = cli.utility(
        "deploy", "origin.git", "--ref", "v1", "--into", "linked", env={"GIT_DIR": str(hooked)}
    )
    assert done.code == 0, done
    assert (tmp_path / "linked" / "current" / "dataflow.toml").is_file()
    assert _git(hooked, "rev-parse", "--is-shallow-repository") == "false"


def test_a_deploy_folder_whose_current_is_not_a_link_is_refused_before_anything(
    cli, tmp_path, origin
):
    origin.release("v1")
    (tmp_path / "srv" / "current" / "x").mkdir(parents=True)
    before = state(tmp_path)
    refused = _deploy(cli, origin, "--ref", "v1")
    assert refused.code == 2 and "srv/current is not a link" in refused.err, refused
    assert state(tmp_path) == before and not (tmp_path / "srv" / "releases").exists()
