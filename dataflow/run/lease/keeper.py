"""The keeper: how a run on a shared store (PostgreSQL) holds its lease for every host.

A run's lease on a shared store is two facts: the store's run lock on its chunk (a
session-level advisory lock) and the run's heartbeat (``run.seen``, renewed every
:data:`PING_S`). Another host may take the chunk only when the lock is free *and* the
heartbeat is older than the liveness bound (``DATAFLOW_LIVENESS_TIMEOUT``, default 20 s);
the store revokes a stale lease when it does (``seen`` set to NULL), so a holder that
comes back late finds it gone and fences the run. A lock alone is never proof of death:
the server may end a session (``pg_terminate_backend``, a restart) while its run lives.

The lease must last exactly as long as some process of the run lives on its host, and
RunJob may die first (``kill -9`` of it, or of its whole process group) while its job
goes on. So the lease is held by the host's lease holder (:mod:`.holderprocess`): one
process per host and store, shared by every RunJob, drain and worker of the host, so
that a host holds one long-lived server session per store however many jobs it runs.
The first RunJob that needs it starts it (:mod:`.holdersocket`); the others connect to
its socket. It

- takes a chunk's run lock when a RunJob asks, before the claim is committed;
- renews the heartbeats of all its runs (one statement) while a chunk's local lock is
  held (the job and its children inherit that descriptor) or a process carries the run's
  ``DATAFLOW_RUN`` token, then lets the lock go and releases the lease at once;
- reconnects when its session is ended, and takes its locks again;
- fences: when a heartbeat has not succeeded for half the bound, or the store revoked a
  lease, it kills every process of those runs (:func:`..process.processes.kill`), whichever RunJob
  started them, before any other host may take them.

Each RunJob watches the holder in turn (this module, its side): a holder that dies, or
does not answer a ping within a quarter of the bound (stopped, starved), is killed, and
so is every process of that RunJob's runs. A RunJob that dies leaves its runs' leases with
the holder as long as a process of them lives, as the local lock does on a store of one
host.

Requests come one line each on a connection to the holder's socket, and answers go back
on it; pings have a connection of their own, answered by a thread that never touches the
store.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
import time

from ...store import Store
from ...store.address import shown
from ..process import processes
from ..process.output import write_all
from .holder import PING_S, TICK_S, Lines, bound, one_line, word
from .holdersocket import Place, Refused, connect, fence_listed, readable, start

__all__ = ["PING_S", "Keeper", "close_all", "current", "keeper_for"]


class Keeper:
    """A RunJob's side of its host's lease holder of one store, reached on first use (and
    started, when none lives)."""

    def __init__(self, store: Store):
        # this RunJob's runs whose lease the holder may hold: runid -> token, process group
        # (0 once the run's end is recorded: a process it left is fenced by its token)
        self.runs: dict[int, tuple[str, int]] = {}
        self.failed: str | None = None  # why this holder is not trusted any more
        self.refused: str | None = None  # the holder could not be reached: why ("!...")
        self.where = shown(store.path)  # the store, for a person
        self.place = Place(store)
        self.closing = False
        self._talk = threading.Lock()
        self._stop = threading.Event()
        self.pid, self._pidfd = 0, -1
        self.requests = self.pings = -1
        self._watcher: threading.Thread | None = None
        try:
            found = _reached(store, self.place)
        except (OSError, TimeoutError, Refused) as exc:
            found = f"!{one_line(exc)}"
        if isinstance(found, str):  # said at the first hold
            self.refused = found
            self.failed = found.lstrip("!")
            return
        self._sockets, self.pid = found[:2], found[2]
        self.requests, self.pings = (sock.fileno() for sock in self._sockets)
        self.answers = Lines(self.requests)
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        with contextlib.suppress(OSError, AttributeError):  # (a kernel without pidfds)
            self._pidfd = os.pidfd_open(self.pid)
        self._watcher.start()

    def _ask(self, line: str, timeout: float | None = None) -> str:
        with self._talk:
            try:
                write_all(self.requests, (line + "\n").encode())
                return self.answers.read(timeout) or ""
            except OSError:
                return ""

    def hold(self, chunks: list[tuple[str, str]]) -> list[bool]:
        """Ask the holder to take these chunks' run locks, in one request; False for each
        that another run holds."""
        from ...errors import StoreUnavailable

        if not chunks:
            return []
        asked = " ".join(f"{word(jobid)} {word(dataid)}" for jobid, dataid in chunks)
        answer = self.refused or ("" if self.failed else self._ask(f"hold {asked}"))
        held = answer.split()
        if len(held) != len(chunks) or not set(held) <= {"0", "1"}:
            why = (
                answer.lstrip("!")
                if answer.startswith("!")
                else self.failed or "the lease holder ended"
            )
            lasting = answer.startswith("!!")  # its addresses reach two databases: say it now
            raise StoreUnavailable("hold a run lock in", self.where, why, passing=not lasting)
        return [one == "1" for one in held]

    def watch(self, jobid: str, dataid: str, runid: int, token: str, group: int) -> None:
        """The chunk's run ``runid`` runs as process group ``group`` (0: none, a thread of
        this process), its processes carry ``token``: the holder renews its lease."""
        self.runs[runid] = (token, group)
        if self.failed:
            self._fence(False)  # no holder holds its lease: the run must not go on
        else:
            self._tell(f"watch {word(jobid)} {word(dataid)} {runid} {token} {group}")

    def ended(self, runid: int) -> bool:
        """The run's end is recorded and its chunk lock closed here: the holder lets the
        chunk go at its next look if no process of the run is left (a finish never waits
        for it). One that is left is still fenced should the holder fail. True when the
        holder failed and the run was fenced: nobody else will end its lease."""
        token = self.runs[runid][0] if runid in self.runs else None
        if token is not None:
            self.runs[runid] = (token, 0)
        if not self.failed and self._exited():  # before its watch sees it (this run was
            self.failed = "the lease holder process ended"  # fenced by another RunJob)
            self._fence(False)  # as the watch would: no holder holds our other runs
        if not self.failed:  # the holder sees it at its next look (a tick)
            return False
        return token is not None and not processes.carrying({token})

    def _exited(self) -> bool:
        """The holder's process has ended (its pidfd is readable); False when unknown."""
        return self._pidfd >= 0 and readable(self._pidfd, 0)

    def look(self) -> None:
        """Chunks were given back unstarted (their chunk locks closed): the holder lets
        their run locks go now, not at its next tick. Another drain that finds one held
        passes it over, and may end with it left."""
        if not self.failed:
            self._tell("look")

    def _tell(self, line: str) -> None:
        """A request that is not answered (the holder's death is seen by the watch)."""
        with self._talk, contextlib.suppress(OSError):
            write_all(self.requests, (line + "\n").encode())

    def close(self) -> None:
        """RunJob is done: the holder lets go now of its runs that ended (those that live
        on keep their leases), and serves the host's other RunJobs."""
        if self.closing:
            return
        self.closing = True
        self._stop.set()
        if not self.failed and self.requests >= 0:
            self._ask("bye", timeout=2 * TICK_S + 1)
        sockets = getattr(self, "_sockets", ())
        for sock in sockets:  # the watch reads its end now, and writes nothing more...
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        if self._watcher is not None:  # ...before a descriptor it used may be another's
            self._watcher.join(timeout=2)
        for sock in sockets:
            sock.close()
        if self._pidfd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._pidfd)
            self._pidfd = -1

    def _watch(self) -> None:
        """Ping the holder; fence every run of ours when it dies or stops answering."""
        patience = bound() / 4
        pongs = Lines(self.pings)
        pruned = time.monotonic()
        while not self.closing:
            try:
                os.write(self.pings, b"\n")
                answered = pongs.read(patience)
            except (OSError, ValueError):
                answered = ""
            if self.closing:
                return
            if not answered:
                why = "did not answer" if answered is None else "ended"
                self.failed = f"the lease holder process {why}"
                self._fence(answered is None)
                return
            if time.monotonic() - pruned > 10:  # forget ended runs nothing of is left
                ended = {token: runid for runid, (token, group) in self.runs.items() if not group}
                for token in set(ended) - processes.carrying(set(ended)):
                    self.runs.pop(ended[token], None)
                pruned = time.monotonic()
            self._stop.wait(TICK_S)

    def _fence(self, stuck: bool) -> None:
        """Kill every process of this RunJob's runs: no holder holds their leases. A
        holder that is ``stuck`` (stopped, starved) is killed first, so that its session
        ends now and every other RunJob it serves fences its runs too."""
        if stuck and self._pidfd >= 0:  # a pidfd: never a stranger that took its pid
            with contextlib.suppress(OSError):
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
        if self.pid:  # every run it held, other RunJobs' and those a dead RunJob left
            fence_listed(self.place.runs(self.pid))
        runs = list(self.runs.values())
        processes.kill({token for token, _ in runs}, {group for _, group in runs if group})


def _reached(store: Store, place: Place) -> tuple[socket.socket, socket.socket, int] | str:
    """Connections of requests and pings to the host's holder of the store, and its pid;
    the holder started first when none lives. A string: why it could not be reached."""
    for _ in range(3):  # a holder ending as it is reached: another is started
        requests = connect(place, "requests")
        if requests is None:
            why = start(store, place)
            if why is not None:
                return why
            requests = connect(place, "requests")
            if requests is None:
                continue
        pings = connect(place, "pings")
        if pings is not None and pings[1] == requests[1]:
            return requests[0], pings[0], requests[1]
        requests[0].close()
        if pings is not None:
            pings[0].close()
    return "!the lease holder of this host ended each time it was reached"


_keepers: dict[str, Keeper] = {}


def keeper_for(store: Store) -> Keeper:
    """This process's side of the host's holder for the store (one for every drain of
    this RunJob)."""
    found = _keepers.get(store.identity)
    if found is None or found.failed:
        if found is not None:
            found.close()
        found = _keepers[store.identity] = Keeper(store)
    return found


def current(store: Store) -> Keeper | None:
    """This process's side of the holder for the store, if it has one."""
    return _keepers.get(store.identity)


def close_all() -> None:
    while _keepers:
        _keepers.popitem()[1].close()
