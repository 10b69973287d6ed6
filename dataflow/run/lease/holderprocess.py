"""The lease holder process of one store on this host (``python -m`` this module).

Started by the first RunJob that needs a lease (:func:`.holdersocket.start`), in a
session of its own, with none of that RunJob's descriptors: it outlives a ``kill -9`` of
any RunJob, or of its process group. It serves every RunJob, drain and worker of the host
on its Unix socket (:mod:`.holdersocket`): each opens two connections, one of requests
(the lines of :mod:`.holder`) and one of pings, answered by a thread that never touches
the store, so that a holder waiting on the server still answers, and one that is stopped
or starved does not. It holds one server session for all of them (:mod:`.holder`), and
ends once it has held no run and served no RunJob for ``DATAFLOW_HOLDER_IDLE`` seconds,
its socket removed first. What it has to say goes to its log (standard error).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from ...store.address import holder_idle
from .holder import PING_S, TICK_S, State, bound, one_line, say, serve_requests, tick, watchdog
from .holdersocket import START_S, fence_listed, listings, peer, reachable, read_line, take_lock


class _Holder:
    """The holder's state and the RunJobs it serves."""

    def __init__(self, state: State, listener: socket.socket, path: str):
        self.state, self.listener, self.path = state, listener, path
        self.clients = 0  # RunJobs (their requests connections) connected now
        self.closing = False  # decided to end: no new client is served
        # over both: a client is greeted without waiting for the store (state.lock)
        self.gate = threading.Lock()

    def accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:  # closed: the holder ends
                return
            try:
                _, uid = peer(conn)
            except OSError:
                uid = -1
            if uid != os.getuid():  # the socket's mode keeps others out; this, too
                conn.close()
                continue
            try:
                threading.Thread(target=self.client, args=(conn,), daemon=True).start()
            except RuntimeError as exc:  # a cap on tasks: said, not left waiting
                with contextlib.suppress(OSError):
                    conn.sendall(f"!could not start a thread: {one_line(exc)}\n".encode())
                conn.close()

    def client(self, conn: socket.socket) -> None:
        with conn:
            kind = read_line(conn, START_S)
            if kind == "pings":
                self._pings(conn)
            elif kind == "requests":
                self._requests(conn)

    def _pings(self, conn: socket.socket) -> None:
        if self.closing:
            return  # (closed without a greeting: the client starts another holder)
        with contextlib.suppress(OSError):
            conn.sendall(b"ok\n")
            while data := conn.recv(4096):
                conn.sendall(b"1\n" * data.count(b"\n"))

    def _requests(self, conn: socket.socket) -> None:
        with self.gate:
            if self.closing:
                return
            self.clients += 1
        try:
            conn.sendall(b"ok\n")
            serve_requests(self.state, conn.fileno(), lambda line: conn.sendall(line.encode()))
        except OSError:
            pass
        finally:
            with self.gate:
                self.clients -= 1
            self.state.woken.set()  # its runs that ended are let go now

    def serve(self) -> None:
        """Hold the leases of the host's runs until idle for the grace time."""
        limit, grace = bound(), holder_idle()
        ping_every = min(PING_S, limit / 6)
        state = self.state
        threading.Thread(target=watchdog, args=(state, limit / 2), daemon=True).start()
        threading.Thread(target=self.accept, daemon=True).start()
        busy = time.monotonic()  # when it last served a RunJob or held a run
        while True:
            state.woken.wait(TICK_S)
            state.woken.clear()
            with state.lock:  # (no chunk is held meanwhile: requests take it too)
                tick(state, ping_every, limit / 2)
                with self.gate:
                    now = time.monotonic()
                    if self.clients or state.chunks:
                        busy = now
                    elif now - busy >= grace:
                        self.closing = True  # under the gate: no client is taken after
                        with contextlib.suppress(OSError), reachable(Path(self.path)) as name:
                            os.unlink(name)  # while it holds the lock file (see main)
                        break
        self.listener.close()


def _bind(path: str) -> socket.socket:
    """The holder's socket, mode 0600 (its folder may be readable by others)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with reachable(Path(path)) as name:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name)  # a dead holder's: only the holder of the lock file removes it
        mask = os.umask(0o177)
        try:
            listener.bind(name)
        finally:
            os.umask(mask)
        os.chmod(name, 0o600)
    listener.listen(128)
    return listener


def _lock(path: str) -> int:
    """The lock file, held as long as this holder lives (a holder that is ending still
    holds it a moment: wait for it), with this holder's pid inside."""
    fd = take_lock(path, "another lease holder of this store lives")
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def _fence_predecessors(prefix: str) -> None:
    """Kill every process of the runs a holder before this one listed and did not let go
    of: it died (this holder has its lock file), and their leases with it."""
    for listing in listings(prefix):
        fenced = fence_listed(listing)
        if fenced:
            say(f"the holder before this one ended holding {len(fenced)} run(s): fenced")
        with contextlib.suppress(OSError):
            listing.unlink()


def main() -> None:
    """Told its store's address and its files on standard input (never in its command
    line: an address may carry a password), it says ``ready`` on standard output, or
    ``!`` and why not (``!!``: waiting does not mend it), then closes it."""
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(number, signal.SIG_IGN)
    told = json.loads(sys.stdin.readline())
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    ready = os.dup(1)
    os.dup2(null, 1)
    os.close(null)
    state = State(told["address"])
    try:
        _lock(told["lock"])
        _fence_predecessors(told["runs"])
        state.listing = f"{told['runs']}.{os.getpid()}.runs"
        state.connect()
        listener = _bind(told["socket"])
    except Exception as exc:
        mark = "!!" if getattr(exc, "lasting", False) else "!"
        os.write(ready, f"{mark}{one_line(exc)}\n".encode())
        say(f"not started: {one_line(exc)}")
        return
    os.write(ready, b"ready\n")
    os.close(ready)
    try:
        _Holder(state, listener, told["socket"]).serve()
    except BaseException as exc:  # a defect here: nobody would hold the leases any more
        state.fence(state.runs(), f"internal error {type(exc).__name__}: {exc}")
        os._exit(3)
    with contextlib.suppress(OSError):
        os.unlink(state.listing)  # (it holds no run)
    os._exit(0)  # (its daemon threads wait on sockets: end now)


if __name__ == "__main__":
    main()
