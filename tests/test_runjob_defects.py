"""Never twice, never hung: RunJob against broken consoles, foreign rows and stubborn jobs.

Each test drives the real RunJob in a subprocess against a real store, and checks the
store afterwards (its ``.dump`` where the point is that nothing changed).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
from pathlib import Path

import pytest

from dataflow.dataids import natural_key
from support import (
    BIN,
    fill_disk,
    history,
    mounted,
    rows,
    script,
    setting,
    start_runjob,
    statuses,
    wait_for,
    written,
)

LOUD = "for i in $(seq 1 20000); do echo line $i; done; echo done >&2"


def dump(tmp_path) -> list[str]:
    with sqlite3.connect(tmp_path / "dataflow.db") as conn:
        return list(conn.iterdump())


def shell(cli, line: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """A shell line run like a user's, with RunJob from bin/ (a hang fails the test)."""
    return subprocess.run(
        ["bash", "-c", line],
        cwd=cli.cwd,
        env=cli.env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_a_console_that_goes_away_never_blocks_the_job(chain, tmp_path):
    """`| head -1`: the job's output still reaches its log, the chunk ends READY, and
    the history says where the output could not go."""
    script(tmp_path, "work.sh", LOUD)
    done = shell(chain, f"{BIN}/RunJob ./work.sh | head -1; echo rc=${{PIPESTATUS[0]}}")
    assert done.stdout.splitlines()[-1] == "rc=0", done
    assert statuses(tmp_path, "work") == {"1": "READY"}
    ((_, _, status, _, _, reason),) = history(tmp_path, "work")
    assert status == "READY" and reason == "output not written to stdout: Broken pipe"
    log = rows(tmp_path, "select logpath from run")[0][0]
    assert Path(log).read_text().count("line ") == 20000


def test_a_closed_stdout_or_a_full_one_loses_no_chunk(chain, tmp_path):
    script(tmp_path, "work.sh", LOUD)
    closed = shell(chain, f"{BIN}/RunJob ./work.sh >&-")
    full = shell(chain, f"{BIN}/RunJob ./work.sh > /dev/full")
    assert (closed.returncode, full.returncode) == (0, 0), (closed, full)
    assert "Traceback" not in closed.stderr + full.stderr
    assert "stdout: No space left on device" in full.stderr
    assert statuses(tmp_path, "work") == {"1": "READY", "2": "READY"}
    reasons = [row[5] for row in history(tmp_path, "work")]
    assert reasons == [
        "output not written to stdout: closed",
        "output not written to stdout: No space left on device",
    ]


def test_a_stalled_console_does_not_stop_the_timeouts(chain, tmp_path):
    """`RunJob ./work.sh | less` left alone (or a terminal paused with ^S): nothing reads
    RunJob's stdout, so its copy of the job's output blocks. The job still gets SIGTERM at
    its timeout; once the console is read again, RunJob ends it as a timeout (124)."""
    setting(chain, "timeout", "2")
    flood = "yes flood | head -c 50000000; sleep 300 & wait"
    script(tmp_path, "work.sh", f"trap 'echo term > term; exit 143' TERM; {flood}")
    runjob = start_runjob(chain, "./work.sh")  # its stdout: a pipe read by nobody yet
    try:
        wait_for(lambda: (tmp_path / "term").exists(), what="the SIGTERM of the timeout")
    finally:
        out, err = runjob.communicate(timeout=120)
    assert runjob.returncode == 124, err
    assert out.count("flood") > 10_000
    assert statuses(tmp_path, "work") == {"1": "FAILED"}


# On SIGTERM the job cleans up for 3 s (well within the 10 s grace), says so, then goes on
# as if it had not been asked to end: only a SIGKILL after the grace ends it.
STUBBORN = """echo $$ > job.pid
trap 'echo term > term; sleep 3; echo cleaned > cleaned; while :; do sleep 1; done' TERM
sleep 300 & wait"""


@pytest.mark.slow
def test_a_job_that_ignores_sigterm_is_killed_after_the_grace(chain, tmp_path):
    """SIGTERM first, and time to act on it (a SIGKILL at once would leave no "cleaned");
    then SIGKILL (without it, RunJob would wait for the job for ever)."""
    script(tmp_path, "work.sh", STUBBORN)
    runjob = start_runjob(chain, "./work.sh")
    wait_for(lambda: written(tmp_path / "job.pid"), what="the job to start")
    job = int((tmp_path / "job.pid").read_text())
    runjob.send_signal(signal.SIGTERM)
    assert runjob.wait(timeout=60) == 128 + signal.SIGTERM
    assert (tmp_path / "term").exists(), "the job never had the SIGTERM"
    assert (tmp_path / "cleaned").exists(), "the job was killed before its grace ended"
    assert not os.path.exists(f"/proc/{job}")  # killed, and reaped by RunJob
    assert statuses(tmp_path, "work") == {"1": "FAILED"}


def test_a_bad_candidate_row_from_outside_is_repaired_not_looped_over(chain, tmp_path):
    """A row whose sort key is not its dataid's (any SQLite client can write one) used to
    spin the claim inside its write transaction forever."""
    with sqlite3.connect(tmp_path / "dataflow.db") as conn:
        conn.execute("delete from candidate")
        conn.execute("insert into candidate values ('work', '~', '2'), ('work', '~', '9')")
    script(tmp_path, "work.sh", "echo $dataid >> seen")
    assert chain.runjob("./work.sh", timeout=30).code == 0
    assert (tmp_path / "seen").read_text() == "2\n"
    keys = rows(tmp_path, "select sortkey from candidate where jobid='work'")
    assert ("~",) not in keys


def test_dry_run_never_writes_even_the_recovery_of_dead_runs(chain, tmp_path):
    chain.ok("dml", "insert into datastatus values ('dst','work','1','OUT','RUNNING',now())")
    chain.ok("dml", "update datastatus set status='RUNNING' where dataid in ('2','3')")
    script(tmp_path, "work.sh", "true")
    before = dump(tmp_path)
    dry = chain.runjob("--dry-run", "./work.sh")
    assert dry.code == 0 and "no suitable data" in dry.out, dry
    assert dump(tmp_path) == before
    setting(chain, "max_parallel", "1")
    before = dump(tmp_path)
    assert chain.runjob("--dry-run", "./work.sh").code == 0
    assert dump(tmp_path) == before
    assert not (tmp_path / "dataflow.db.d").exists()  # not even a lock file


def test_the_job_never_receives_the_passkey_file(chain, tmp_path):
    keyfile = tmp_path / "key"
    keyfile.write_text("sesame\n")
    script(tmp_path, "work.sh", 'echo "[${PASSKEY_FILE-}][${PASSKEY-}]" > seen')
    assert chain.runjob("./work.sh", env={"PASSKEY_FILE": str(keyfile)}).code == 0
    assert (tmp_path / "seen").read_text() == "[][]\n"


def test_a_timeout_that_is_not_a_number_is_refused(chain, tmp_path):
    script(tmp_path, "work.sh", "true")
    for value in ("nan", "inf", "-1"):
        setting(chain, "timeout", value)
        result = chain.runjob("./work.sh")
        assert result.code != 0 and "setting timeout must be a number" in result.err, result
        assert result.err.count("\n") == 1
    assert rows(tmp_path, "select count(*) from run") == [(0,)]


def test_no_standard_descriptor_is_ever_taken_by_the_store(chain, tmp_path):
    """With stdout closed the store would otherwise be opened as descriptor 1."""
    script(tmp_path, "work.sh", "ls -l /proc/$PPID/fd > fds")
    assert shell(chain, f"{BIN}/RunJob ./work.sh >&- 2>&-").returncode == 0
    # RunJob (the job's parent) has /dev/null where stdout and stderr were
    fds = {
        line.split()[-3]: line.split()[-1]
        for line in (tmp_path / "fds").read_text().splitlines()[1:]
    }
    assert fds["1"] == "/dev/null" and fds["2"] == "/dev/null"
    assert os.path.exists(tmp_path / "dataflow.db")


# -- a live chunk is live whatever path reaches the store -------------------------------

HOLD = "touch started; while [ ! -e release ]; do sleep 0.05; done"


def started_run(chain, tmp_path, *args):
    """RunJob on ./work.sh (chunk 1 of work), alive until the test touches ``release``."""
    script(tmp_path, "work.sh", f'echo "$dataid" >> starts; [ "$dataid" = 1 ] || exit 0; {HOLD}')
    runjob = start_runjob(chain, *args, "./work.sh")
    wait_for(lambda: (tmp_path / "started").exists(), what="the job to start")
    return runjob


def starts(tmp_path) -> list[str]:
    return (tmp_path / "starts").read_text().split()


def test_a_symlinked_store_sees_the_live_run(chain, tmp_path):
    runjob = started_run(chain, tmp_path)
    (tmp_path / "alias.db").symlink_to("dataflow.db")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "far.db").symlink_to(tmp_path / "dataflow.db")
    for db in ("alias.db", "elsewhere/far.db", "./elsewhere/../dataflow.db"):
        again = chain.runjob("--db", db, "./work.sh")
        assert "dead run" not in again.out, again
        assert chain.ok("--db", db, "recover").out.endswith("0 abandoned chunks recovered\n")
    assert statuses(tmp_path, "work")["1"] == "RUNNING"
    (tmp_path / "release").touch()
    assert runjob.wait(timeout=30) == 0
    assert starts(tmp_path).count("1") == 1
    where = chain.ok("--db", "alias.db", "where").out
    assert str(tmp_path / "dataflow.db-locks") in where and str(tmp_path / "dataflow.db.d") in where


def test_deleting_the_logs_folder_never_makes_a_live_run_look_dead(chain, tmp_path):
    import shutil

    runjob = started_run(chain, tmp_path)
    shutil.rmtree(tmp_path / "dataflow.db.d")
    again = chain.runjob("./work.sh")
    assert "dead run" not in again.out
    assert statuses(tmp_path, "work")["1"] == "RUNNING"
    (tmp_path / "release").touch()
    assert runjob.wait(timeout=30) == 0
    assert starts(tmp_path).count("1") == 1


def test_a_second_hard_link_to_the_store_is_refused(chain, tmp_path):
    os.link(tmp_path / "dataflow.db", tmp_path / "twin.db")
    script(tmp_path, "work.sh", "true")
    before = dump(tmp_path)
    refused = chain.runjob("--db", "twin.db", "./work.sh")
    assert refused.code != 0 and "has 2 hard links" in refused.err, refused
    assert refused.err.count("\n") == 1
    assert dump(tmp_path) == before


# -- hands off a live chunk ---------------------------------------------------------------


def test_endjob_deleterun_resubmit_hold_refuse_a_live_chunk(chain, tmp_path):
    """endjob and deleterun name the live run and take --force; resubmit names it too, and
    hold waits."""
    runjob = started_run(chain, tmp_path)
    before = dump(tmp_path)
    for argv in (("endjob", "work", "1", "READY"), ("deleterun", "work", "1")):
        refused = chain.utility(*argv)
        assert refused.code != 0, refused
        assert f"work 1 is being run now (pid {runjob.pid} on host " in refused.err
        assert "--force" in refused.err and refused.err.count("\n") == 1
    for argv in (("resubmit", "work", "1"), ("resubmit", "work", "1", "--cascade")):
        refused = chain.utility(*argv)
        assert refused.code != 0, refused
        assert f"work 1 is being run now (pid {runjob.pid} on host " in refused.err
        assert refused.err.count("\n") == 1
    refused = chain.utility("hold", "work", "1")
    assert refused.code != 0 and refused.err.startswith("error: work 1 is RUNNING"), refused
    assert dump(tmp_path) == before
    chain.ok("endjob", "work", "1", "FAILED", "--force")
    assert statuses(tmp_path, "work")["1"] == "FAILED"
    (tmp_path / "release").touch()
    runjob.wait(timeout=30)


def test_a_producer_never_rewrites_a_chunk_its_consumer_is_reading(chain, tmp_path):
    """work (src -> dst) then read (dst -> out): resubmit work 1 --cascade while read
    reads dst/1; work waits for read to end, and read, its input stale, ends RESUBMIT
    and reruns on the rebuilt chunk."""
    chain.ok("dml", "delete from datastatus where dataid in ('2', '3')")
    chain.ok("dml", "insert into dataset (datasetid) values ('out')")
    chain.ok(
        "dml",
        "insert into job (jobid,itemtype,datasetid) values ('read','IN','dst'), ('read','OUT','out')",
    )
    script(tmp_path, "work.sh", 'echo "work $dataid" >> starts')
    assert chain.runjob("./work.sh").code == 0
    script(tmp_path, "read.sh", f'echo "read $dataid" >> starts; {HOLD}')
    reader = start_runjob(chain, "./read.sh")
    wait_for(lambda: (tmp_path / "started").exists(), what="the consumer to start")

    cascade = chain.ok("resubmit", "work", "1", "--cascade")
    assert "RESUBMIT when it ends" in cascade.out
    for _ in range(2):
        assert "with dataid 1" not in chain.runjob("./work.sh").out  # read is reading dst/1
    (tmp_path / "release").touch()
    assert reader.wait(timeout=30) == 0
    assert statuses(tmp_path, "read") == {"1": "RESUBMIT"}

    (tmp_path / "started").unlink()
    script(tmp_path, "read.sh", 'echo "read $dataid" >> starts')
    assert "with dataid 1" in chain.runjob("./work.sh").out
    assert "with dataid 1" in chain.runjob("./read.sh").out
    assert starts(tmp_path) == ["work", "1", "read", "1", "work", "1", "read", "1"]
    assert statuses(tmp_path, "read") == {"1": "READY"}


# -- what can be checked is checked before a claim ------------------------------------------


def test_a_log_folder_that_cannot_be_made_costs_no_chunk(chain, tmp_path):
    (tmp_path / "dataflow.db.d").write_text("not a folder")
    script(tmp_path, "work.sh", "true")
    before = dump(tmp_path)
    refused = chain.runjob("./work.sh")
    assert refused.code != 0 and "cannot prepare the log folder" in refused.err, refused
    assert "nothing was claimed" in refused.err and refused.err.count("\n") == 1
    assert dump(tmp_path) == before


def test_a_missing_interpreter_is_named_and_costs_no_chunk(chain, tmp_path):
    (tmp_path / "work.sh").write_text("#!/nonexistent/interp\necho hi\n")
    (tmp_path / "work.sh").chmod(0o755)
    before = dump(tmp_path)
    refused = chain.runjob("./work.sh")
    assert refused.code != 0, refused
    assert refused.err == (
        "error: cannot run ./work.sh: its interpreter /nonexistent/interp (first line) is not there\n"
    )
    assert dump(tmp_path) == before


@pytest.mark.parametrize(
    "source, says",
    [
        ("print('hi'\n", "it is not valid Python: '(' was never closed (line 1)"),
        ("x = 1\n  y = 2\n", "it is not valid Python: unexpected indent (line 2)"),
        ("x = 1\0\n", "it is not valid Python: source code string cannot contain null bytes"),
    ],
)
def test_a_py_job_that_is_not_python_costs_no_chunk(chain, tmp_path, source, says):
    """Checked before the claim (spark-submit would fail only after starting a JVM);
    like most .py files, the job is not executable, and need not be."""
    (tmp_path / "work.py").write_text(source)
    before = dump(tmp_path)
    refused = chain.runjob("./work.py")
    assert refused.code != 0, refused
    assert refused.err == f"error: cannot run ./work.py: {says}\n"
    assert dump(tmp_path) == before


def test_a_validate_check_in_python_is_executed_so_must_be_executable(chain, tmp_path):
    """Only a .py *job* goes to spark-submit; a --validate check is run as a program."""
    script(tmp_path, "work.sh", "true")
    (tmp_path / "check.py").write_text("print('ok')\n")
    before = dump(tmp_path)
    refused = chain.runjob("--validate", "./check.py", "./work.sh")
    assert refused.err == (
        "error: cannot run ./check.py: it is not executable (chmod +x ./check.py)\n"
    ), refused
    assert dump(tmp_path) == before


def test_a_job_that_cannot_start_gives_its_claim_back(chain, tmp_path):
    """An interpreter that is there but cannot be executed (a folder) fails at exec time."""
    (tmp_path / "interp").mkdir()
    (tmp_path / "work.sh").write_text(f"#!{tmp_path}/interp\n")
    (tmp_path / "work.sh").chmod(0o755)
    before = rows(tmp_path, "select * from datastatus order by 1, 2, 3")
    failed = chain.runjob("./work.sh")
    assert failed.code != 0 and failed.err.startswith("error: cannot run"), failed
    assert "Traceback" not in failed.err
    assert rows(tmp_path, "select * from datastatus order by 1, 2, 3") == before
    assert rows(tmp_path, "select count(*) from run") == [(0,)]


def test_a_dataid_no_environment_can_carry_is_skipped(chain, tmp_path):
    with sqlite3.connect(tmp_path / "dataflow.db") as conn:
        conn.create_function("now", 0, lambda: "2026-01-01 00:00:00")
        conn.create_function("dataflow_natkey", 1, natural_key)
        conn.execute("insert into datastatus values ('src','up',?,'OUT','READY',now())", ("0\0x",))
    script(tmp_path, "work.sh", 'echo "$dataid" >> starts')
    ran = chain.runjob("./work.sh")
    assert ran.code == 0 and "with dataid 1" in ran.out, ran
    assert "dataid '0\\x00x' of work cannot name a chunk" in ran.err and "Traceback" not in ran.err


# -- a helper that leaves the job's group and closes its descriptors -----------------------

DETACH = (
    "python3 -c \"import subprocess; p = subprocess.Popen(['sleep', '300'], "
    "start_new_session=True, close_fds=True, stdout=subprocess.DEVNULL, "
    "stderr=subprocess.DEVNULL); open('detached', 'w').write(str(p.pid))\""
)


def test_a_detached_helper_keeps_its_chunk_live(chain, tmp_path):
    script(tmp_path, "work.sh", f'echo "$dataid" >> starts; [ "$dataid" = 1 ] && {DETACH}; exit 0')
    assert chain.runjob("./work.sh").code == 0  # the job ends READY; its helper works on
    assert (tmp_path / "detached").exists()
    helper = int((tmp_path / "detached").read_text())  # this test's helper, no other
    try:
        refused = chain.utility("endjob", "work", "1", "RESUBMIT")  # names what lives
        assert f"work 1 is being run now (pid {helper} on host " in refused.err, refused
        assert "its RunJob (pid " in refused.err and refused.code == 2
        chain.ok("endjob", "work", "1", "RESUBMIT", "--force")  # a rerun is asked all the same
        for _ in range(2):
            assert "with dataid 1" not in chain.runjob("./work.sh").out
        assert starts(tmp_path).count("1") == 1
    finally:
        os.kill(helper, signal.SIGKILL)
    wait_for(lambda: "with dataid 1" in chain.runjob("./work.sh").out, what="the rerun")
    assert starts(tmp_path).count("1") == 2


def test_a_daily_job_runs_once_whatever_tz_each_run_has(cli, tmp_path):
    """UTC-12 and UTC+14 are always on different dates: one day, one chunk."""
    cli.ok("createtables")
    cli.ok("dml", "insert into dataset (datasetid) values ('daily_out')")
    cli.ok(
        "dml",
        "insert into job (jobid,itemtype,datasetid) values ('daily','IN','today'), "
        "('daily','OUT','daily_out')",
    )
    script(tmp_path, "daily.sh", 'echo "$dataid" >> starts')
    first = cli.runjob("./daily.sh", env={"TZ": "Etc/GMT+12"})
    second = cli.runjob("./daily.sh", env={"TZ": "Etc/GMT-14"})
    assert first.code == 0 and "Launching" in first.out, first
    assert "no suitable data" in second.out, second
    system_day = subprocess.run(
        ["date", "+%F"], env={"TZ": ":/etc/localtime"}, capture_output=True, text=True
    ).stdout.strip()
    assert starts(tmp_path) == [system_day]


def test_a_script_name_that_is_not_utf8_is_one_line(chain, tmp_path):
    before = dump(tmp_path)
    done = subprocess.run(
        [str(BIN / "RunJob"), b"./\xff.sh"], cwd=tmp_path, env=chain.env, capture_output=True
    )
    assert done.returncode == 2
    assert done.stderr == b"error: argument 1 ('./\\xff.sh') is not valid UTF-8 text\n"
    assert dump(tmp_path) == before


def test_a_log_on_a_full_disk_never_blocks_the_job(chain, tmp_path):
    """The logs folder on a tiny tmpfs: the log fills up mid-run, the job runs on."""
    small = tmp_path / "small"
    small.mkdir()
    with mounted("-t", "tmpfs", "-o", "size=64k", "tmpfs", str(small)):
        (tmp_path / "dataflow.db.d").symlink_to(small)
        script(tmp_path, "work.sh", LOUD)
        done = shell(chain, f"{BIN}/RunJob ./work.sh")
        assert done.returncode == 0, done
        assert done.stdout.count("line ") == 20000  # the console still has all of it
        assert statuses(tmp_path, "work") == {"1": "READY"}
        ((_, _, _, _, _, reason),) = history(tmp_path, "work")
        assert reason == "output not written to log: No space left on device"


def test_a_full_disk_at_the_claim_or_the_finish_never_breaks_the_store(cli, tmp_path):
    """The store on a small tmpfs: full before the claim (refused, nothing written), and
    filled by the job itself (the finish fails in one line; the chunk is recovered later)."""
    small = tmp_path / "small"
    small.mkdir()
    with mounted("-t", "tmpfs", "-o", "size=1m", "tmpfs", str(small)):
        env = {"DATAFLOW_DB": str(small / "dataflow.db")}
        cli.ok("createtables", env=env)
        for name in ("src", "dst"):
            cli.ok("register-dataset", name, env=env)
        cli.ok("register-job", "work", "--in", "src", "--out", "dst", env=env)
        cli.ok("ready", "src", "1", "2", env=env)
        script(tmp_path, "work.sh", f"head -c 2000000 /dev/zero > {small}/filler 2>/dev/null; true")
        with sqlite3.connect(small / "dataflow.db") as conn:
            before = list(conn.iterdump())
        filler = fill_disk(small)
        refused = cli.runjob("./work.sh", env=env)
        assert refused.code != 0 and refused.err.startswith("error: "), refused
        assert "Traceback" not in refused.err and refused.err.count("\n") == 1
        filler.unlink()
        with sqlite3.connect(small / "dataflow.db") as conn:
            assert list(conn.iterdump()) == before

        finish = cli.runjob("./work.sh", env=env)  # the job fills the disk, then ends well
        assert finish.code != 0 and "Traceback" not in finish.err, finish
        assert finish.err.startswith("error: ") and "the store" in finish.err
        (small / "filler").unlink()
        again = cli.runjob("./work.sh", env=env)
        assert "belonged to a dead run; marked FAILED (abandoned)" in again.out, again
        with sqlite3.connect(small / "dataflow.db") as conn:
            assert conn.execute("pragma integrity_check").fetchone() == ("ok",)


def test_megabytes_of_binary_output_reach_the_log_whole(chain, tmp_path):
    script(tmp_path, "work.sh", "head -c 5000000 /dev/urandom > sent; cat sent")
    done = subprocess.run(
        [str(BIN / "RunJob"), "./work.sh"],
        cwd=tmp_path,
        env=chain.env,
        capture_output=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    sent = (tmp_path / "sent").read_bytes()
    log = Path(rows(tmp_path, "select logpath from run")[0][0]).read_bytes()
    assert log == sent and sent in done.stdout
    assert statuses(tmp_path, "work") == {"1": "READY"}


def test_a_python_traceback_is_the_reason_of_a_failed_run(chain, tmp_path):
    """Its last line names why the job failed; a job without one keeps its exit code."""
    script(
        tmp_path,
        "work.sh",
        'echo working; [ "$dataid" = 1 ] || exit 3\n'
        "python3 -c 'import json; json.loads(\"{oops\")'",
    )
    assert chain.runjob("./work.sh").code == 1
    assert chain.runjob("./work.sh").code == 3
    (first, second) = [reason for *_, reason in history(tmp_path, "work")]
    assert first == (
        "json.decoder.JSONDecodeError: Expecting property name enclosed in double quotes:"
        " line 1 column 2 (char 1) (exit code 1)"
    )
    assert second == "exit code 3"
