"""Operations and forensics on a real store: explain, status, lineage, resubmit, hold,
validation gates, purge."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time

import pytest

from dataflow.dataids import MAX_NAME
from support import BIN, script
from support import rows as query

pytestmark = pytest.mark.both_stores


def status_of(tmp_path, jobid, dataid):
    rows = query(
        tmp_path,
        "select status from datastatus where jobid=? and dataid=? and locktype='OUT'",
        jobid,
        dataid,
    )
    return rows[0][0] if rows else None


def table_hash(tmp_path, with_times=True):
    columns = "*" if with_times else "datasetid, jobid, dataid, locktype, status"
    dump = query(tmp_path, f"select {columns} from datastatus order by 1,2,3")
    dump += query(tmp_path, "select * from dataset order by 1")
    return hashlib.sha256(repr(dump).encode()).hexdigest()


@pytest.fixture
def pipeline(cli, tmp_path):
    """A -> a, B: a -> b, C: a + b -> c; chunks 1..3 of src READY, all run once."""
    cli.ok("createtables")
    for name in ("src", "a", "b", "c"):
        cli.ok("register-dataset", name, "--schemaname", f"/data/{name}")
    cli.ok("register-job", "A", "--in", "src", "--out", "a")
    cli.ok("register-job", "B", "--in", "a", "--out", "b")
    cli.ok("register-job", "C", "--in", "a", "b", "--out", "c")
    cli.ok(
        "dml",
        "insert into datastatus select 'src','fakejob',v,'OUT','READY',now() from (select '1' v union select '2' union select '3') AS chunks",
    )
    for jobid in "ABC":
        script(tmp_path, f"{jobid}.sh", 'echo "$jobid $dataid" >> ran.log')
        assert cli.drain(f"./{jobid}.sh").exit_code == 0
    return cli


def test_explain_answers_the_five_questions(pipeline, tmp_path):
    pipeline.ok("resubmit", "C", "2")
    out = pipeline.ok("explain", "C").out
    assert out.startswith("next chunk of C: 2 (")
    for question in ("READY?", "RIGHT DATA?", "LOCATION?", "VALIDATED?", "SAFE?"):
        assert f"\n{question}\n" in out
    assert "  a: READY (produced by A)" in out
    assert "  b: B attempt 1, started " in out
    assert "  c (OUT): schemaname=/data/c password=none" in out
    assert out.rstrip().endswith("will run")

    done = pipeline.ok("explain", "C", "1").out
    assert done.rstrip().endswith(
        "will not run: C already produced it (READY); resubmit it to rerun"
    )
    missing = pipeline.ok("explain", "C", "99").out
    assert missing.rstrip().endswith("will not run: input a has no chunk 99 yet")
    nothing = pipeline.ok("explain", "A").out
    assert nothing.rstrip().endswith("will not run: no chunk waits for it")
    as_json = pipeline.ok("explain", "C", "2", "--json").out
    assert '"verdict": "will run"' in as_json
    bad = pipeline.utility("explain", "nojob")
    assert (
        bad.code == 2
        and bad.err
        == "error: unknown job 'nojob': it has no rows in table job (see 'utility jobs')\n"
    )


def test_explain_names_live_dead_and_failed_runs(pipeline, tmp_path):
    pipeline.ok("dml", "insert into datastatus values ('src','fakejob','4','OUT','READY',now())")
    script(tmp_path, "A.sh", '[ "$dataid" != 4 ] || { touch started; sleep 30; }')
    runjob = subprocess.Popen(
        [str(BIN / "RunJob"), "./A.sh"], cwd=tmp_path, env=pipeline.env, stdout=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 30
    while not (tmp_path / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    live = pipeline.ok("explain", "A", "4").out
    assert f"will not run: a live run of A is producing it (pid {runjob.pid} on " in live
    runjob.terminate()
    assert runjob.wait(timeout=30) == 128 + 15
    failed = pipeline.ok("explain", "A", "4").out
    assert "FAILED after attempt 1, interrupted by SIGTERM" in failed
    assert failed.rstrip().endswith(
        "will not run: it FAILED and has no automatic retry left; resubmit it to rerun"
    )
    pipeline.ok("forcejob", "A", "5")  # RUNNING, but nobody holds its lock: a dead run
    dead = pipeline.ok("explain", "A", "5").out
    assert "its run died: the next RunJob or 'utility recover' marks it FAILED" in dead


def test_status_counts_and_next(pipeline, tmp_path):
    script(tmp_path, "B.sh", "exit 3")
    pipeline.ok("resubmit", "B", "--match", "[23]")
    assert pipeline.drain("./B.sh").exit_code == 1  # its chunks 2 and 3 FAILED
    rows = pipeline.ok("status", "--json").out
    by_job = {row["jobid"]: row for row in json.loads(rows)}
    assert (by_job["A"]["ready"], by_job["B"]["failed"], by_job["B"]["ready"]) == (3, 2, 1)
    assert by_job["B"]["last_failure"].startswith("3 at ") and by_job["B"]["last_failure"].endswith(
        "exit code 3"
    )
    assert by_job["C"]["next"] == "" and by_job["A"]["live"] == 0
    table = pipeline.ok("status").lines
    assert table[0].split() == [
        "JOBID",
        "READY",
        "RUNNING",
        "FAILED",
        "RESUBMIT",
        "HOLD",
        "WAITING",
        "NEXT",
        "LIVE",
        "LAST_FAILURE",
    ]


@pytest.mark.long
def test_resubmit_cascade_in_one_transaction(pipeline, tmp_path):
    before = table_hash(tmp_path)
    dry = pipeline.ok("resubmit", "A", "2", "--cascade", "--dry-run").out
    assert dry.splitlines() == [
        "A 2: READY -> RESUBMIT",
        "B 2: READY -> RESUBMIT (downstream of A)",
        "C 2: READY -> RESUBMIT (downstream of A)",
        "3 chunks would be changed",
    ]
    assert table_hash(tmp_path) == before
    pipeline.ok("resubmit", "A", "2", "--cascade")
    assert [status_of(tmp_path, j, "2") for j in "ABC"] == ["RESUBMIT"] * 3
    assert [status_of(tmp_path, j, "1") for j in "ABC"] == ["READY"] * 3
    for jobid in "ABC":  # the whole chain rebuilds chunk 2, and only chunk 2
        pipeline.runjob("--all", f"./{jobid}.sh")
    runs = (tmp_path / "ran.log").read_text().splitlines()
    assert runs[9:] == ["A 2", "B 2", "C 2"]


def test_resubmit_selectors_and_refusals(pipeline, tmp_path):
    pipeline.ok("endjob", "B", "1", "FAILED")
    pipeline.ok("endjob", "B", "3", "FAILED")
    assert pipeline.ok("resubmit", "B", "--failed").out.splitlines()[-1] == "2 chunks changed"
    assert [status_of(tmp_path, "B", d) for d in "123"] == ["RESUBMIT", "READY", "RESUBMIT"]
    assert (
        pipeline.ok("resubmit", "A", "--from", "2", "--to", "3").out.splitlines()[-1]
        == "2 chunks changed"
    )
    assert status_of(tmp_path, "A", "1") == "READY"

    before = table_hash(tmp_path, with_times=False)
    for args, message in [
        (["resubmit", "A", "9"], "error: job 'A' has no chunk with dataid '9'"),
        (["resubmit", "nojob", "1"], "error: unknown job 'nojob'"),
        (
            ["resubmit", "A"],
            "error: name a DATAID, or select chunks with --failed, --match or --from/--to",
        ),
        (["hold", "A", "1"], None),
    ]:
        result = pipeline.utility(*args)
        if message:
            assert result.code == 2 and result.err.startswith(message), result
    assert "HOLD" in pipeline.ok("runs").out
    busy = pipeline.utility("resubmit", "A", "1")
    assert (
        busy.code == 2
        and busy.err == "error: A 1 is on hold: release it first (utility release A 1)\n"
    )
    pipeline.ok("release", "A", "1")
    assert table_hash(tmp_path, with_times=False) == before


def test_forcejob_and_endjob_take_any_chunk_they_may_and_say_what_they_refuse(pipeline, tmp_path):
    """forcejob marks a chunk RUNNING whatever its end (READY, FAILED), but not one that is
    RUNNING; endjob takes its four statuses; each refusal names what is wrong, whole."""
    pipeline.ok("endjob", "A", "2", "FAILED")
    for dataid in ("1", "2"):
        pipeline.ok("forcejob", "A", dataid)
        assert status_of(tmp_path, "A", dataid) == "RUNNING"
    pipeline.ok("endjob", "A", "2", "READY")  # forced, and no run of it lives: ended
    before = table_hash(tmp_path, with_times=False)
    long_id = "d" * (MAX_NAME + 1)
    for args, message in [
        (["forcejob", "A", "1"], "A 1 is RUNNING: wait for it to end before changing it"),
        (["endjob", "A", "1", "DONE"], "status must be one of READY, FAILED, RESUBMIT, HOLD, not 'DONE'"),
        (["endjob", "A", "9", "READY"], "job 'A' has no chunk with dataid '9' (see 'utility runs')"),
        (["forcejob", "A", long_id], f"a dataid is at most {MAX_NAME} characters, not {MAX_NAME + 1} ('dddddddddddddddddddd...')"),
        (["endjob", "A", long_id, "READY"], f"a dataid is at most {MAX_NAME} characters, not {MAX_NAME + 1} ('dddddddddddddddddddd...')"),
    ]:  # fmt: skip
        refused = pipeline.utility(*args)
        assert (refused.code, refused.err, refused.out) == (2, f"error: {message}\n", ""), args
    assert table_hash(tmp_path, with_times=False) == before


@pytest.mark.long
def test_hold_and_release_freeze_a_chunk(pipeline, tmp_path):
    pipeline.ok("dml", "insert into datastatus values ('src','fakejob','4','OUT','READY',now())")
    assert (
        pipeline.ok("hold", "A", "4").out.splitlines()[0] == "A 4: none -> HOLD"
    )  # a future chunk
    assert "no suitable data" in pipeline.runjob("./A.sh").out
    assert pipeline.ok("release", "A", "4").out.splitlines()[0] == "A 4: HOLD -> none"
    assert "with dataid 4" in pipeline.runjob("./A.sh").out

    pipeline.ok("hold", "A", "4")  # a READY chunk: consumers must wait
    assert "no suitable data" in pipeline.runjob("./B.sh").out
    again = pipeline.utility("hold", "A", "4")
    assert again.code == 2 and again.err == "error: A 4 is already on hold\n"
    pipeline.ok("release", "A", "4")
    assert status_of(tmp_path, "A", "4") == "READY"
    assert "with dataid 4" in pipeline.runjob("./B.sh").out
    never = pipeline.utility("release", "A", "4")
    assert never.code == 2 and never.err == "error: A 4 is not on hold\n"


def test_lineage_follows_the_chain_and_survives_a_cycle(pipeline, tmp_path):
    out = pipeline.ok("lineage", "a", "1").out.splitlines()
    assert out[0] == "a 1"
    assert out[1].startswith("  produced by A: READY at ") and "attempt 1 ended" in out[1]
    assert out[2:] == ["    -> B: b READY", "    -> C: c READY"]
    bad = pipeline.utility("lineage", "a", "99")
    assert bad.code == 2 and bad.err == "error: dataset 'a' has no chunk '99'\n"
    # register-job refuses a cycle; one typed in by hand must not hang anything
    refused = pipeline.utility("register-job", "D", "--in", "c", "--out", "src")
    assert refused.code == 2 and "would make a cycle: A -> B -> C -> D -> A" in refused.err
    pipeline.ok(
        "dml", "insert into job (jobid,itemtype,datasetid) values ('D','IN','c'), ('D','OUT','src')"
    )
    cyclic = pipeline.ok("lineage", "a", "1").out
    assert "warning: cycle in lineage A -> C -> D -> A (not followed)" in cyclic
    assert pipeline.ok("resubmit", "A", "1", "--cascade").out.splitlines()[-1] == "3 chunks changed"


def test_lineage_names_a_live_consumer(pipeline, tmp_path):
    pipeline.ok("dml", "insert into datastatus values ('src','fakejob','4','OUT','READY',now())")
    assert pipeline.run_job("./A.sh").exit_code == 0  # a 4 READY
    script(tmp_path, "B.sh", "touch started; sleep 30")
    consumer = subprocess.Popen(
        [str(BIN / "RunJob"), "./B.sh"], cwd=tmp_path, env=pipeline.env, stdout=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "started").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        shown = json.loads(pipeline.ok("--json", "lineage", "a", "4").out)
        assert [(r["jobid"], r["locktype"]) for r in shown["consumers_now"]] == [("B", "IN")]
        assert [r["jobid"] for r in shown["producers"]] == ["A"]
        assert "  being consumed by B since " in pipeline.ok("lineage", "a", "4").out
    finally:
        consumer.terminate()
        consumer.wait(timeout=30)
    assert json.loads(pipeline.ok("--json", "lineage", "a", "4").out)["consumers_now"] == []


@pytest.mark.long
def test_validation_gate(pipeline, tmp_path):
    pipeline.ok(
        "dml",
        "insert into datastatus values ('src','fakejob','4','OUT','READY',now()), ('src','fakejob','5','OUT','READY',now())",
    )
    script(tmp_path, "check.sh", 'echo "checking $dataid of $jobid"; [ "$dataid" = 4 ]')
    good = pipeline.runjob("--validate", "./check.sh", "./A.sh")
    assert good.code == 0 and "checking 4 of A" in good.out
    assert good.lines[-1] == "1 rows updated to READY for A and 4 1 IN file-local locks released"
    bad = pipeline.runjob("--validate", "./check.sh", "./A.sh")
    assert bad.code == 1
    assert "Job ./A.sh has failed validation. Updating status" in bad.out
    assert status_of(tmp_path, "A", "5") == "FAILED"
    assert query(
        tmp_path,
        "select dataid, validation, reason from run where jobid='A' and dataid in ('4','5')",
    ) == [
        ("4", "passed", None),
        ("5", "failed", "validation failed"),
    ]
    assert "checking 5 of A" in pipeline.ok("log", "A", "5").out
    explained = pipeline.ok("explain", "B", "4").out
    assert "VALIDATED?\n  a: passed" in explained
    assert "this job's last run: validation failed" in pipeline.ok("explain", "A", "5").out


def test_purge_keeps_what_gates_work(pipeline, tmp_path):
    pipeline.ok("dml", "insert into job (jobid,itemtype,itemvalue) values ('A','retries','1')")
    pipeline.ok("dml", "insert into datastatus values ('src','fakejob','4','OUT','READY',now())")
    script(tmp_path, "A.sh", "exit 1")
    assert pipeline.drain("./A.sh").failed == 2  # chunk 4 fails twice (1 retry)
    logs = [row[0] for row in query(tmp_path, "select logpath from run")]
    assert all(os.path.exists(p) for p in logs)
    statuses = query(tmp_path, "select * from datastatus order by 1,2,3")
    assert pipeline.ok("purge", "--days-old", "1").out == "0 runs purged\n"  # nothing that old
    # a cutoff inside today (14 minutes ago): SQLite compares times as text, so the cutoff
    # is written as the runs' times are ("YYYY-MM-DD HH:MM:SS", never an ISO "T")
    assert pipeline.ok("purge", "--days-old", "0.01").out == "0 runs purged\n"
    other = pipeline.ok("purge", "--job", "B", "--dry-run").out  # A's run is not B's
    assert other.splitlines()[-1] == "0 runs would be purged"
    dry = pipeline.ok("purge", "--job", "A", "--dry-run").out.splitlines()
    assert dry[-1] == "1 run would be purged"  # the first attempt at 4: a chunk's last stays
    assert all(os.path.exists(p) for p in logs)  # a dry run deletes no log either
    last = query(tmp_path, "select max(attempt), jobid, dataid from run group by 2, 3")
    assert len(query(tmp_path, "select * from run")) == 11
    [(gone,)] = query(tmp_path, "select logpath from run where dataid = '4' and attempt = 1")
    os.unlink(gone)  # its log deleted by hand already: the purge goes on
    assert len(last) == 10 and pipeline.ok("purge").out == "1 run purged\n"
    kept = query(tmp_path, "select max(attempt), jobid, dataid from run group by 2, 3")
    assert kept == last and (2, "A", "4") in kept
    assert query(tmp_path, "select * from datastatus order by 1,2,3") == statuses
    remaining = {row[0] for row in query(tmp_path, "select logpath from run")}
    assert {p for p in logs if os.path.exists(p)} == remaining
    assert pipeline.run_job("./A.sh").started == 0  # the retry count survived
    unknown = pipeline.utility("purge", "--job", "nojob")
    assert unknown.code == 2 and "unknown job 'nojob'" in unknown.err


def test_history_where_recover_deleterun_and_ddl(pipeline, tmp_path, address):
    """The commands the other tests use least, once on each store."""
    listed = pipeline.ok("history", "A").lines
    assert listed[0].split()[:4] == ["JOBID", "DATAID", "ATTEMPT", "STATUS"]
    assert sorted(line.split()[1] for line in listed[2:]) == ["1", "2", "3"]
    (run,) = json.loads(pipeline.ok("--json", "history", "A", "2").out)
    assert (run["jobid"], run["dataid"], run["attempt"], run["status"]) == ("A", "2", 1, "READY")
    assert run["command"] == "./A.sh" and run["host"] and run["pid"] > 0
    assert os.path.exists(run["logpath"])
    where = {line.split()[0]: line.split()[1] for line in pipeline.ok("where").lines[2:]}
    assert where["store"] == str(address) and os.path.isdir(where["logs"])

    pipeline.ok("forcejob", "A", "9")  # RUNNING, and no run of it lives anywhere
    recovered = pipeline.ok("recover").out.splitlines()
    assert recovered == [
        "A 9: its run died; marked FAILED (abandoned)",
        "1 abandoned chunk recovered",
    ]
    assert pipeline.ok("recover").out == "0 abandoned chunks recovered\n"
    assert status_of(tmp_path, "A", "9") == "FAILED"
    assert pipeline.ok("deleterun", "A", "9").out == "1 row deleted for A and 9\n"
    assert status_of(tmp_path, "A", "9") is None

    pipeline.ok("ddl", "create table notes (id integer, note text)")
    pipeline.ok("dml", "insert into notes values (1, 'kept')")
    assert pipeline.ok("sql", "select note from notes where id = 1").lines[-1].strip() == "kept"
    pipeline.ok("ddl", "drop table notes")
    gone = pipeline.utility("sql", "select note from notes")
    assert gone.code != 0 and gone.err.startswith("error: SQL failed: ")
