"""The keeper: how a run on a shared store (PostgreSQL) stays visibly alive to every host.

A run's liveness on a shared store is the store's run lock on its chunk (a session-level
advisory lock). It must be held exactly as long as some process of the run lives on its
host, and RunJob itself may die first (``kill -9``) while its job goes on. So the lock is
held by a keeper: one small process per RunJob, with its own store connection, that

- takes a chunk's run lock when RunJob asks, before the claim is committed (so a
  RUNNING row whose lock is free is always a dead run's);
- holds it while the chunk's local lock is held (the job and its children inherit that
  descriptor) or a process carries the run's ``DATAFLOW_RUN`` token, then lets it go;
- outlives RunJob: it ignores the signals a terminal or RunJob's group receives, and
  ends when RunJob has gone and no chunk it holds is alive;
- pings the store every :data:`PING_S`; its session is ended by the server after the
  liveness bound without a ping (``idle_session_timeout``), so a dead or cut-off host's
  locks free themselves within the bound (``DATAFLOW_LIVENESS_TIMEOUT``, default 20 s);
- fences itself: when a ping fails or has not succeeded for half the bound, it kills
  the process groups of its runs (SIGKILL) before any other host may reclaim them, and
  exits. RunJob likewise kills its runs when its keeper dies.

RunJob forks its keeper and talks to it over a pipe, one line per request.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading
import time

from ..store import Store
from . import locks, processes

PING_S = 2.0  # how often a keeper pings the store (more often under a bound below 12 s)
TICK_S = 0.2  # how often it looks at its runs' local locks


def _word(text: str) -> str:
    return text.encode("utf-8", "surrogatepass").hex() or "-"


def _text(word: str) -> str:
    return "" if word == "-" else bytes.fromhex(word).decode("utf-8", "surrogatepass")


class Keeper:
    """RunJob's side: the keeper process of one store, started on first use.

    The keeper is forked from RunJob, which has imported the store's driver already: a
    new interpreter would import it again (~0.4 s before RunJob's first claim). The child
    keeps nothing of RunJob's but the standard error: every other descriptor (the store's
    connection, chunk locks) is closed in it, and it opens its own connection."""

    def __init__(self, store: Store):
        requests, to_keeper = os.pipe()
        from_keeper, answers = os.pipe()
        for stream in (sys.stdout, sys.stderr):  # nothing buffered here is written twice
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        pid = os.fork()
        if pid == 0:  # the keeper
            try:
                os.dup2(requests, 0)
                os.dup2(answers, 1)
                os.closerange(3, os.sysconf("SC_OPEN_MAX"))
                main(str(store.path))
            finally:
                os._exit(0)
        os.close(requests)
        os.close(answers)
        self.requests = os.fdopen(to_keeper, "w")
        self.answers = os.fdopen(from_keeper)
        self.process = _Child(pid)
        self.watched: dict[tuple[str, str], int] = {}
        self.closing = False
        threading.Thread(target=self._fence_when_gone, daemon=True).start()

    def _send(self, line: str) -> None:
        self.requests.write(line + "\n")
        self.requests.flush()

    def hold(self, jobid: str, dataid: str) -> bool:
        """Ask the keeper to take the chunk's run lock; False if another run holds it."""
        from ..errors import StoreUnavailable

        try:
            self._send(f"hold {_word(jobid)} {_word(dataid)}")
            answer = self.answers.readline().strip()
        except OSError:
            answer = ""
        if answer not in ("0", "1"):
            why = answer[1:] if answer.startswith("!") else "the keeper process ended"
            raise StoreUnavailable("hold a run lock in", "the store", why)
        return answer == "1"

    def watch(self, jobid: str, dataid: str, token: str, group: int) -> None:
        """The chunk's job runs as process group ``group``, its processes carry ``token``."""
        self.watched[(jobid, dataid)] = group
        with contextlib.suppress(OSError):
            self._send(f"watch {_word(jobid)} {_word(dataid)} {token} {group}")

    def ended(self, jobid: str, dataid: str) -> None:
        """The chunk's run is over here: let its lock go as soon as its processes are."""
        self.watched.pop((jobid, dataid), None)
        with contextlib.suppress(OSError):
            self._send(f"check {_word(jobid)} {_word(dataid)}")

    def close(self) -> None:
        """RunJob is done: the keeper ends once no chunk it holds is alive."""
        self.closing = True
        with contextlib.suppress(OSError):
            self.requests.close()
        self.process.wait(timeout=2 * TICK_S + 1)

    def _fence_when_gone(self) -> None:
        """A keeper that dies lets its locks go: our runs must not outlive them."""
        self.process.wait()
        if not self.closing:
            _kill_groups(self.watched.values())


class _Child:
    """The keeper's process: has it ended? (for two threads: RunJob's and the fence's)"""

    def __init__(self, pid: int):
        self.pid = pid
        self.ended = threading.Event()
        self._reaping = threading.Lock()

    def poll(self) -> bool:
        with self._reaping:
            if not self.ended.is_set():
                try:
                    done, _ = os.waitpid(self.pid, os.WNOHANG)
                except ChildProcessError:
                    done = self.pid
                if done:
                    self.ended.set()
        return self.ended.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Until it ends (True), or ``timeout`` seconds (False)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.poll():
            if deadline is not None and time.monotonic() >= deadline:
                return False
            self.ended.wait(0.02)
        return True


_keepers: dict[str, Keeper] = {}


def keeper_for(store: Store) -> Keeper:
    """This process's keeper for the store (one for every drain of this RunJob)."""
    found = _keepers.get(store.identity)
    if found is None or found.process.poll():
        found = _keepers[store.identity] = Keeper(store)
    return found


def close_all() -> None:
    while _keepers:
        _keepers.popitem()[1].close()


def _kill_groups(groups) -> None:
    for group in list(groups):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)


# -- the keeper process -------------------------------------------------------------------


class _Held:
    def __init__(self) -> None:
        self.token: str | None = None
        self.group: int | None = None


def _alive_here(store: Store, chunk: tuple[str, str], held: _Held) -> bool:
    if locks.is_held(store.lockfile, *chunk):
        return True
    return bool(held.token) and bool(processes.carrying({held.token}))


def serve(store: Store, requests: int, answers) -> None:
    """Hold run locks on ``store`` as RunJob asks (lines on file descriptor ``requests``)."""
    held: dict[tuple[str, str], _Held] = {}
    pending = b""
    last_ping = [time.monotonic()]
    fence_after = _bound() / 2  # the server frees our locks after the whole bound
    ping_every = min(PING_S, _bound() / 6)

    def watchdog() -> None:  # a ping that hangs (a cut network) must not hang the fence
        while True:
            time.sleep(TICK_S)
            if time.monotonic() - last_ping[0] > fence_after:
                _fence(held)

    threading.Thread(target=watchdog, daemon=True).start()
    open_ = True
    while open_ or held:
        readable = select.select([requests], [], [], TICK_S)[0] if open_ else []
        if not open_:
            time.sleep(TICK_S)
        try:
            if readable:
                data = os.read(requests, 65536)
                open_ = bool(data)
                pending += data
            *lines, pending = pending.split(b"\n")
            for line in lines:
                _request(store, held, line.decode(), answers)
            if time.monotonic() - last_ping[0] >= ping_every:
                store.ping()
                last_ping[0] = time.monotonic()
            for chunk in list(held):
                if not _alive_here(store, chunk, held[chunk]):
                    store.drop_run_lock(*chunk)
                    del held[chunk]
        except Exception:  # the store is out of reach: our locks may be gone any moment
            _fence(held)


def _request(store: Store, held: dict, line: str, answers) -> None:
    verb, *words = line.split()
    chunk = (_text(words[0]), _text(words[1]))
    if verb == "hold":
        taken = chunk in held or store.try_run_lock(*chunk)
        if taken:
            held.setdefault(chunk, _Held())
        answers.write("1\n" if taken else "0\n")
        answers.flush()
    elif verb == "watch" and chunk in held:
        held[chunk].token, held[chunk].group = words[2], int(words[3])


def _fence(held: dict) -> None:
    """Kill every run we hold a lock for, then end: our locks are gone or about to go."""
    _kill_groups([h.group for h in list(held.values()) if h.group])
    os._exit(3)


def _bound() -> float:
    from ..store.address import liveness_timeout

    return liveness_timeout()


def main(address: str) -> None:
    """The keeper: requests on standard input, answers on standard output."""
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(number, signal.SIG_IGN)
    from ..store import open_store

    answers = os.fdopen(1, "w")
    try:
        store = open_store(address)
        store.keep_alive()
    except Exception as exc:
        answers.write(f"!{' '.join(str(exc).split())}\n")
        answers.flush()
        return
    serve(store, 0, answers)
