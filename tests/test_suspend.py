"""A terminal's ^Z that lands while a process of ours is being started (a job, a worker,
a folder's RunJob) is put off until that process is noted where the stop is passed on:
it stops with the rest, once, and goes on with them at fg. Real processes, real signals."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import Iterator

import pytest

from support import process_state, wait_for


@contextlib.contextmanager
def _parent(tmp_path, script: str, *args: str) -> Iterator[tuple[subprocess.Popen, list[int]]]:
    """A process running ``script`` in a process group of its own, its output read; at the
    end it is killed if it still lives, and so is each child the test noted in the list."""
    parent = subprocess.Popen(
        [sys.executable, "-c", script, *args],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        text=True,
        process_group=0,
    )
    children: list[int] = []
    try:
        yield parent, children
    finally:
        for pid in children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)
            parent.wait()


def _noted(tmp_path, children: list[int]) -> int:
    """The child's pid, from the file child, noted to be killed at the end."""
    children.append(int((tmp_path / "child").read_text()))
    return children[-1]


# a process with the ^Z handler of a drain, which starts a child in a group of its own
# (argv[1]: from the main thread, or from another one) and gets a ^Z while it does; the
# child's pid written to the file child at once, "went on" said once the child has ended
STARTS_AS_IT_IS_STOPPED = """
import os, signal, subprocess, sys, threading, time
from dataflow.run.process import suspend

children = []


def pass_on(number):
    for child in children:
        os.killpg(child.pid, number)


def start():
    with suspend.starting():
        os.kill(os.getpid(), signal.SIGTSTP)  # the ^Z
        if sys.argv[1] == "thread":
            time.sleep(0.5)  # the main thread handles it meanwhile
        child = subprocess.Popen(["sleep", "60"], process_group=0)
        children.append(child)
        with open("child.tmp", "w") as said:
            said.write(str(child.pid))
        os.rename("child.tmp", "child")


suspend.install(pass_on)
if sys.argv[1] == "thread":
    starter = threading.Thread(target=start)
    starter.start()
    starter.join()
else:
    start()
children[0].wait()
print("went on", flush=True)
"""


@pytest.mark.parametrize("where", ["main", "thread"])
def test_a_stop_that_lands_while_a_process_starts_stops_it_too_and_once(tmp_path, where):
    """Before, the ^Z was passed on at once, to the processes already noted: the one
    being started went on through the stop."""
    with _parent(tmp_path, STARTS_AS_IT_IS_STOPPED, where) as (parent, children):
        wait_for(lambda: process_state(parent.pid) == "T", what="the parent stopped")
        wait_for((tmp_path / "child").exists, what="the child started (before the stop)")
        child = _noted(tmp_path, children)
        wait_for(lambda: process_state(child) == "T", what="the child stopped")
        os.killpg(parent.pid, signal.SIGCONT)  # fg
        wait_for(lambda: process_state(child) not in ("T", ""), what="the child to go on")
        os.kill(child, signal.SIGTERM)
        # a second stop (the ^Z passed on twice) would hold the parent here
        assert parent.stdout.readline() == "went on\n"
        assert parent.wait(timeout=30) == 0


# a process with the ^Z handler of a drain and one child in a group of its own; a second
# ^Z lands as the first is passed on, before this process has stopped. "went on" said
# once the child has ended
STOPPED_TWICE_AT_ONCE = """
import os, signal, subprocess

child = subprocess.Popen(["sleep", "60"], process_group=0)
print(child.pid, flush=True)
seconds = []


def pass_on(number):
    os.killpg(child.pid, number)
    if number == signal.SIGTSTP and not seconds:
        seconds.append(number)
        os.kill(os.getpid(), signal.SIGTSTP)  # the second ^Z


from dataflow.run.process import suspend

suspend.install(pass_on)
os.kill(os.getpid(), signal.SIGTSTP)  # the first
child.wait()
print("went on", flush=True)
"""


def test_a_second_stop_before_the_first_has_stopped_this_process_is_the_same_stop(tmp_path):
    """It was handled as a stop of its own, inside the first: at fg it passed SIGCONT on
    and this process stopped once more, its child going on alone."""
    with _parent(tmp_path, STOPPED_TWICE_AT_ONCE) as (parent, children):
        child = int(parent.stdout.readline())
        children.append(child)
        wait_for(lambda: process_state(parent.pid) == "T", what="the parent stopped")
        # (the stop passed on is sent before the parent stops, and lands a moment later)
        wait_for(lambda: process_state(child) == "T", what="the child stopped")
        os.killpg(parent.pid, signal.SIGCONT)  # fg
        wait_for(lambda: process_state(child) not in ("T", ""), what="the child to go on")
        os.kill(child, signal.SIGTERM)
        assert parent.wait(timeout=30) == 0  # not stopped again
        assert parent.stdout.read() == "went on\n"


# a process with the ^Z handler of a drain that gets a ^Z, then a SIGCONT, while it starts
# a child in a group of its own (a pause and a resume as a script sends them); the child's
# pid written to the file child, "went on" said once the child has ended
STOPPED_AND_CONTINUED_WHILE_STARTING = """
import os, signal, subprocess
from dataflow.run.process import suspend

children = []
suspend.install(lambda number: [os.killpg(child.pid, number) for child in children])
with suspend.starting():
    os.kill(os.getpid(), signal.SIGTSTP)  # put off
    os.kill(os.getpid(), signal.SIGCONT)  # and void
    children.append(subprocess.Popen(["sleep", "60"], process_group=0))
with open("child", "w") as said:
    said.write(str(children[0].pid))
children[0].wait()
print("went on", flush=True)
"""


def test_a_stop_put_off_and_then_continued_is_void(tmp_path):
    """The stop put off was sent again once the start was done, though the process had
    been continued meanwhile: it stopped then, with its jobs, and nothing continued it."""
    with _parent(tmp_path, STOPPED_AND_CONTINUED_WHILE_STARTING) as (parent, children):
        wait_for((tmp_path / "child").exists, what="the child started")
        child = _noted(tmp_path, children)
        wait_for(lambda: process_state(child) not in ("", "Z"), what="the child running")
        os.kill(child, signal.SIGTERM)
        assert parent.wait(timeout=30) == 0  # never stopped
        assert parent.stdout.read() == "went on\n"


# a process with the ^Z handler of a drain whose run's thread starts a child in a group of
# its own (a validation check) just as a ^Z is being passed on; the child's pid written to
# the file child once it is started, "went on" said once it has ended
STARTS_WHILE_A_STOP_IS_PASSED_ON = """
import os, signal, subprocess, threading, time
from dataflow.run.process import suspend

children = []
go = threading.Event()


def start():
    go.wait()
    with suspend.starting():
        children.append(subprocess.Popen(["sleep", "60"], process_group=0))
    with open("child.tmp", "w") as said:
        said.write(str(children[-1].pid))
    os.rename("child.tmp", "child")


def pass_on(number):
    for child in list(children):
        os.killpg(child.pid, number)
    if number == signal.SIGTSTP and not go.is_set():
        go.set()  # the thread starts its child now, after the stop was passed on
        time.sleep(0.5)


starter = threading.Thread(target=start)
starter.start()
suspend.install(pass_on)
os.kill(os.getpid(), signal.SIGTSTP)  # the ^Z
starter.join()
children[0].wait()
print("went on", flush=True)
"""


def test_a_start_in_another_thread_while_a_stop_is_passed_on_waits_for_fg(tmp_path):
    """The process was started between the handler's look at the starts under way and
    the end of the stop: it was not stopped, and ran on while its parent was."""
    with _parent(tmp_path, STARTS_WHILE_A_STOP_IS_PASSED_ON) as (parent, children):
        wait_for(lambda: process_state(parent.pid) == "T", what="the parent stopped")
        early = _noted(tmp_path, children) if (tmp_path / "child").exists() else None
        assert early is None, f"started during the stop, {process_state(early)!r} meanwhile"
        os.killpg(parent.pid, signal.SIGCONT)  # fg
        wait_for((tmp_path / "child").exists, what="the child started, after fg")
        child = _noted(tmp_path, children)
        wait_for(lambda: process_state(child) not in ("", "Z"), what="the child running")
        assert process_state(child) != "T"
        os.kill(child, signal.SIGTERM)
        assert parent.stdout.readline() == "went on\n"
        assert parent.wait(timeout=30) == 0


# a process with the ^Z handler of a drain and one child in a group of its own, paused
# and resumed by a script (kill -TSTP, kill -CONT): the resume lands while the stop is
# being passed on, before this process has stopped; then it says its child's state
CONTINUED_WHILE_THE_STOP_IS_PASSED_ON = """
import os, signal, subprocess, time
from pathlib import Path
from dataflow.run.process import suspend

child = subprocess.Popen(["sleep", "60"], process_group=0)


def pass_on(number):
    os.killpg(child.pid, number)
    if number == signal.SIGTSTP:
        Path("passing").touch()
        time.sleep(1)  # the resume lands meanwhile


suspend.install(pass_on)
os.kill(os.getpid(), signal.SIGTSTP)  # the pause
print(Path(f"/proc/{child.pid}/stat").read_text().rsplit(")", 1)[1].split()[0], flush=True)
child.kill()
"""


def test_a_resume_that_lands_while_the_stop_is_passed_on_is_not_lost(tmp_path):
    """The stop went on after the resume: this process and its jobs stayed stopped, with
    nothing to continue them."""
    with _parent(tmp_path, CONTINUED_WHILE_THE_STOP_IS_PASSED_ON) as (parent, _):
        wait_for((tmp_path / "passing").exists, what="the stop being passed on")
        os.kill(parent.pid, signal.SIGCONT)  # the resume
        out, _ = parent.communicate(timeout=20)  # a stop after it would hold it here
        assert parent.returncode == 0 and out in ("S\n", "R\n"), out  # its child goes on
