"""The lease holder's lease logic: the leases of every run of one host on one store
(see :mod:`.keeper`, a RunJob's side, for what a lease is and why a holder holds it;
:mod:`.holderprocess` for the process that serves the host's RunJobs).

It takes chunks' run locks as RunJobs ask (``hold``), watches their runs (``watch``),
looks at its chunks at once when told (``look``), renews every run's heartbeat in one
statement, lets a chunk go once no process of its run lives on this host, reconnects
when its session is ended and takes its locks again, and fences its runs (kills every
process of them, whichever RunJob started them) when it cannot renew for half the bound
or the store revoked a lease.
What it has to say goes to ``holder.log`` in the store's folder of this host.
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
import time

from ...store import LeaseStore
from ...store.address import host_name
from ..process import locks, processes

PING_S = 2.0  # how often a holder renews its heartbeats (more often under a bound below 12 s)
TICK_S = 0.2  # how often it looks at its runs' local locks and processes
LOG_NAME = "holder.log"  # in the store's folder of this host: what the holder had to say


def word(text: str) -> str:
    return text.encode("utf-8", "surrogatepass").hex() or "-"


def text(word: str) -> str:
    return "" if word == "-" else bytes.fromhex(word).decode("utf-8", "surrogatepass")


def bound() -> float:
    from ...store.address import liveness_timeout

    return liveness_timeout()


class Lines:
    """Lines read from a pipe, with a timeout."""

    def __init__(self, fd: int):
        self.fd, self.pending = fd, b""
        self._poller = select.poll()  # not select(): a drain of many slots has descriptors
        self._poller.register(fd, select.POLLIN)  # above 1023

    def read(self, timeout: float | None) -> str | None:
        """The next line ('' at end of file); None after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while b"\n" not in self.pending:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not self._poller.poll(None if left is None else left * 1000):
                return None
            data = os.read(self.fd, 65536)
            if not data:
                return ""
            self.pending += data
        line, self.pending = self.pending.split(b"\n", 1)
        return line.decode()


class _Run:
    """A run whose lease the holder holds."""

    def __init__(self, chunk: tuple[str, str], runid: int, token: str, group: int):
        self.chunk, self.runid, self.token, self.group = chunk, runid, token, group
        self.beat = time.monotonic()  # when its lease was last renewed (or first watched)
        self.fenced = False  # by the watchdog: its lease went unrenewed too long

    def __str__(self) -> str:
        return f"{self.chunk[0]}/{self.chunk[1]} (run {self.runid})"


class State:
    """The holder's runs, its connection and its heartbeat, shared by its threads."""

    def __init__(self, address: str):
        self.address = address
        self.store: LeaseStore | None = None
        self.chunks: dict[tuple[str, str], _Run | None] = {}  # run locks held
        # of those, the ones this session does not hold yet: after a reconnect, until
        # the next request or heartbeat takes them; then those a store writer held
        # (tried again at each request and heartbeat)
        self.missing: set[tuple[str, str]] = set()
        # leases to end whose rows another transaction held: let go of at each look
        self.unreleased: set[int] = set()
        self.lock = threading.Lock()  # one user of the store and of ``chunks`` at a time
        self.beat = time.monotonic()  # when the last heartbeat that succeeded was sent
        self.woken = threading.Event()  # look at the runs now, not at the next tick
        self.outage: float | None = None  # since when the store is out of reach (monotonic)
        self.retry = TICK_S  # the wait before the next reconnect, doubled up to half a beat's
        self.retry_at = 0.0  # no reconnect before (monotonic)
        # where the runs it holds are listed for whoever must fence them should it die
        self.listing: str | None = None
        self._listed: frozenset[tuple[str, int]] = frozenset()

    def lost(self, exc: BaseException) -> None:
        """The store failed: said once an outage, its session dropped."""
        if self.outage is None:
            self.outage = time.monotonic()
            say(f"store out of reach ({one_line(exc)[:200]}); reconnecting")
        self._drop()

    def _drop(self) -> None:
        if self.store is not None:
            with contextlib.suppress(Exception):
                self.store.close()
            self.store = None

    def connect(self) -> None:
        """A new session, heartbeaten before it takes its run locks again (they are
        taken by :meth:`take_missing`): a session the server ends as soon as it holds a
        run lock has renewed the heartbeat first."""
        from ...store import open_store

        self._drop()
        store = open_store(self.address, session=True)  # straight to the server, past a pooler
        assert isinstance(store, LeaseStore)  # a holder is started for such a store only
        store.keep_alive()
        self.store = store
        self.missing = set(self.chunks)  # lost with the old session; leases held on
        try:
            self.heartbeat()
        except BaseException:
            self._drop()  # the next tick or request reconnects
            raise
        if self.outage is not None:
            say(f"store reached again after {time.monotonic() - self.outage:.1f} s")
            self.outage = None

    def heartbeat(self) -> None:
        """Renew every run's lease in one statement; a run whose lease was revoked is
        fenced and let go."""
        assert self.store is not None
        sent, runs = time.monotonic(), self.runs()
        renewed = self.store.renew_leases([run.runid for run in runs])
        self.beat = sent
        for run in runs:  # (one whose row another transaction held: the watchdog's to fence)
            if renewed.get(run.runid):
                run.beat = sent
        revoked = [run for run in runs if run.runid not in renewed]
        if revoked:
            self.fence(revoked, "lease revoked by the store")
            for run in revoked:
                del self.chunks[run.chunk]
            self.store.drop_run_locks([run.chunk for run in revoked])

    def release(self, runids: list[int]) -> None:
        """End these runs' leases, and those left before, never waiting for a row another
        transaction holds (a claim may hold one while it waits for this holder's answer):
        those are left for the next look."""
        assert self.store is not None
        asked = self.unreleased | set(runids)
        if asked:
            self.unreleased = self.store.release_leases(sorted(asked), wait=False)

    def take_missing(self) -> None:
        """Take the run locks this session does not hold yet (see ``missing``); nothing to
        do, as at most requests, costs nothing."""
        assert self.store is not None
        self.missing &= self.chunks.keys()
        if not self.missing:
            return
        chunks = list(self.missing)
        for chunk, ok in zip(chunks, self.store.try_run_locks(chunks), strict=True):
            if ok:
                self.missing.discard(chunk)

    def runs(self) -> list[_Run]:
        return [run for run in self.chunks.values() if run is not None]

    def publish(self) -> None:
        """List the runs it holds (token and process group, a line each) in its runs
        file when they changed: a RunJob that sees this holder die, and the holder started
        after it, kill every process of them (a RunJob that died left them to it)."""
        runs = frozenset((run.token, run.group) for run in self.runs())
        if self.listing is None or runs == self._listed:
            return
        temporary = f"{self.listing}.new"
        with contextlib.suppress(OSError):
            with open(temporary, "w") as file:
                file.writelines(f"{token} {group}\n" for token, group in sorted(runs))
            os.replace(temporary, self.listing)
            self._listed = runs

    def fence(self, runs: list[_Run], why: str) -> None:
        """Kill every process of ``runs``: their leases are gone, or about to go."""
        if runs:
            say(f"{why}: fencing {', '.join(map(str, runs))}")
        processes.kill({run.token for run in runs}, {run.group for run in runs})


def one_line(exc: BaseException) -> str:
    """An error's message on one line (a driver's may span several)."""
    return " ".join(str(exc).split())


def say(line: str) -> None:
    with contextlib.suppress(OSError):
        os.write(2, f"{time.strftime('%Y-%m-%d %H:%M:%S')} holder {os.getpid()}: {line}\n".encode())


def _gone(store: LeaseStore, chunks: dict[tuple[str, str], _Run | None]) -> list[tuple[str, str]]:
    """The chunks no process of whose run lives here: its chunk lock free, no process
    carrying its token nor the chunk's jobid, dataid and store (a helper that dropped
    the token); one look at the processes for all of them."""
    free = [chunk for chunk in chunks if not locks.is_held(store.lockfile, *chunk)]
    tokens = {run.token: chunk for chunk in free if (run := chunks[chunk]) is not None}
    alive = processes.chunks_alive(tokens, store.identity, host_name()) if tokens else set()
    return [chunk for chunk in free if chunks[chunk] is None or chunk not in alive]


def _request(state: State, line: str) -> str | None:
    verb, *words = line.split()
    if verb == "look":  # a claim given back: its run lock let go now, not at the next tick
        state.woken.set()
        return None
    store = state.store
    if store is None:
        raise ConnectionError("the lease holder is reconnecting to the store")
    state.take_missing()  # after a reconnect (its heartbeat first): at once, whatever asks
    if verb == "watch":  # not answered
        chunk = (text(words[0]), text(words[1]))
        state.chunks[chunk] = _Run(chunk, int(words[2]), words[3], int(words[4]))
        return None
    # hold: each chunk's run lock, answered in the order asked ("1" held, "0" not)
    pairs = zip(words[::2], words[1::2], strict=True)
    chunks = [(text(job), text(dataid)) for job, dataid in pairs]
    fresh = [chunk for chunk in chunks if chunk not in state.chunks]
    held = dict(zip(fresh, store.try_run_locks(fresh), strict=True))
    answers = []
    for chunk in chunks:
        earlier = state.chunks.get(chunk)
        if chunk in state.missing:  # ours, its lock held by another session now
            answers.append("0")
            continue
        if chunk in state.chunks:  # ours already: not while an earlier run of ours lives
            if earlier is not None and processes.carrying({earlier.token}):
                answers.append("0")
                continue
            if earlier is not None:
                state.release([earlier.runid])
        elif not held[chunk]:
            answers.append("0")
            continue
        state.chunks[chunk] = None
        answers.append("1")
    return " ".join(answers)


def watchdog(state: State, fence_after: float) -> None:
    """A heartbeat that hangs (a cut network) must not hang the fence. A run whose lease
    was not renewed for as long (its row held by another transaction at each heartbeat,
    :func:`_renew`) is fenced alone, counted from its own last renewal: its lease lapses
    a bound after it, whatever the heartbeats of the others."""
    while True:
        time.sleep(TICK_S)
        now = time.monotonic()
        if now - state.beat > fence_after:
            state.fence(state.runs(), f"no heartbeat for {fence_after:g} s")
            os._exit(3)
        late = [
            run
            for run in list(state.chunks.values())  # (a copy: no lock, the tick may hang)
            if run is not None and not run.fenced and now - run.beat > fence_after
        ]
        if late:
            for run in late:
                run.fenced = True
            state.fence(late, f"lease not renewed for {fence_after:g} s")


def reconnect_wait(retry: float, since_beat: float, fence_after: float, ping_every: float) -> float:
    """How long a holder out of reach waits before it asks the store again: ``retry``
    (doubled at each failure, up to half a heartbeat: a server restarting is not asked
    five times a second by every holder), but a tick once the fence is less than a
    heartbeat away, so that a server back before the fence is heartbeaten in time."""
    return TICK_S if since_beat + retry > fence_after - ping_every else retry


def _renew(state: State, ping_every: float, fence_after: float) -> None:
    """A heartbeat (on a new session when the last one was lost), then the run locks a
    reconnect could not take yet. Out of reach, the store is asked again after
    :func:`reconnect_wait`."""
    sent = time.monotonic()
    try:
        if state.store is None:
            state.connect()
        else:
            state.heartbeat()
        state.retry = TICK_S
        state.take_missing()
    except Exception as exc:
        state.lost(exc)
        state.retry_at = sent + reconnect_wait(
            state.retry, sent - state.beat, fence_after, ping_every
        )
        state.retry = min(state.retry * 2, ping_every / 2)


def let_go(state: State) -> None:
    """Let go of the chunks no process of whose run lives here any more: their leases
    released and their run locks dropped, a statement for all of them whatever their
    number (kept on a failure: a later look lets them go, after a reconnect; a lease
    whose row another transaction holds is released at a later look)."""
    if state.store is None:
        return
    try:
        gone = _gone(state.store, state.chunks)
        state.release([run.runid for chunk in gone if (run := state.chunks[chunk])])
        if gone:
            state.store.drop_run_locks(gone)
            for chunk in gone:
                del state.chunks[chunk]
    except Exception as exc:  # the next heartbeat reconnects
        state.lost(exc)


def tick(state: State, ping_every: float, fence_after: float) -> None:
    """What the holder does at each tick (under its state's lock): a heartbeat when one
    is due, and a look at its runs."""
    now = time.monotonic()
    if now >= state.retry_at and (now - state.beat >= ping_every or state.store is None):
        _renew(state, ping_every, fence_after)
    let_go(state)
    state.publish()


def serve_requests(state: State, requests: int, answer) -> None:
    """One client's requests, a line each, until it closes its end; ``answer`` sends a
    line back."""
    lines = Lines(requests)
    while line := lines.read(None):
        with state.lock:
            try:
                if line == "bye":  # the client ends: its runs that ended are let go now
                    let_go(state)
                    reply: str | None = "1"
                else:
                    try:
                        reply = _request(state, line)
                    except Exception as exc:  # its session ended: at once, not at a beat
                        state.lost(exc)
                        state.connect()  # heartbeaten; _request takes the run locks again
                        reply = _request(state, line)
            except Exception as exc:
                reply = f"!{one_line(exc)}"
            state.publish()
        if reply is not None:
            answer(reply + "\n")
