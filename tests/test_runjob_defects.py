"""Never twice, never hung: RunJob against broken consoles, foreign rows and stubborn jobs.

Each test drives the real RunJob in a subprocess against a real store, and checks the
store afterwards (its ``.dump`` where the point is that nothing changed).
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

from support import BIN, history, rows, script, setting, start_runjob, statuses, wait_for

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


def test_a_job_that_ignores_sigterm_is_killed_after_the_grace(chain, tmp_path):
    script(tmp_path, "work.sh", "trap '' TERM; echo started; sleep 300")
    runjob = start_runjob(chain, "./work.sh")
    wait_for(lambda: statuses(tmp_path, "work").get("1") == "RUNNING", what="the claim")
    time.sleep(0.5)
    began = time.monotonic()
    runjob.send_signal(signal.SIGTERM)
    assert runjob.wait(timeout=60) == 128 + signal.SIGTERM
    assert time.monotonic() - began < 30  # the grace is 10 s; without SIGKILL: never
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
