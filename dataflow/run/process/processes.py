"""Processes of a run, found by its token: to tell whether it lives, and to fence it.

Every process of a run inherits the variable ``DATAFLOW_RUN=<token>``, a random 128-bit
token stored on the run's history row (unique forever: a deleted row's number may come
back, its token never does). A helper the job detaches with its descriptors closed (for
example ``subprocess.Popen(..., start_new_session=True)``: new session, new process group,
no lock descriptor) still carries it, so a run is live while any process with its token
exists. The boundary: a process that drops its environment (``env -i``, an ``execve``
with a clean one) *and* closes the lock descriptor *and* leaves the job's process group is
not seen, nor one whose environment we may not read (another user's, unless RunJob runs
as root).

Reading every ``/proc/PID/environ`` costs a few milliseconds, so it is done only when a
lock alone says "dead", a finished chunk is about to start again, or a run is fenced.
"""

from __future__ import annotations

import _signal as signal  # signal's C core: its module's enums import enum
import contextlib
import os
import time
from collections.abc import Collection, Iterable

from ...store.address import HOST_ENV

VARIABLE = "DATAFLOW_RUN"
STORE_VARIABLE = "DATAFLOW_STORE"  # the store a job's chunk is of (Store.identity)
ATTEMPT_VARIABLE = "DATAFLOW_ATTEMPT"  # the number of the run's attempt at its chunk
HOST_PREFIX = f"{HOST_ENV}=".encode()  # the host a process was started for, if it names one


def keep_exit_codes() -> None:
    """SIGCHLD at its default, in a process that starts jobs (RunJob, a worker): a parent
    may have left it ignored, and the kernel would then reap each job, its exit code lost
    (a failed job taken for one that ended well)."""
    if signal.getsignal(signal.SIGCHLD) == signal.SIG_IGN:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)


def new_token() -> str:
    """A fresh run token: 128 random bits (what ``secrets.token_hex(16)`` returns, without
    the ~3 ms its import of hashlib and random costs every RunJob)."""
    return os.urandom(16).hex()


def legacy_token(store_identity: str, runid: int) -> str:
    """The token of a run claimed before tokens were stored (its store and history row)."""
    return f"{store_identity}:{runid}"


_EXITING, _KERNEL = 0x4, 0x200000  # PF_EXITING, PF_KTHREAD: a task's flags (its stat)
ENDING_WAIT_S = 0.25  # how long a look waits for an ending process to close its files


def _proc(pid: int | str, task: str, name: str) -> str:
    """A file of /proc about a process, or about one of its tasks (threads)."""
    return f"/proc/{pid}/task/{task}/{name}" if task else f"/proc/{pid}/{name}"


def _stat(pid: int | str, task: str = "") -> list[bytes] | None:
    """The fields of a process's stat (or of one of its tasks') after its name, its state
    first; None once gone."""
    try:
        with open(_proc(pid, task, "stat"), "rb") as file:
            return file.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _flags(pid: str, task: str = "") -> int | None:
    """A process's (or one of its tasks') flags; None once gone or a zombie."""
    fields = _stat(pid, task)
    return None if not fields or fields[0] in (b"Z", b"X") else int(fields[6])


def _environment(pid: str, task: str = "") -> bytes | None:
    """A process's (or one of its tasks') environment; b"" when it has no memory to read it
    from (a kernel thread, a task ending, a main thread that has ended), None when gone or
    another user's."""
    try:
        with open(_proc(pid, task, "environ"), "rb") as file:
            return file.read()
    except ProcessLookupError:
        return b""
    except OSError:
        return None


def _tasks(pid: str) -> list[str]:
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []


def _through_threads(pid: str) -> bytes:
    """The environment of a process whose main thread cannot be read, read through its
    other threads (a main thread may end while the others go on: a JVM's, or a C
    program's after pthread_exit); b"" when none can be read."""
    for task in _tasks(pid):
        if found := _environment(pid, task):
            return found
    return b""


def _ending(pid: str) -> bool:
    """Is a task of the process ending but not yet a zombie? It lets go of its memory (its
    environment) before it closes its files, and the locks on them: a big process takes a
    while to, longer on a busy host; with threads, its main thread may be a zombie while
    another ends the process. Another user's process is not looked at (unless this one
    is root's): it cannot be a process of ours."""
    uid = os.getuid()
    try:
        if uid and os.stat(f"/proc/{pid}").st_uid != uid:
            return False
    except OSError:
        return False
    return any((_flags(pid, task) or 0) & _EXITING for task in _tasks(pid))


def _environments(marks: Collection[bytes]) -> Iterable[tuple[int, list[bytes] | None]]:
    """(pid, environment variables) of every live process on this host we may read, but
    this one, whose environment holds one of ``marks`` (the others are not split: most
    processes are nobody's run, and one look at the bytes tells). A process whose main
    thread has ended is read through its other threads. A process ending (its environment
    gone, its files open) may be anyone's: the look waits a moment for it to end, and one
    still ending after :data:`ENDING_WAIT_S` comes as (pid, None)."""
    me = os.getpid()
    unread = []  # looked at again only when what the look found did not end it
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        found = _environment(name)
        if found == b"":
            unread.append(name)
        elif found and any(mark in found for mark in marks):
            yield int(name), found.split(b"\0")
    ending = []
    for name in unread:
        if (_flags(name) or 0) & _KERNEL:
            continue
        found = _through_threads(name)
        if not found:
            ending.append(name)
        elif any(mark in found for mark in marks):
            yield int(name), found.split(b"\0")
    deadline = time.monotonic() + ENDING_WAIT_S
    while ending := [pid for pid in ending if _ending(pid)]:
        if time.monotonic() > deadline:
            for pid in ending:
                yield int(pid), None
            return
        time.sleep(0.005)


def _scan(tokens: set[str]) -> Iterable[tuple[int, str | None]]:
    """(pid, token) of every live process on this host that carries one of ``tokens``;
    (pid, None) for one ending unnamed, which may carry any of them."""
    wanted = {f"{VARIABLE}={t}".encode(): t for t in tokens}
    for pid, variables in _environments(wanted):
        if variables is None:
            yield pid, None
            continue
        for variable in variables:
            if variable in wanted:
                yield pid, wanted[variable]
                break


def carrying(tokens: set[str]) -> set[str]:
    """The tokens that some live process on this host carries in its environment."""
    if not tokens:
        return set()
    found: set[str] = set()
    for _, token in _scan(tokens):
        if token is None:
            return set(tokens)
        found.add(token)
        if len(found) == len(tokens):
            break
    return found


def chunks_alive(
    tokens: dict[str, tuple[str, str]], store: str, host: str | None = None
) -> set[tuple[str, str]]:
    """Those chunks (jobid, dataid) of ``tokens`` (a run's token: its chunk) of which a
    process lives on this host: one carrying the run's token, or one whose environment
    holds the chunk's ``jobid`` and ``dataid`` and the identity of ``store``, whatever
    token it carries (a store writer may rewrite or delete a run's history row; a process
    keeps its own environment). One look at the processes.

    With ``host`` (a shared store's name of this host), a process whose environment
    names another host in ``DATAFLOW_HOST`` is that host's: its lease speaks for it (two
    hosts declared on one machine see each other's processes here, not their leases)."""
    if not tokens:
        return set()
    wanted = {f"{VARIABLE}={t}".encode(): chunk for t, chunk in tokens.items()}
    ours_host = f"{HOST_ENV}={host}".encode() if host is not None else None
    identities = {
        (f"jobid={j}".encode(), f"dataid={d}".encode()): (j, d) for j, d in wanted.values()
    }
    ours = f"{STORE_VARIABLE}={store}".encode()
    found: set[tuple[str, str]] = set()
    for _, variables in _environments([*wanted, ours]):
        if variables is None:  # ending: it may be a process of any of them
            return set(identities.values())
        job = data = b""
        mine = False
        carried: set[tuple[str, str]] = set()
        elsewhere = False
        for variable in variables:
            if variable in wanted:
                carried.add(wanted[variable])
            elif ours_host is not None and variable.startswith(HOST_PREFIX):
                elsewhere = variable != ours_host
            elif variable.startswith(b"jobid="):
                job = variable
            elif variable.startswith(b"dataid="):
                data = variable
            elif variable == ours:
                mine = True
        if elsewhere:
            continue
        found |= carried
        if mine and (job, data) in identities:
            found.add(identities[job, data])
        if len(found) == len(identities):
            break
    return found


def pids_carrying(token: str) -> set[int]:
    """The live processes on this host that carry ``token`` (none ending unnamed)."""
    return {pid for pid, found in _scan({token}) if found}


def _group(pid: int) -> int | None:
    fields = _stat(pid)
    return int(fields[2]) if fields else None


def kill(tokens: set[str], groups: Iterable[int] = (), patience: float = 2.0) -> None:
    """SIGKILL every process of the runs: each process carrying one of ``tokens``, and
    every member of ``groups`` (the runs' process groups). A group is signalled only
    while a process carrying a token is in it: a group id is never reused while it has a
    member, so the signal can never reach a stranger's group that got the same number.
    Repeated until no process carries a token (a dying job may still fork), for at most
    ``patience`` seconds; a process ending unnamed is waited for, never signalled."""
    groups = set(groups)
    deadline = time.monotonic() + patience
    while True:
        found = list(_scan(tokens)) if tokens else []
        named = [pid for pid, token in found if token is not None]
        ours = {_group(pid) for pid in named} & groups
        for group in ours:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
        for pid in named:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        if not found or time.monotonic() > deadline:
            return
        time.sleep(0.02)
