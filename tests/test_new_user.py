"""What a new user tripped on (issue 44): a folder drain's idle lines name their jobs, a
drain's summary counts chunks apart from attempts, alerts carry their Apprise type, a
what-if ``check --at`` alerts no one unless asked, a batch's log names the entry point
that ran, ``register-job`` says how to register an unknown dataset, ``ready_by`` judges
hourly, weekly and monthly chunks, and ``utility chunks`` is what ``runs`` always listed."""

from __future__ import annotations

import json
import re

import pytest

from dataflow.dataids import CLOCKS
from support import STAMP, host_policy, script
from support.receivers import http_receiver

pytestmark = pytest.mark.both_stores

IDLE = "no suitable data available for job. Not running it"


@pytest.fixture
def hook(cli):
    """A real Apprise ``json://`` receiver on 127.0.0.1 (``hook.got``: the bodies it took,
    with Apprise's ``type``), allowed by the host's policy."""
    cli.env["DATAFLOW_ALERT_TIMEOUT"] = "60"  # a busy machine still delivers
    host_policy(cli.cwd, '[alerts]\ntargets = ["json://127.0.0.1"]\n')
    with http_receiver(lambda _, __, body: json.loads(body)) as server:
        server.url = f"json://127.0.0.1:{server.server_address[1]}/hook"  # type: ignore[attr-defined]
        yield server


def _registered(cli, *jobs: tuple[str, str, str]) -> None:
    """A store with the datasets and jobs ``(jobid, in, out)`` named."""
    cli.ok("createtables")
    for name in sorted({d for _, i, o in jobs for d in (i, o)} - set(CLOCKS)):
        cli.ok("register-dataset", name)
    for jobid, source, target in jobs:
        cli.ok("register-job", jobid, "--in", source, "--out", target)


def test_a_folder_drain_names_the_job_of_each_idle_line(cli, tmp_path):
    _registered(cli, ("a", "raw", "mid"), ("b", "mid", "agg"), ("c", "agg", "top"))
    jobs = tmp_path / "jobs"
    jobs.mkdir()
    for name in "abc":
        script(jobs, f"{name}.sh", "true")
    drained = cli.runjob("--all", "jobs/")
    assert drained.code == 0 and drained.err == "", drained
    assert [line.split(": ", 1)[1] for line in drained.lines] == [
        f"a: {IDLE}",
        f"b: {IDLE}",
        f"c: {IDLE}",
    ]
    assert all(re.match(STAMP, line) for line in drained.lines), drained.out
    alone = cli.runjob("./jobs/a.sh")  # a single RunJob: the seed's line, to the letter
    assert re.fullmatch(rf"{STAMP}: {re.escape(IDLE)}\n", alone.out), alone


def test_a_drains_summary_counts_chunks_and_their_attempts_apart(cli, tmp_path):
    _registered(cli, ("clean", "raw", "tidy"))
    cli.ok("set", "clean", "retries=3")
    cli.ok("ready", "raw", "1", "2")
    script(tmp_path, "clean.sh", '[ "$dataid" != 1 ]')  # chunk 1 fails, every time
    drained = cli.runjob("--all", "./clean.sh")
    assert drained.code == 1, drained
    assert re.fullmatch(
        rf"{STAMP}: clean: 1 READY, 1 FAILED in \d+\.\d s "
        r"\(2 chunks, 5 attempts, [\d.]+/s\); 0 waiting",
        drained.lines[-1],
    ), drained.out
    assert sum(" clean 1 FAILED (attempt " in line for line in drained.lines) == 4


@pytest.mark.long
def test_an_alert_carries_its_apprise_type(cli, tmp_path, hook):
    _registered(cli, ("load", "raw", "clean"))
    cli.ok("set", "load", f"alerts={hook.url}")
    cli.ok("ready", "raw", "1")
    script(tmp_path, "load.sh", "[ -e fixed ]")
    assert cli.runjob("./load.sh").code == 1
    (tmp_path / "fixed").touch()
    cli.ok("resubmit", "load", "1")
    assert cli.runjob("./load.sh").code == 0
    assert [(got["title"], got["type"]) for got in hook.got] == [
        ("dataflow: load 1 FAILED", "failure"),
        ("dataflow: load 1 recovered", "success"),
    ]


def test_check_at_a_time_alerts_no_one_unless_asked(cli, hook):
    _registered(cli, ("load", "raw", "clean"))
    cli.ok("set", "load", "ready_by=06:00", f"alerts={hook.url}")
    cli.ok("dml", "update job set modified = '2030-01-01 00:00:00'")
    what_if = cli.utility("check", "--at", "2030-01-02 07:00")
    assert what_if.code == 1 and what_if.lines[2].split()[:2] == ["load", "2030-01-02"], what_if
    assert hook.got == []
    assert not list(cli.cwd.rglob("late-alerted"))  # nothing recorded as told either
    asked = cli.utility("check", "--at", "2030-01-02 07:00", "--alert")
    assert asked.code == 1 and asked.err == "", asked
    assert [(got["title"], got["type"]) for got in hook.got] == [
        ("dataflow: load 2030-01-02 late", "warning")
    ]


def test_register_job_says_how_to_register_an_unknown_dataset(cli):
    _registered(cli, ("load", "raw", "clean"))
    refused = cli.utility("register-job", "shape", "--in", "clean", "--out", "daily_agg")
    assert refused.code == 2 and refused.out == "", refused
    command = "utility register-dataset daily_agg"
    assert refused.err == (
        f"error: unknown dataset 'daily_agg' (see 'utility datasets'); register it first: "
        f"{command}\n"
    )
    assert cli.sh(command).code == 0  # the line as given, typed into a shell
    cli.ok("register-job", "shape", "--in", "clean", "--out", "daily_agg")
    both = cli.utility("register-job", "tidy", "--in", "wide", "--out", "narrow")
    assert both.err == (
        "error: unknown datasets 'wide', 'narrow' (see 'utility datasets'); register them "
        "first: utility register-dataset wide && utility register-dataset narrow\n"
    )


@pytest.mark.long
def test_ready_by_judges_hourly_weekly_and_monthly_chunks(cli, tmp_path):
    _registered(
        cli,
        ("hourly", "this_hour", "hits"),
        ("weekly", "this_week", "report"),
        ("monthly", "this_month", "bill"),
        ("feed", "drops", "rows"),  # no clock: its dataids name hours YYYY-MM-DD-HH
    )
    cli.ok("set", "hourly", "ready_by=00:15")  # a quarter past each hour
    cli.ok("set", "weekly", "ready_by=09:00+1")  # the week's Tuesday, 09:00
    cli.ok("set", "monthly", "ready_by=09:00+2")  # the month's 3rd, 09:00
    cli.ok("set", "feed", "ready_by=00:30")
    cli.ok("dml", "update job set modified = '2029-12-01 00:00:00'")
    cli.ok("ready", "drops", "2030-01-02-08")
    script(tmp_path, "feed.sh", "exit 3")
    assert cli.runjob("./feed.sh").code == 3  # 2030-01-02-08 FAILED

    def late(at: str) -> list[tuple[str, str, str, str]]:
        checked = cli.utility("--json", "check", "--at", at)
        assert checked.code in (0, 1) and checked.err == "", checked
        found = json.loads(checked.out)
        return [(c["jobid"], c["dataid"], c["due"], c["status"]) for c in found]

    assert sorted(late("2030-01-02 10:14")) == [
        ("feed", "2030-01-02-08", "2030-01-02 08:30", "FAILED"),
        ("feed", "2030-01-02-09", "2030-01-02 09:30", "no chunk yet"),
        ("hourly", "2030-01-02T09", "2030-01-02 09:15", "no chunk yet"),
        ("monthly", "2029-12", "2029-12-03 09:00", "no chunk yet"),
        ("weekly", "2030-W01", "2030-01-01 09:00", "no chunk yet"),  # Monday 2029-12-31
    ]
    hours = [row[:2] for row in late("2030-01-02 10:16") if row[0] == "hourly"]
    assert hours == [("hourly", "2030-01-02T10")]
    months = [row[:3] for row in late("2030-01-03 09:01") if row[0] == "monthly"]
    assert months == [("monthly", "2030-01", "2030-01-03 09:00")]


def test_chunks_lists_the_status_rows_and_runs_is_its_old_name(cli, tmp_path):
    _registered(cli, ("load", "raw", "clean"))
    cli.ok("ready", "raw", "1")
    script(tmp_path, "load.sh", "true")
    assert cli.runjob("./load.sh").code == 0
    chunks = cli.ok("chunks")
    header, _, *rows = chunks.lines
    assert header.split() == ["DATAID", "DATASETID", "JOBID", "LOCKTYPE", "MODIFIED", "STATUS"]
    assert [row.split()[:3] for row in rows] == [["1", "clean", "load"], ["1", "raw", "external"]]
    assert cli.ok("runs").out == chunks.out
    assert json.loads(cli.ok("--json", "runs", "--limit", "1").out) == json.loads(
        cli.ok("--json", "chunks", "--limit", "1").out
    )
    assert "runs" in cli.ok("runs", "--help").out and "chunks" in cli.ok("runs", "--help").out


ENTRY_POINTS = """\
def run(spark, job):
    print(f"job: run {job.dataid}", flush=True)
    if job.dataid == "2":
        raise ValueError("chunk 2 is poisoned")


def run_batch(spark, batch):
    print(f"job: run_batch {' '.join(batch.dataids)}", flush=True)
    if "2" in batch.dataids:
        raise ValueError("chunk 2 is poisoned")
"""


@pytest.mark.spark
@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)  # the log, not the store
def test_a_batch_drains_log_names_the_entry_point_that_ran(cli, tmp_path, quick_jvm):
    """A batch of 3 with a poisoned chunk 2 is split ([1 2] [3], then [1] [2]): a chunk
    run alone is run by ``run()`` where the job defines it, and its log says so; a job
    with ``run_batch`` only runs it for the one chunk."""
    cli.env["DATAFLOW_SPARK_ARGS"] = quick_jvm  # its JVMs' start only
    _registered(cli, ("both", "raw", "tidy"), ("batched", "raw", "wide"))
    cli.ok("ready", "raw", "1", "2", "3")
    (tmp_path / "both.py").write_text(ENTRY_POINTS)
    (tmp_path / "batched.py").write_text(ENTRY_POINTS.split("\n\n\n")[1])
    for job in ("both", "batched"):
        cli.ok("set", job, "spark_args=--master local[1] --driver-memory 512m")
        drained = cli.runjob("--batch", "3", f"./{job}.py", timeout=900)
        assert drained.code == 1, drained
        assert "2 READY, 1 FAILED in " in drained.lines[-1], drained.out
    logs = tmp_path / "dataflow.db.d" / "logs"
    first, third = (logs / "both" / "1.1.log").read_text(), (logs / "both" / "3.1.log").read_text()
    assert "dataflow: running 3 chunks as one batch, in run_batch(): 1 2 3\n" in first, first
    assert "dataflow: running 2 chunks as one batch, in run_batch(): 1 2\n" in first, first
    assert "dataflow: running chunk 1 alone, in run()\njob: run 1\n" in first, first
    assert "dataflow: running chunk 3 alone, in run()\njob: run 3\n" in third, third
    third = (logs / "batched" / "3.1.log").read_text()
    assert "dataflow: running chunk 3 alone, in run_batch()\njob: run_batch 3\n" in third, third
