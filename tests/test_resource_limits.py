"""A drain short of resources (a hard limit of open files, a pids cgroup's tasks) never
hangs, never tracebacks and never leaves a chunk RUNNING: a claim that cannot open a
chunk's lock is "short of descriptors" and lets go of the locks of its batch, the output
copier's selector and its threads start before the job or fall back to the drain's own
thread, and what cannot run is said in one line."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections import Counter

import pytest

from support import BOUND, ROOT, ready, register, script
from support.faults import open_files

LIMITED = ("warning: cannot run ./work.sh", "warning: cannot claim a chunk")


PIDS = "/sys/fs/cgroup/pids"


@pytest.mark.both_stores
@pytest.mark.parametrize("files,pause", [(20, "0.3"), (24, "0.3"), (24, "0"), (28, "0"), (32, "0")])
@pytest.mark.long
def test_a_drain_short_of_descriptors_never_hangs_nor_leaves_a_chunk_running(
    cli, tmp_path, files, pause
):
    """``--parallel 4`` under a hard limit of a few dozen files, jobs quick enough to be
    claimed ahead and writing more than a pipe holds: RunJob ends, exit 0, at most one
    warning line and no traceback, every chunk run once and READY."""
    cli.ok("createtables")
    register(cli, "work", ["src"], ["dst"])
    ready(cli, "src", *map(str, range(1, 21)))
    big = 'head -c 100000 /dev/zero | tr "\\0" x'
    script(tmp_path, "work.sh", f'echo "$dataid" >> ran.log; sleep {pause}; {big}')
    done = cli.runjob(
        "--all", "--parallel", "4", "./work.sh", preexec_fn=open_files(files), timeout=120
    )
    assert done.code == 0, done.err
    lines = done.err.splitlines()
    assert len(lines) <= 1 and all(line.startswith(LIMITED) for line in lines), done.err
    ran = Counter((tmp_path / "ran.log").read_text().split())
    assert ran == Counter(str(i) for i in range(1, 21)), (done.out, done.err)
    found = cli.ok("sql", "select distinct status from datastatus where jobid = 'work'")
    assert found.lines[2:] == ["READY"]


def test_a_job_never_starts_with_nobody_to_read_its_output(tmp_path):
    """With no descriptor left, a job is refused before it starts (what reads its output,
    a watcher's thread and the pipe that wakes it, comes first): one clear error, the job
    never run. A job already started needs no descriptor more: its watcher reads all it
    writes (it used epoll, whose descriptor could not be made: a traceback, and the job's
    pipe full)."""
    program = f"""
import os, resource, sys
sys.path.insert(0, {str(ROOT)!r})
from dataflow.errors import ScriptError
from dataflow.run.process.runner import Run
from dataflow.run.process.watcher import Watcher
copied = {str(tmp_path / "copied")!r}
watcher = Watcher()
watcher.ready()
job = Run(["sh", "-c", "head -c 300000 /dev/zero"], dict(os.environ), log_path=copied,
          echo=False, watcher=watcher)
job.start()
highest = max(int(fd) for fd in os.listdir("/proc/self/fd"))
resource.setrlimit(resource.RLIMIT_NOFILE, (highest + 1, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
while True:  # every descriptor taken
    try:
        os.open("/dev/null", os.O_RDONLY)
    except OSError:
        break
assert job.wait().returncode == 0
while True:  # those the job's end gave back, taken too
    try:
        os.open("/dev/null", os.O_RDONLY)
    except OSError:
        break
try:
    Run(["sh", "-c", "touch {tmp_path / "ran"}"], dict(os.environ), echo=False).start()
except ScriptError as exc:
    print(exc)
"""
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert (tmp_path / "copied").stat().st_size == 300000
    assert "nothing to read its output" in done.stdout and "open files" in done.stdout
    assert not (tmp_path / "ran").exists()


@pytest.mark.both_stores
@pytest.mark.parametrize("tasks", [8, 10, 12, 16])
@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.long
def test_a_drain_short_of_tasks_never_tracebacks_nor_leaves_a_chunk_running(
    cli, tmp_path, tasks, workers, store_kind
):
    """RunJob in a cgroup of at most ``tasks`` tasks (its threads count; root is held to
    it, unlike RLIMIT_NPROC): a thread or a fork that cannot start. It ended in a
    RuntimeError traceback (can't start new thread), its chunks left RUNNING. Now: no
    traceback, nothing RUNNING once it ends, no chunk run twice; in one process or
    spread over two (each of which may say once what it could not start)."""
    import os
    import time

    group = f"{PIDS}/sweep13-{os.getpid()}-{tasks}-{store_kind}"
    try:
        os.mkdir(group)
    except OSError as exc:
        pytest.skip(f"no pids cgroup here: {exc}")
    try:
        with open(f"{group}/pids.max", "w") as limit:
            limit.write(str(tasks))
        # what a drain short of threads waits out is the store's patience: on PostgreSQL
        # the liveness bound, here the multi-host tests' short one
        cli.env["DATAFLOW_LIVENESS_TIMEOUT"] = str(BOUND)
        cli.ok("createtables")
        register(cli, "work", ["src"], ["dst"])
        ready(cli, "src", *map(str, range(1, 13)))
        job = tmp_path / "work.sh"  # a job that forks nothing (Python, not through Spark)
        job.write_text(
            "#!/usr/bin/env python3\nimport os, time\n"
            "with open('ran.log', 'a') as f: f.write(os.environ['dataid'] + '\\n')\n"
            "time.sleep(0.3)\n"
        )
        job.chmod(0o755)

        def enter() -> None:
            with open(f"{group}/cgroup.procs", "w") as procs:
                procs.write(str(os.getpid()))

        done = cli.runjob(
            "--all",
            "--parallel",
            "4",
            "--workers",
            workers,
            "./work.sh",
            preexec_fn=enter,
            timeout=120,
        )
    finally:
        for _ in range(100):  # what is left in the group (a keeper letting go) is ended
            with open(f"{group}/cgroup.procs") as procs:
                left = procs.read().split()
            if not left:
                break
            for pid in left:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(int(pid), 9)
            time.sleep(0.1)
        os.rmdir(group)
    assert "Traceback" not in done.err, done.err
    # a holder short of threads says so at once: no session idles inside a transaction
    # while its process waits for a holder's greeting, until the server ends it
    assert "idle-in-transaction" not in done.err, done.err
    assert done.code == 0 or len(done.err.splitlines()) <= 2 * int(workers), done.err
    ran = Counter((tmp_path / "ran.log").read_text().split()) if done.code == 0 else None
    assert ran is None or ran == Counter(str(i) for i in range(1, 13))
    if (tmp_path / "ran.log").exists():
        twice = [d for d, n in Counter((tmp_path / "ran.log").read_text().split()).items() if n > 1]
        assert twice == []
    found = cli.ok("sql", "select distinct status from datastatus where jobid = 'work'")
    assert "RUNNING" not in found.lines[2:], done.err
