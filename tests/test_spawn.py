"""A job's process as RunJob starts it (dataflow/run/process/spawn.py: ``os.posix_spawn``,
not subprocess): the chunk's lock and nothing else RunJob was handed, stdin from
/dev/null, SIGPIPE and SIGXFSZ at their defaults (Python ignores both), a group of its
own, a command without a folder found along the job's own PATH."""

from __future__ import annotations

import errno
import os
import signal
import subprocess

import pytest

from dataflow.run.process import spawn
from support import BIN, script, statuses


def _mask(status: str, field: str) -> int:
    line = next(line for line in status.splitlines() if line.startswith(f"{field}:"))
    return int(line.split()[1], 16)


def test_a_job_gets_the_chunk_lock_and_no_other_descriptor_runjob_was_given(chain, tmp_path):
    """RunJob handed an open file by its own parent (a descriptor it inherited): its job
    gets the chunk's lock, /dev/null for stdin, and not that file."""
    script(
        tmp_path,
        "work.sh",
        'for fd in /proc/$$/fd/*; do readlink "$fd"; done > fds; '
        'grep -E "^(SigIgn|NSpgid|NSpid):" /proc/$$/status > status',
    )
    handed = tmp_path / "handed"
    with open(handed, "w") as file:
        done = subprocess.run(
            [str(BIN / "RunJob"), "./work.sh"],
            cwd=chain.cwd,
            env=chain.env,
            pass_fds=(file.fileno(),),
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    assert statuses(tmp_path, "work") == {"1": "READY"}
    fds = (tmp_path / "fds").read_text().split()
    assert str(handed) not in fds
    assert "/dev/null" in fds  # stdin
    assert str(tmp_path / "dataflow.db-locks") in fds  # the chunk's lock
    status = (tmp_path / "status").read_text()
    ignored = _mask(status, "SigIgn")
    assert not ignored & (1 << (signal.SIGPIPE - 1)), hex(ignored)
    assert not ignored & (1 << (signal.SIGXFSZ - 1)), hex(ignored)


def test_a_job_runs_in_a_process_group_of_its_own(tmp_path):
    child = spawn.start(["/bin/sh", "-c", "exit 3"], dict(os.environ))
    try:
        assert os.getpgid(child.pid) == child.pid
    finally:
        assert child.wait() == 3
        child.stdout.close()
        child.stderr.close()


def test_a_command_without_a_folder_is_found_along_the_jobs_own_path(tmp_path):
    """As subprocess looks it up: in the PATH of the environment the job gets (not this
    process's), the first one there that can run; a folder where it cannot run gives its
    reason, one where it is not gives ENOENT."""
    mine, theirs, blocked = tmp_path / "mine", tmp_path / "theirs", tmp_path / "blocked"
    for folder in (mine, theirs, blocked):
        folder.mkdir()
    (theirs / "tool").write_text("#!/bin/sh\necho theirs\n")
    (theirs / "tool").chmod(0o755)
    (blocked / "tool").write_text("echo blocked\n")  # there, but not executable
    env = {**os.environ, "PATH": f"{tmp_path / 'none'}:{theirs}"}
    child = spawn.start(["tool"], env)
    assert child.wait() == 0
    assert child.stdout.read() == b"theirs\n"
    child.stdout.close()
    child.stderr.close()
    with pytest.raises(PermissionError):
        spawn.start(["tool"], {**env, "PATH": f"{blocked}:{mine}"})
    with pytest.raises(FileNotFoundError) as raised:
        spawn.start(["tool"], {**env, "PATH": str(mine)})
    assert raised.value.errno == errno.ENOENT


def test_a_job_killed_by_a_signal_reports_it_as_subprocess_did(tmp_path):
    child = spawn.start(["/bin/sh", "-c", "kill -TERM $$"], dict(os.environ))
    assert child.wait() == -signal.SIGTERM
    assert child.wait() == -signal.SIGTERM  # reaped once, said again
    child.stdout.close()
    child.stderr.close()
