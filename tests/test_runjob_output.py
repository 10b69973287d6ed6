"""A job's output and log never cost a chunk nor block it: a console that goes away,
closes or is full, a stalled reader, a full disk under the log, megabytes of binary, a
log folder that cannot be made; a failed Python job's traceback is the run's reason.
Each test drives the real RunJob in a subprocess (often from a shell line, as a user's)
against a real store, and checks the store afterwards."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from support import (
    BIN,
    dump,
    history,
    rows,
    script,
    setting,
    shell,
    start_runjob,
    statuses,
    wait_for,
)
from support.faults import mounted

LOUD = "for i in $(seq 1 20000); do echo line $i; done; echo done >&2"


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


@pytest.mark.parametrize(
    ("blocked", "what", "named", "reason"),
    [
        ("dataflow.db-locks", "lock file", "", "Is a directory"),  # a folder where it goes
        ("dataflow.db.d", "log folder", "/logs", "Not a directory"),  # a file where it goes
    ],
)
def test_a_lock_file_or_log_folder_that_cannot_be_made_costs_no_chunk(
    chain, tmp_path, blocked, what, named, reason
):
    """RunJob's one line names what it could not make, the path that failed and why."""
    path = tmp_path / blocked
    if path.exists():
        path.unlink()
    if what == "lock file":
        path.mkdir()
    else:
        path.write_text("not a folder")
    script(tmp_path, "work.sh", "true")
    before = dump(tmp_path)
    refused = chain.runjob("./work.sh")
    assert refused.code != 0, refused
    assert refused.err == (
        f"error: cannot prepare the {what} {path}{named}: {reason}; nothing was claimed\n"
    )
    assert dump(tmp_path) == before
