"""The keeper: how a run on a shared store (PostgreSQL) holds its lease for every host.

A run's lease on a shared store is two facts: the store's run lock on its chunk (a
session-level advisory lock) and the run's heartbeat (``run.seen``, renewed every
:data:`PING_S`). Another host may take the chunk only when the lock is free *and* the
heartbeat is older than the liveness bound (``DATAFLOW_LIVENESS_TIMEOUT``, default 20 s);
the store revokes a stale lease when it does (``seen`` set to NULL), so a keeper that
comes back late finds it gone and fences the run. A lock alone is never proof of death:
the server may end a session (``pg_terminate_backend``, a restart) while its run lives.

The lease must last exactly as long as some process of the run lives on its host, and
RunJob may die first (``kill -9`` of it, or of its whole process group) while its job
goes on. So the lease is held by a keeper: one process per RunJob, forked from it into a
session of its own (no signal to RunJob's group or terminal reaches it, and it keeps none
of RunJob's descriptors, so a caller reading RunJob's output never waits for it), that

- takes a chunk's run lock when RunJob asks, before the claim is committed;
- renews the heartbeat of its runs while the chunk's local lock is held (the job and its
  children inherit that descriptor) or a process carries the run's ``DATAFLOW_RUN``
  token, then lets the lock go and releases the lease at once;
- reconnects when its session is ended, and takes its locks again;
- fences itself: when a heartbeat has not succeeded for half the bound, or the store
  revoked a lease, it kills every process of those runs (:func:`.processes.kill`) before
  any other host may take them, then ends.

RunJob watches its keeper in turn: a keeper that dies, or does not answer a ping within
a quarter of the bound (stopped, starved), is killed, and so is every process of RunJob's
runs. A keeper whose RunJob died goes on holding the lease of a job that lives on, as the
local lock does on a store of one host.

Requests come one line each on a pipe, and answers go back on another; pings have a
pipe pair of their own, answered by a thread that never touches the store.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time

from ..store import Store
from ..store.address import shown
from . import processes
from .holder import LOG_NAME, TICK_S, Lines, bound, main, one_line, say, word
from .output import write_all


class Keeper:
    """RunJob's side: the keeper process of one store, started on first use.

    The keeper is forked from RunJob, which has imported the store's driver already: a
    new interpreter would import it again (~0.4 s before RunJob's first claim)."""

    def __init__(self, store: Store):
        requests, to_keeper = os.pipe()
        from_keeper, answers = os.pipe()
        pings, to_pings = os.pipe()
        from_pongs, pongs = os.pipe()
        for stream in (sys.stdout, sys.stderr):  # nothing buffered here is written twice
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        pid = os.fork()
        if pid == 0:  # the keeper
            try:
                os.setsid()
                _isolate(store, keep=(requests, answers, pings, pongs))
                main(str(store.path), requests, answers, pings, pongs)
            except BaseException as exc:
                say(f"internal error: {type(exc).__name__}: {one_line(exc)}")
            finally:
                os._exit(0)
        for fd in (requests, answers, pings, pongs):
            os.close(fd)
        self.requests, self.answers = to_keeper, Lines(from_keeper)
        self.pings, self.pongs = to_pings, from_pongs
        self.process = _Child(pid)
        # this RunJob's runs whose lease the keeper may hold: runid -> token, process group
        # (0 once the run's end is recorded: a process it left is fenced by its token)
        self.runs: dict[int, tuple[str, int]] = {}
        self.failed: str | None = None  # why this keeper is not trusted any more
        self.where = shown(store.path)  # the store, for a person
        self.closing = False
        self._talk = threading.Lock()
        threading.Thread(target=self._watch, daemon=True).start()

    def _ask(self, line: str) -> str:
        with self._talk:
            try:
                write_all(self.requests, (line + "\n").encode())
                return self.answers.read(None) or ""
            except OSError:
                return ""

    def hold(self, chunks: list[tuple[str, str]]) -> list[bool]:
        """Ask the keeper to take these chunks' run locks, in one request; False for each
        that another run holds."""
        from ..errors import StoreUnavailable

        if not chunks:
            return []
        asked = " ".join(f"{word(jobid)} {word(dataid)}" for jobid, dataid in chunks)
        answer = "" if self.failed else self._ask(f"hold {asked}")
        held = answer.split()
        if len(held) != len(chunks) or not set(held) <= {"0", "1"}:
            why = (
                answer.lstrip("!") if answer.startswith("!") else self.failed or "the keeper ended"
            )
            lasting = answer.startswith("!!")  # its addresses reach two databases: say it now
            raise StoreUnavailable("hold a run lock in", self.where, why, passing=not lasting)
        return [one == "1" for one in held]

    def watch(self, jobid: str, dataid: str, runid: int, token: str, group: int) -> None:
        """The chunk's run ``runid`` runs as process group ``group`` (0: none, a thread of
        this process), its processes carry ``token``: the keeper renews its lease."""
        self.runs[runid] = (token, group)
        if self.failed:
            self._fence()  # no keeper holds its lease: the run must not go on
        else:
            self._tell(f"watch {word(jobid)} {word(dataid)} {runid} {token} {group}")

    def ended(self, jobid: str, dataid: str, runid: int) -> bool:
        """The run's end is recorded and its chunk lock closed here: the keeper lets the
        chunk go at its next look if no process of the run is left (a finish never waits
        for it). One that is left is still fenced should the keeper fail. True when the
        keeper failed and the run was fenced: nobody else will end its lease."""
        token = self.runs[runid][0] if runid in self.runs else None
        if token is not None:
            self.runs[runid] = (token, 0)
        if not self.failed:  # the keeper sees it at its next look (a tick)
            return False
        return token is not None and not processes.carrying({token})

    def look(self) -> None:
        """Chunks were given back unstarted (their chunk locks closed): the keeper lets
        their run locks go now, not at its next tick. Another drain that finds one held
        passes it over, and may end with it left."""
        if not self.failed:
            self._tell("look")

    def _tell(self, line: str) -> None:
        """A request that is not answered (the keeper's death is seen by the watch)."""
        with self._talk, contextlib.suppress(OSError):
            write_all(self.requests, (line + "\n").encode())

    def close(self) -> None:
        """RunJob is done: the keeper ends once no chunk it holds is alive."""
        self.closing = True
        for fd in (self.requests, self.pings):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.process.wait(timeout=2 * TICK_S + 1)

    def _watch(self) -> None:
        """Ping the keeper; fence every run of ours when it dies or stops answering."""
        patience = bound() / 4
        pongs = Lines(self.pongs)
        pruned = time.monotonic()
        while not self.closing:
            try:
                os.write(self.pings, b"\n")
                answered = pongs.read(patience)
            except OSError:
                answered = ""
            if self.closing:
                return
            if not answered or self.process.poll():
                why = "did not answer" if answered is None else "ended"
                self.failed = f"the keeper process {why}"
                self._fence()
                return
            if time.monotonic() - pruned > 10:  # forget ended runs nothing of is left
                ended = {token: runid for runid, (token, group) in self.runs.items() if not group}
                for token in set(ended) - processes.carrying(set(ended)):
                    self.runs.pop(ended[token], None)
                pruned = time.monotonic()
            self.process.ended.wait(TICK_S)

    def _fence(self) -> None:
        if not self.process.poll():  # unreaped, its pid is still its own: never a stranger's
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGKILL)
        runs = list(self.runs.values())
        processes.kill({token for token, _ in runs}, {group for _, group in runs if group})


def _isolate(store: Store, keep: tuple[int, ...]) -> None:
    """In the keeper: every descriptor of RunJob's closed but the pipes in ``keep``; its
    standard input and output on /dev/null, its standard error to the keeper log."""
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    try:
        store.files.mkdir(parents=True, exist_ok=True)
        log = os.open(store.files / LOG_NAME, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError:
        log = null
    os.dup2(log, 2)
    keep = (0, 1, 2, *keep)
    for name in os.listdir("/proc/self/fd"):
        if int(name) not in keep:
            with contextlib.suppress(OSError):
                os.close(int(name))


class _Child:
    """The keeper's process: has it ended? (for two threads: RunJob's and the watch's)"""

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
            self.ended.wait(0.005)
        return True


_keepers: dict[str, Keeper] = {}


def keeper_for(store: Store) -> Keeper:
    """This process's keeper for the store (one for every drain of this RunJob)."""
    found = _keepers.get(store.identity)
    if found is None or found.failed or found.process.poll():
        found = _keepers[store.identity] = Keeper(store)
    return found


def current(store: Store) -> Keeper | None:
    """This process's keeper for the store, if it has one."""
    return _keepers.get(store.identity)


def close_all() -> None:
    while _keepers:
        _keepers.popitem()[1].close()
