"""A job's process as RunJob starts it (dataflow/run/process/spawn.py: ``os.posix_spawn``,
not subprocess): the chunk's lock and nothing else RunJob was handed, stdin from
/dev/null, SIGPIPE and SIGXFSZ at their defaults (Python ignores both), a group of its
own, a command without a folder found along the job's own PATH."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys

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


def test_a_runjob_whose_parent_ignores_sigchld_still_knows_its_jobs_exit_code(chain, tmp_path):
    """A parent may start RunJob with SIGCHLD ignored (it is inherited): the kernel would
    reap each job and its exit code be lost (subprocess said 0: a failed job READY)."""
    script(tmp_path, "work.sh", "exit 3")
    ignoring = (
        "import os, signal, sys; signal.signal(signal.SIGCHLD, signal.SIG_IGN); "
        "os.execv(sys.argv[1], sys.argv[1:])"
    )
    done = subprocess.run(
        [sys.executable, "-c", ignoring, str(BIN / "RunJob"), "./work.sh"],
        cwd=chain.cwd,
        env=chain.env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 3, done.stderr
    assert statuses(tmp_path, "work") == {"1": "FAILED"}


def test_runjob_is_named_runjob_where_ps_and_pgrep_look(chain, tmp_path):
    """bin/RunJob runs Python with -c (its quickest start): its process is still named
    RunJob (ps -C, pgrep, killall) and its command line still reads "RunJob ./work.sh"
    (pgrep -f), as when it ran the entry point's script: a cron guard finds it."""
    script(
        tmp_path,
        "work.sh",
        'cat /proc/$PPID/comm > name; tr "\\0" " " < /proc/$PPID/cmdline > line',
    )
    env = {k: v for k, v in chain.env.items() if k != "DATAFLOW_PYTHON"}  # as a user runs it
    done = subprocess.run(
        [str(BIN / "RunJob"), "./work.sh"], cwd=chain.cwd, env=env, capture_output=True
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "name").read_text().strip() == "RunJob"
    assert "RunJob ./work.sh" in (tmp_path / "line").read_text()


# a start that finds too few descriptors left, in a process of its own (its limit is its own)
SHORT_OF_DESCRIPTORS = """
import os, resource, sys
from dataflow.run.process import spawn
used = len(os.listdir("/proc/self/fd")) - 1  # (the listing's own, closed)
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (used + int(sys.argv[1]), hard))
try:
    spawn.start(["/bin/true"], dict(os.environ))
except OSError as exc:
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))  # (room to count them)
    print(exc.errno, len(os.listdir("/proc/self/fd")) - 1 - used)
"""


@pytest.mark.parametrize("free", [0, 1, 2, 3])
def test_a_job_that_cannot_start_for_want_of_descriptors_leaves_none_open(free):
    """A drain goes on after a job that could not start (EMFILE): the start closes every
    descriptor it had made."""
    done = subprocess.run(
        [sys.executable, "-c", SHORT_OF_DESCRIPTORS, str(free)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.stdout.split() == [str(errno.EMFILE), "0"], done.stderr
