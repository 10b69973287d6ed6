"""Where a host's lease holder is found, and how the first RunJob that needs it starts it.

One holder process per host and store (:mod:`.holderprocess`) holds the leases of every
run of the host, so that a host holds one long-lived server session per store however
many RunJobs it runs. It is found through a Unix socket in the host's state folder
(``$DATAFLOW_STATE``, where the chunk lock file is), named by the store's identity (and
a digest of the host's name and liveness bound: holders of two bounds never mix),
beside two lock files:

- ``….lock``: held by the holder as long as it lives (its pid inside), so that only one
  holder at a time may bind, or remove, the socket;
- ``….start``: held by a RunJob while it starts a holder, so that RunJobs starting at
  once start one holder, and the others connect to it.

The socket is created with mode 0600 and the holder serves only clients of its own user
(``SO_PEERCRED``); a client trusts only a holder of its own user in turn.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from ...store import Store
from ...store.address import host_name
from ..process import processes
from .holder import LOG_NAME, bound

START_S = 30.0  # how long a RunJob waits for a holder to start (a slow server included)
# how long it waits for the holder's session: a pooler in session mode lends one once
# another host's holder ends, its queue bounded by its query_wait_timeout (60 s in
# docs/stores.md, PgBouncer's default 120 s): the pooler's word ends the wait, not ours
SESSION_S = 150.0
_CRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
_MAX_PATH = 100  # a Unix socket's path is at most 107 bytes


class Place:
    """The socket and lock files of the holder of one store on this host."""

    def __init__(self, store: Store):
        folder = Path(store.lockfile).parent  # the host's state folder of the store
        # RunJobs of another bound, or naming this host otherwise, have a holder of their own
        key = hashlib.sha256(f"{host_name()}\0{bound():.3f}".encode()).hexdigest()[:12]
        name = f"{store.identity}-holder-{key}"
        self.socket = folder / f"{name}.sock"
        self.lock = folder / f"{name}.lock"
        self.start = folder / f"{name}.start"
        self.log = Path(store.files) / LOG_NAME
        self.name = name

    def runs(self, pid: int) -> Path:
        """The file where the holder of ``pid`` lists the runs it holds."""
        return self.socket.parent / f"{self.name}.{pid}.runs"


def listings(prefix: str) -> list[Path]:
    """The runs files of every holder whose files start with ``prefix``, dead or alive."""
    return [Path(found) for found in glob.glob(f"{glob.escape(prefix)}.*.runs")]


def fence_listed(listing: Path) -> set[str]:
    """Kill every process of the runs a holder listed in ``listing`` (it died, or is
    killed: nobody holds their leases any more); their tokens."""
    try:
        lines = listing.read_text().split("\n")
    except OSError:
        return set()
    runs = [line.split() for line in lines if len(line.split()) == 2]
    tokens = {token for token, _ in runs}
    groups = {int(group) for _, group in runs if group.isdigit() and int(group) > 0}
    if tokens or groups:
        processes.kill(tokens, groups)
    return tokens


@contextlib.contextmanager
def reachable(path: Path) -> Iterator[str]:
    """A name of ``path`` a socket call takes: a long path is reached through its folder's
    descriptor (``/proc/self/fd/N/name``)."""
    if len(os.fsencode(str(path))) <= _MAX_PATH:
        yield str(path)
        return
    folder = os.open(path.parent, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{folder}/{path.name}"
    finally:
        os.close(folder)


def peer(sock: socket.socket) -> tuple[int, int]:
    """(pid, uid) of the process at the other end of a Unix socket."""
    pid, uid, _ = _CRED.unpack(sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _CRED.size))
    return pid, uid


def readable(fd: int, timeout: float) -> bool:
    """Can ``fd`` be read within ``timeout`` seconds? (poll, not select: a drain of many
    slots has descriptors above 1023)"""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(timeout * 1000))


def read_line(sock: socket.socket, timeout: float) -> str | None:
    """One short line (a greeting) read byte by byte, so that nothing after it is taken
    from the socket; '' at its end, None after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    data = b""
    while not data.endswith(b"\n"):
        left = deadline - time.monotonic()
        if left <= 0 or not readable(sock.fileno(), left):
            return None
        try:
            byte = sock.recv(1)
        except OSError:
            return ""
        if not byte:
            return ""
        data += byte
    return data[:-1].decode()


class Refused(Exception):
    """The living holder cannot serve this connection, and says why (its greeting)."""


def connect(place: Place, kind: str) -> tuple[socket.socket, int] | None:
    """A connection of ``kind`` (``requests`` or ``pings``) to the living holder, and its
    pid; None when none lives or it is ending (it closed without a greeting). A holder
    that does not greet within a quarter of the bound (stopped, starved) is killed, as a
    RunJob kills one that does not answer its pings: the next one started serves. A
    holder that greets with ``!`` and a reason cannot serve it (it could not start a
    thread): :class:`Refused`, at once."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        with reachable(place.socket) as name:
            sock.connect(name)
        pid, uid = peer(sock)
        if uid != os.getuid():  # never a holder of another user's
            raise ConnectionRefusedError
        # a holder that refuses says why and closes without reading this: the pipe may
        # break before it is sent, and its greeting is read all the same
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            sock.sendall(f"{kind}\n".encode())
        greeting = read_line(sock, bound() / 4)
        if greeting is None:
            kill(pid)
            fence_listed(place.runs(pid))
        elif greeting.startswith("!"):  # it lives, and says why it cannot serve this
            sock.close()
            raise Refused(f"the lease holder of this host {greeting[1:]}")
        if greeting != "ok":
            raise ConnectionResetError
    except OSError:
        sock.close()
        return None
    return sock, pid


def kill(pid: int) -> None:
    """SIGKILL to a holder that does not answer (connected to it: its pid is its own)."""
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)


def take_lock(path: Path | str, busy: str, wait: float = START_S) -> int:
    """The descriptor of lock file ``path``, locked (waits up to ``wait`` seconds, then
    ``TimeoutError(busy)``)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(fd)
                raise TimeoutError(busy) from None
            time.sleep(0.01)


@contextlib.contextmanager
def _starting(place: Place) -> Iterator[None]:
    """The start lock: one RunJob at a time starts a holder (waits as long as a start
    may take)."""
    busy = "another RunJob starting the holder took too long"
    fd = take_lock(place.start, busy, START_S + SESSION_S)
    try:
        yield
    finally:
        os.close(fd)


def start(store: Store, place: Place) -> str | None:
    """Start the host's holder of the store unless one lives (another RunJob may start
    it at the same time: the start lock lets one of them); None once it serves, else
    the reason it does not (``!`` first; ``!!``: waiting does not mend it)."""
    place.socket.parent.mkdir(parents=True, exist_ok=True)
    with _starting(place):
        found = connect(place, "pings")
        if found is not None:
            found[0].close()
            return None
        return _spawn(store, place)


def _spawn(store: Store, place: Place) -> str | None:
    """A new interpreter in a session of its own (not a fork: it must carry nothing of
    this RunJob's environment that would make it look like a process of a run, and no
    descriptor of it), told its store and files on standard input; it says ``ready``."""
    import dataflow

    env = {
        name: value
        for name, value in os.environ.items()
        if name not in _RUN_MARKS and not name.startswith("PASSKEY")
    }
    root = str(Path(dataflow.__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, env.get("PYTHONPATH")]))
    os.makedirs(store.files, exist_ok=True)
    told = {
        "address": str(store.path),
        "socket": str(place.socket),
        "lock": str(place.lock),
        "runs": str(place.socket.parent / place.name),  # + ".PID.runs"
    }
    with open(place.log, "ab") as log:
        child = subprocess.Popen(
            [sys.executable, "-m", f"{__package__}.holderprocess"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=log,
            env=env,
            cwd="/",
            start_new_session=True,
            close_fds=True,
        )
    threading.Thread(target=child.wait, daemon=True).start()  # reaped when it ends
    assert child.stdin is not None and child.stdout is not None
    try:
        child.stdin.write((json.dumps(told) + "\n").encode())
        child.stdin.close()
        ready = readable(child.stdout.fileno(), START_S + SESSION_S)
        said = child.stdout.readline().decode().strip() if ready else ""
    except OSError:
        said = ""
    finally:
        child.stdout.close()
    if said == "ready":
        return None
    if said.startswith("!"):
        return said
    with contextlib.suppress(ProcessLookupError):
        if not ready:
            child.kill()
    return f"!the lease holder did not start (see {place.log})"


# what marks a process as one of a run's (processes.chunks_alive): never the holder's
_RUN_MARKS = frozenset({processes.VARIABLE, processes.STORE_VARIABLE, "jobid", "dataid"})
