"""Readable status: long failures cut to a line in tables (whole in --json), "waiting"
explained, an unknown job name answered with a guess, the store's address as the job
gets it."""

from __future__ import annotations

import html
import json
import re
import sqlite3

from support import InProcessCli as Cli  # utility in this process; RunJob a process
from support import script

SPARK = (
    "py4j.protocol.Py4JJavaError: An error occurred while calling o57.save. : "
    "org.apache.spark.SparkException: Job aborted due to stage failure: Task 0 in stage 1.0 "
    "failed 4 times, most recent failure: Lost task 0.3 in stage 1.0 (TID 3) (10.0.0.5 "
    "executor 2): java.lang.RuntimeException: bad record at line 44 of s3a://bucket/events/"
    "2026/11/25/part-00000-8f2c.snappy.parquet while reading column user_id of type bigint"
)
STACK = "\n\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAG.scala:2672)"


def _pipeline(cli: Cli) -> None:
    cli.ok("createtables")
    for name in ("src", "mid", "dst"):
        cli.ok("register-dataset", name)
    cli.ok("register-job", "extract", "--in", "src", "--out", "mid")
    cli.ok("register-job", "shape", "--in", "mid", "--out", "dst")
    cli.ok("ready", "src", "1", "2")
    script(cli.cwd, "extract.sh", '[ "$dataid" != 2 ]')
    assert cli.drain("./extract.sh").failed == 1  # extract FAILED at 2


def test_a_long_failure_is_one_line_in_status_and_history_tables_and_whole_in_json(tmp_path):
    cli = Cli(tmp_path)
    _pipeline(cli)
    assert len(SPARK) > 330
    with sqlite3.connect(tmp_path / "dataflow.db") as conn:  # as an in-process run records it
        conn.execute("update run set reason = ? where status = 'FAILED'", (SPARK + STACK,))
    for argv in (["status"], ["history"], ["history", "extract"]):
        table = cli.ok(*argv).out
        assert "DAGScheduler" not in table and "bigint" not in table, table
        assert "py4j.protocol.Py4JJavaError: An error occurred" in table
        assert max(len(line) for line in table.splitlines()) < 330, table
        failure = next(line for line in table.splitlines() if "Py4J" in line)
        assert failure.rstrip().endswith("..."), failure
    whole = json.loads(cli.ok("--json", "status").out)
    assert whole[0]["last_failure"].endswith(SPARK + STACK)
    history = json.loads(cli.ok("--json", "history").out)
    assert [r["reason"] for r in history if r["status"] == "FAILED"] == [SPARK + STACK]


def test_a_two_line_reason_shows_its_first_line_and_a_mark(tmp_path):
    cli = Cli(tmp_path)
    _pipeline(cli)
    with sqlite3.connect(tmp_path / "dataflow.db") as conn:
        conn.execute("update run set reason = 'disk full\nretry later' where status = 'FAILED'")
    assert "disk full ..." in cli.ok("history").out
    assert "retry later" not in cli.ok("status").out


def test_status_and_explain_say_what_waiting_counts(tmp_path):
    cli = Cli(tmp_path)
    _pipeline(cli)
    meaning = "the chunks a job could claim now: every input READY"
    status = cli.ok("status").out
    assert "WAITING" in status.splitlines()[0]
    assert status.splitlines()[-1].startswith(f"waiting: {meaning}")
    explained = cli.ok("explain", "shape").out
    assert "next chunk of shape: 1 (1 waiting)" in explained
    assert f"(waiting: {meaning}" in explained


def test_an_unknown_job_gets_a_guess_everywhere_a_job_name_is_taken(tmp_path):
    cli = Cli(tmp_path)
    _pipeline(cli)
    guess = "error: unknown job 'shap': did you mean 'shape'? (see 'utility jobs')\n"
    for argv in (
        ["explain", "shap"],
        ["status", "shap"],
        ["history", "shap"],
        ["log", "shap", "1"],
        ["getjob", "shap"],
        ["endjob", "shap", "1", "READY"],
        ["forcejob", "shap", "1"],
        ["deleterun", "shap", "1"],
        ["recover", "shap"],
        ["resubmit", "shap", "1"],
        ["hold", "shap", "1"],
        ["release", "shap", "1"],
        ["purge", "--job", "shap"],
        ["set", "shap", "retries=1"],
        ["unset", "shap", "retries"],
        ["unregister-job", "shap"],
        ["notify-test", "shap"],
        ["board", "--job", "shap", "--html", "board.html"],
    ):
        refused = cli.utility(*argv)
        assert (refused.code, refused.err, refused.out) == (2, guess, ""), (argv, refused)
    script(tmp_path, "shap.sh", "true")
    ran = cli.runjob("./shap.sh")
    assert (ran.code, ran.err) == (2, guess), ran
    far = cli.utility("explain", "zzz")
    assert far.err == "error: unknown job 'zzz': it has no rows in table job (see 'utility jobs')\n"
    # a job no longer registered keeps its history: still a known name there
    cli.ok("unregister-job", "extract")
    assert "FAILED" in cli.ok("history", "extract").out


def test_a_job_the_store_knows_only_by_its_chunks_or_only_by_its_runs_is_no_unknown_job(tmp_path):
    cli = Cli(tmp_path)
    _pipeline(cli)
    # an outside producer marks its chunks READY itself: no job rows, no run
    with sqlite3.connect(tmp_path / "dataflow.db") as conn:
        conn.execute(
            "insert into datastatus (dataid, datasetid, jobid, locktype, modified, status)"
            " values ('1', 'src', 'feed', 'OUT', '2026-12-01 00:00:00', 'READY')"
        )
    # extract, unregistered and its chunks forgotten, is known by its runs alone
    cli.ok("unregister-job", "extract")
    for dataid in ("1", "2"):
        cli.ok("deleterun", "extract", dataid)
    for job in ("feed", "extract"):
        refused = cli.utility("endjob", job, "9", "READY")
        assert (refused.code, refused.out) == (2, ""), refused
        assert (
            refused.err == f"error: job '{job}' has no chunk with dataid '9' (see 'utility runs')\n"
        )
    assert "FAILED" in cli.ok("history", "extract").out
    unknown = cli.utility("endjob", "nobody", "9", "READY")
    assert unknown.err.startswith("error: unknown job 'nobody'"), unknown


def test_the_job_gets_the_store_as_an_absolute_path(tmp_path):
    cli = Cli(tmp_path)
    _pipeline(cli)
    (tmp_path / "sub").mkdir()
    script(tmp_path, "shape.sh", 'echo "$DATAFLOW_DB" > seen.txt')
    ran = cli.runjob("--db", "dataflow.db", "./shape.sh", env={"DATAFLOW_DB": "elsewhere.db"})
    assert ran.code == 0, ran
    assert (tmp_path / "seen.txt").read_text() == f"{tmp_path / 'dataflow.db'}\n"


def test_the_job_gets_a_postgresql_store_without_its_password(tmp_path, pg_database):
    laptop = Cli(tmp_path)
    _pipeline(laptop)
    laptop.ok("copy-store", "--to", pg_database)
    url = pg_database.replace("postgres@", "postgres:s3cret@") + "?password=s3cret"
    shared = Cli(tmp_path, url)  # (the test server trusts: the password is not checked)
    script(tmp_path, "shape.sh", 'echo "$DATAFLOW_DB" > seen.txt; env > env.txt')
    ran = shared.runjob("./shape.sh")
    assert ran.code == 0, ran
    assert (tmp_path / "seen.txt").read_text() == f"{pg_database}\n"
    assert "s3cret" not in (tmp_path / "env.txt").read_text()


def test_the_board_says_what_to_do_about_a_failure_and_shows_what_it_blocks(tmp_path):
    cli = Cli(tmp_path)
    _pipeline(cli)  # extract FAILED at 2; shape has no chunk there, blocked by it
    cli.ok("register-dataset", "end")
    cli.ok("register-job", "load", "--in", "dst", "--out", "end")  # blocked in turn
    script(tmp_path, "shape.sh", "true")
    # shape 1 READY: load at 1 waits, nothing failed upstream
    assert cli.run_job("./shape.sh").exit_code == 0
    grid = json.loads(cli.ok("board", "--json").out)
    assert grid["blocked"] == [
        {"jobid": "shape", "dataid": "2", "why": "blocked: extract FAILED at 2"},
        {"jobid": "load", "dataid": "2", "why": "blocked: extract FAILED at 2"},
    ]
    ((advice,),) = [[a for a in grid["advice"] if (a["jobid"], a["dataid"]) == ("extract", "2")]]
    log = tmp_path / "dataflow.db.d" / "logs" / "extract" / "2.1.log"
    assert log.is_file()
    assert advice["advice"].startswith(
        f"no retry left: fix the cause, then 'utility resubmit extract 2'; log {log} on "
    )
    page = tmp_path / "board.html"
    cli.ok("board", "--html", str(page))
    text = html.unescape(page.read_text())
    assert '<td class="cell blocked" title="shape at 2: blocked: extract FAILED at 2">' in text
    assert '<td class="cell" title="load at 1: no chunk">' in text  # not reached yet: grey
    assert "blocked by a failure upstream 2" in text
    (item,) = re.findall(r"<li>(extract at 2: .*?)</li>", text)
    assert (
        "exit code 1 \u2014 no retry left: fix the cause, then 'utility resubmit extract 2'" in item
    )
    assert f"log {log} on " in item and "'utility explain extract 2'" in item

    cli.ok("set", "extract", "retries=2")
    grid = json.loads(cli.ok("board", "--json").out)
    assert grid["advice"][0]["advice"].startswith("automatic retry 1 of 2 at the next RunJob; ")


def test_the_board_cuts_a_long_failure_as_the_tables_do(tmp_path):
    cli = Cli(tmp_path)
    _pipeline(cli)
    with sqlite3.connect(tmp_path / "dataflow.db") as conn:
        conn.execute("update run set reason = ? where status = 'FAILED'", (SPARK + STACK,))
    page = tmp_path / "board.html"
    cli.ok("board", "--html", str(page))
    (item,) = re.findall(r"<li>(extract at 2: .*?)</li>", html.unescape(page.read_text()))
    told = item.split(" \u2014 ")[0]
    assert told.endswith("reason: " + SPARK[:97].rstrip() + "..."), told
    assert "DAGScheduler" not in item
    assert "DAGScheduler" in html.unescape(page.read_text())  # on hover: the whole reason
