"""The library under the CLIs (dataflow.api), called in this process as a notebook, an
Airflow task or a Dagster op calls it, on both stores: each call returns what it did,
raises the toolkit's errors (never SystemExit) and prints nothing. The jobs it runs are
real processes; the CLIs' own contract (their lines and exit codes, signals, crashes)
is tested through processes elsewhere (test_runjob.py, test_operator_commands.py...)."""

from __future__ import annotations

import threading
from datetime import datetime

import pytest

from dataflow import api
from dataflow.errors import (
    BadStatus,
    DataflowError,
    StoreMissing,
    StreamError,
    UnknownChunk,
    UnknownJob,
    UsageError,
)
from dataflow.ops import plans
from dataflow.run.claim.lifecycle import FAILED, READY, RESUBMIT, RUNNING
from support import base_env, history, in_rows, rows, script, statuses

pytestmark = pytest.mark.both_stores


@pytest.fixture
def work(chain, tmp_path, address, monkeypatch, capfd):
    """The chain's job ``work`` (chunks 1..3 of src READY), with this process's
    environment, working folder and captured output as a RunJob's in tmp_path: what
    the library is given is ``db`` alone. Output so far (the setup's) is dropped."""
    for name, value in base_env(tmp_path, address).items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("DATAFLOW_DB")  # each call names its store
    monkeypatch.chdir(tmp_path)
    script(tmp_path, "work.sh", 'echo "ran $dataid"; echo "$dataid" >> ran.log')
    capfd.readouterr()
    return str(address)


def _ran(tmp_path) -> list[str]:
    log = tmp_path / "ran.log"
    return log.read_text().split() if log.exists() else []


def _silent(capfd) -> None:
    out, err = capfd.readouterr()  # what this process and its children wrote
    assert (out, err) == ("", "")


def test_run_job_claims_the_smallest_chunk_and_records_ready(work, tmp_path, capfd):
    done = api.run_job("./work.sh", db=work)
    assert (done.jobid, done.every, done.started, done.ready, done.failed) == (
        "work", False, 1, 1, 0,
    )  # fmt: skip
    assert done.exit_code == 0 and done.last.exit_code == 0 and done.warnings == ()
    assert statuses(tmp_path, "work") == {"1": READY}
    assert in_rows(tmp_path, "work") == []  # its input's lock released
    assert _ran(tmp_path) == ["1"]
    _silent(capfd)  # the job's "ran 1" went to its log, not to this process's stdout


def test_run_job_records_a_failure_as_a_result_not_an_error(work, tmp_path, capfd):
    script(tmp_path, "work.sh", "echo broken >&2; exit 3")
    done = api.run_job("./work.sh", db=work)
    assert (done.started, done.ready, done.failed, done.exit_code) == (1, 0, 1, 3)
    assert statuses(tmp_path, "work") == {"1": FAILED}
    ((dataid, attempt, status, code, _, reason),) = history(tmp_path, "work")
    assert (dataid, attempt, status, code) == ("1", 1, FAILED, 3) and "broken" in reason
    _silent(capfd)


def test_run_job_with_nothing_to_do_starts_nothing(work, tmp_path, capfd):
    for _ in range(3):
        assert api.run_job("./work.sh", db=work).ready == 1
    idle = api.run_job("./work.sh", db=work)
    assert (idle.started, idle.exit_code, idle.last) == (0, 0, None)
    assert sorted(_ran(tmp_path)) == ["1", "2", "3"]
    _silent(capfd)


def test_drain_runs_each_ready_chunk_once_and_tells_each_event(work, tmp_path, capfd):
    events = []
    done = api.drain("./work.sh", db=work, parallel=2, notify=events.append)
    assert (done.every, done.started, done.ready, done.failed, done.waiting) == (
        True, 3, 3, 0, 0,
    )  # fmt: skip
    assert done.exit_code == 0
    assert sorted(_ran(tmp_path)) == ["1", "2", "3"]  # each once
    assert statuses(tmp_path, "work") == dict.fromkeys("123", READY)
    ended = sorted(e.dataid for e in events if e.kind == "ended")
    assert ended == ["1", "2", "3"]
    assert sorted(e.dataid for e in events if e.kind == "launch") == ended
    assert api.drain("./work.sh", db=work).started == 0  # nothing left: none runs again
    assert sorted(_ran(tmp_path)) == ["1", "2", "3"]
    _silent(capfd)


def test_a_drain_with_failures_exits_1_and_says_which(work, tmp_path, capfd):
    script(tmp_path, "work.sh", '[ "$dataid" != 2 ]')
    done = api.drain("./work.sh", db=work)
    assert (done.ready, done.failed, done.exit_code) == (2, 1, 1)
    assert statuses(tmp_path, "work") == {"1": READY, "2": FAILED, "3": READY}
    _silent(capfd)


def test_preview_names_the_chunk_and_changes_nothing(work, tmp_path, capfd):
    seen = api.preview("./work.sh", db=work)
    assert (seen.jobid, seen.dataid, seen.cap_full) == ("work", "1", False)
    assert seen.command.endswith("work.sh")
    assert seen.environment["dataid"] == "1" and seen.environment["jobid"] == "work"
    assert statuses(tmp_path, "work") == {}  # nothing claimed
    _silent(capfd)


def test_resubmit_and_status_results(work, tmp_path, capfd):
    api.drain("./work.sh", db=work)
    would = api.resubmit("work", "2", db=work, dry_run=True)
    assert [(c.jobid, c.dataid, c.before, c.after) for c in would] == [
        ("work", "2", READY, RESUBMIT)
    ]
    assert statuses(tmp_path, "work")["2"] == READY  # a dry run changes nothing
    (change,) = api.resubmit("work", "2", db=work, by="airflow")
    assert (change.before, change.after) == (READY, RESUBMIT)
    (row,) = api.status("work", db=work)
    assert row["jobid"] == "work"
    assert api.run_job("./work.sh", db=work).ready == 1  # the resubmitted chunk runs again
    assert sorted(_ran(tmp_path)) == ["1", "2", "2", "3"]
    assert statuses(tmp_path, "work") == dict.fromkeys("123", READY)
    _silent(capfd)


def test_recover_marks_a_dead_runs_chunk_failed(work, tmp_path, chain, capfd):
    chain.ok("forcejob", "work", "9")  # RUNNING, and no process of it lives
    capfd.readouterr()
    assert statuses(tmp_path, "work") == {"9": RUNNING}
    done = api.recover(db=work)
    assert [(c.jobid, c.dataid, c.before, c.after) for c in done.changes] == [
        ("work", "9", RUNNING, FAILED)
    ]
    assert done.problems == []
    assert statuses(tmp_path, "work") == {"9": FAILED}
    assert api.recover("work", db=work).changes == []  # nothing more
    _silent(capfd)


def test_hold_release_and_endjob(work, tmp_path, capfd):
    api.run_job("./work.sh", db=work)
    held = api.hold("work", "1", db=work)
    assert (held.before, held.after) == (READY, "HOLD")
    assert api.release("work", "1", db=work).after == READY
    assert api.endjob("work", "1", "resubmit", db=work) == (1, 0)
    assert statuses(tmp_path, "work") == {"1": RESUBMIT}
    _silent(capfd)


def test_apply_makes_the_store_match_a_project(work, tmp_path, capfd):
    folder = tmp_path / "project"
    (folder / "jobs").mkdir(parents=True)
    script(folder / "jobs", "copy.sh", "exit 0")
    (folder / "dataflow.toml").write_text(
        '[project]\nname = "p"\n\n[datasets.a]\n\n[datasets.b]\n\n'
        '[jobs.copy]\nin = ["a"]\nout = ["b"]\n'
    )
    planned = api.plan(str(folder), db=work)
    added = [(c.sign, c.kind, c.name) for c in planned if plans.is_change(c)]
    assert added == [("+", "dataset", "a"), ("+", "dataset", "b"), ("+", "job", "copy")]
    assert rows(tmp_path, "select jobid from job where jobid = 'copy'") == []  # a plan
    applied = api.apply(str(folder), db=work)
    assert [(c.sign, c.kind, c.name) for c in applied if plans.is_change(c)] == added
    assert sorted(rows(tmp_path, "select itemtype, datasetid from job where jobid = 'copy'")) == [
        ("IN", "a"), ("OUT", "b"),
    ]  # fmt: skip
    assert not any(plans.is_change(c) for c in api.plan(str(folder), db=work))  # it matches
    _silent(capfd)


def test_drain_folder_runs_producers_before_consumers(work, tmp_path, chain, capfd):
    chain.ok("register-dataset", "final")
    chain.ok("register-job", "after", "--in", "dst", "--out", "final")
    capfd.readouterr()
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    script(jobs, "after.sh", 'echo "after $dataid" >> ../order.log')
    script(jobs, "work.sh", 'echo "work $dataid" >> ../order.log')
    script(jobs, "stray.sh", "exit 0")
    done = api.drain_folder(str(jobs), db=work)
    assert (done.exit_code, done.jobs, done.interrupted) == (0, ["work", "after"], None)
    assert done.skipped == [f"{jobs / 'stray.sh'}: no job 'stray' is registered; skipped"]
    assert statuses(tmp_path, "after") == dict.fromkeys("123", READY)
    _silent(capfd)  # the RunJobs' own lines went nowhere


@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda db: api.run_job("./nobody.sh", db=db), UnknownJob),
        (lambda db: api.drain("./work.sh", db=db, parallel=0), UsageError),
        (lambda db: api.drain("./work.sh", db=db, workers=2), UsageError),
        (lambda db: api.drain("./flow.py", db=db, parallel=2, workers=2), UsageError),
        (lambda db: api.resubmit("work", "77", db=db), UnknownChunk),
        (lambda db: api.endjob("work", "1", "DONE", db=db), BadStatus),
        (lambda db: api.recover("nobody", db=db), UnknownJob),
        (lambda db: api.status("nobody", db=db), UnknownJob),
    ],
)
def test_errors_are_raised_not_printed(work, tmp_path, capfd, call, error):
    script(tmp_path, "nobody.sh", "exit 0")
    with pytest.raises(error) as raised:
        call(work)
    assert "\n" not in str(raised.value)  # the one line the CLIs print
    assert statuses(tmp_path, "work") == {}  # nothing claimed nor changed
    _silent(capfd)


@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)
def test_a_missing_store_is_an_error(tmp_path, store_kind, capfd, monkeypatch):
    monkeypatch.chdir(tmp_path)
    script(tmp_path, "work.sh", "exit 0")
    with pytest.raises(StoreMissing):
        api.run_job("./work.sh", db=str(tmp_path / "none.db"))
    with pytest.raises(DataflowError):
        api.status(db=str(tmp_path / "none.db"))
    assert not (tmp_path / "none.db").exists()
    _silent(capfd)


def test_stream_launch_gives_the_command_and_its_environment(work, tmp_path, chain, capfd):
    chain.ok("register-dataset", "landing")
    chain.ok("register-dataset", "batches")
    chain.ok("register-job", "flow", "--in", "landing", "--out", "batches")
    capfd.readouterr()
    (tmp_path / "flow.py").write_text("print('a stream')\n")
    launch = api.stream_launch("flow.py", ["--fast"], db=work, passkey="secret")
    assert launch.jobid == "flow"
    assert launch.argv[0].endswith("spark-submit")
    assert launch.argv[-2:] == ["./flow.py", "--fast"]
    assert launch.environ["jobid"] == "flow" and launch.environ["DATAFLOW_DB"] == work
    assert "dataid" not in launch.environ and "secret" not in str(launch.argv)
    with pytest.raises(UsageError):
        api.stream_launch("work.sh", db=work)  # a stream is a .py script
    chain.ok("register-dataset", "more")
    chain.ok("register-dataset", "other")
    chain.ok("register-job", "two", "--in", "landing", "--out", "more", "other")
    capfd.readouterr()
    (tmp_path / "two.py").write_text("")
    with pytest.raises(StreamError, match="it has 2 OUT datasets; a stream has one"):
        api.stream_launch("two.py", db=work)
    _silent(capfd)


def test_a_stream_launch_shown_names_no_password(work, tmp_path, chain, capfd):
    """Its environ holds the decrypted password spark-submit needs; printing or logging
    the launch (an Airflow task's return value is) shows it masked."""
    chain.ok("register-dataset", "landing")
    chain.ok("register-dataset", "batches", "--password-stdin", input="s3cr3t-pw\n",
             env={"PASSKEY": "k"})  # fmt: skip
    chain.ok("register-job", "flow", "--in", "landing", "--out", "batches")
    capfd.readouterr()
    (tmp_path / "flow.py").write_text("print('a stream')\n")
    launch = api.stream_launch("flow.py", db=work, passkey="k")
    assert launch.environ["batches_password"] == "s3cr3t-pw"
    assert "s3cr3t-pw" not in repr(launch) and "s3cr3t-pw" not in str(launch)
    assert "s3cr3t-pw" not in repr(launch.environ) and "'k'" not in repr(launch)
    _silent(capfd)


def test_a_run_from_another_thread_is_refused_and_claims_nothing(work, tmp_path, capfd):
    raised = []

    def call() -> None:
        try:
            api.run_job("./work.sh", db=work)
        except UsageError as exc:
            raised.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    thread.join(60)
    assert [str(exc) for exc in raised] == [
        "a run takes its process's signals (SIGINT, SIGTERM, SIGHUP): call it from the "
        "process's main thread"
    ]
    assert statuses(tmp_path, "work") == {}
    _silent(capfd)


def test_mark_ready_lineage_and_purge(work, tmp_path, capfd):
    assert api.mark_ready("src", ["4"], db=work) == (1, 0)
    assert api.mark_ready("src", ["4", "5"], db=work) == (1, 1)  # 4 was READY already
    assert api.run_job("./work.sh", db=work).ready == 1
    found = api.lineage("dst", "1", db=work)
    assert [(p["jobid"], p["status"]) for p in found.producers] == [("work", READY)]
    assert found.runs["work"]["attempt"] == 1 and found.consumers == []
    assert found.downstream["work"].steps == []  # nothing consumes dst
    with pytest.raises(UsageError, match="dataset 'dst' has no chunk '9'"):
        api.lineage("dst", "9", db=work)
    api.resubmit("work", "1", db=work)
    assert api.run_job("./work.sh", db=work).ready == 1  # attempt 2 of chunk 1
    listed = api.purge("work", db=work, dry_run=True)  # (a chunk's last run is kept)
    assert [(r["jobid"], r["dataid"], r["attempt"]) for r in listed] == [("work", "1", 1)]
    assert len(history(tmp_path, "work")) == 2  # a dry run deletes nothing
    assert len(api.purge("work", db=work)) == 1
    assert [run[:2] for run in history(tmp_path, "work")] == [("1", 2)]
    assert statuses(tmp_path, "work") == {"1": READY}  # the statuses that gate work stay
    _silent(capfd)


def test_check_finds_a_late_chunk_and_a_what_if_tells_no_one(work, tmp_path, chain, capfd):
    chain.ok("register-dataset", "raw")
    chain.ok("register-dataset", "clean")
    chain.ok("register-job", "load", "--in", "raw", "--out", "clean", "--set", "ready_by=06:00")
    chain.ok("dml", "update job set modified = '2030-01-02 00:00:00'")
    chain.ok("ready", "raw", "2030-01-02")
    capfd.readouterr()
    assert api.check(datetime(2030, 1, 2, 5, 59), db=work) == ([], [])
    late, problems = api.check(datetime(2030, 1, 2, 6, 1), db=work)
    assert [(c.jobid, c.dataid, c.due) for c in late] == [
        ("load", "2030-01-02", "2030-01-02 06:00")
    ]
    assert problems == []
    _silent(capfd)
