"""Is a chunk's run alive? Its chunk lock says so, or a process carrying its token.

The lock is held by every process that inherited its descriptor (the job and its
children); the token (:mod:`..process.processes`) is carried by every process that inherited
the environment, which covers a helper that closed its descriptors and left. On a
shared store, whose runs may live on other hosts, the host's lease holder turns both
into a lease every host can see (:mod:`..lease.keeper`): the store's run lock and the run's
heartbeat.
A run is dead there only when the lock is free *and* the heartbeat is older than the
liveness bound.

The store says which it needs (``Store.liveness``: ``"lock"`` or ``"lease"``); this
module answers for both, and the rest of the run path asks it, never the store's kind.
"""

from __future__ import annotations

import contextlib
import os
import time

from ...errors import StoreUnavailable
from ...store import DRIVER_ERRORS, Row, Store, address
from ..process import locks, processes
from . import patience

TYPE_CHECKING = False  # typing's flag, without importing typing (a run's start)
if TYPE_CHECKING:  # a lock's run (SQLite) imports nothing of the lease
    from ...store.leases import LeaseStore

HOST_ENV = address.HOST_ENV
host_name = address.host_name  # $DATAFLOW_HOST, else the node name; checked


class KeeperFirst(Exception):
    """A claim would reach its host's lease holder for the first time inside its
    transaction (its RunJob counted no candidate before it: a job run by a clock, a dead
    run's chunk the claim recovered), where a holder slow to start would leave its session
    idle: it is given back, the holder reached, and the claim made again."""


class _Locks:
    """Liveness on this host: a run lives while its chunk lock is held or a process
    carries its token."""

    def prepare(self, store: Store, jobid: str) -> None:
        return None

    def before_threads(self, store: Store) -> None:
        return None

    def hold(self, store: Store, chunks: list[tuple[str, str, Row | None]]) -> list[bool]:
        return [True] * len(chunks)  # the local lock is the whole of it

    def started(self, store: Store, jobid: str, dataid: str, runid: int, token: str, group: int):
        return None

    def ended(self, store: Store, jobid: str, dataid: str, runid: int) -> None:
        return None

    def released(self, store: Store) -> None:
        return None  # the chunk lock, closed, was the whole of it

    def lapsing(self, since: float) -> bool:
        return False  # a local lock does not lapse

    def live_runs(self, store: Store, chunks: list[tuple[str, str]], revoke: bool):
        live = {chunk for chunk in chunks if locks.is_held(store.lockfile, *chunk)}
        tokens = {}
        for chunk in set(chunks) - live:
            last = store.last_run(*chunk)
            if last:
                tokens[run_token(store, last)] = chunk
        return live | processes.chunks_alive(tokens, store.identity)

    def last_run_lives(self, store: Store, jobid: str, dataid: str) -> bool:
        return bool(self.live_runs(store, [(jobid, dataid)], False))


class _Leases(_Locks):
    """Liveness every host sees: a run's lease (its run lock and heartbeat in the
    store), held by its host's lease holder, beside its local lock."""

    def prepare(self, store: LeaseStore, jobid: str) -> None:
        with store.transaction():  # (of its own: a session lost meanwhile is opened again)
            likely = store.count_candidates(jobid)
        if likely:  # work likely: its holder is reached now, while RunJob gets ready to
            from ..lease.keeper import keeper_for  # claim (else at the claim, if one is

            keeper_for(store)  # made: cron's idle calls start none)

    def before_threads(self, store: LeaseStore) -> None:
        from ..lease.keeper import keeper_for

        keeper_for(store)

    def hold(self, store: LeaseStore, chunks: list[tuple[str, str, Row | None]]) -> list[bool]:
        from ..lease.keeper import current, keeper_for

        if not chunks:
            return []
        if current(store) is None:  # never inside a transaction: see KeeperFirst
            raise KeeperFirst
        keeper = keeper_for(store)
        leased = _leased(store, keeper, chunks)
        free = [(jobid, dataid) for jobid, dataid, _ in chunks if (jobid, dataid) not in leased]
        held = dict(zip(free, keeper.hold(free), strict=True))  # one request for all of them
        return [held.get((jobid, dataid), False) for jobid, dataid, _ in chunks]

    def started(
        self, store: LeaseStore, jobid: str, dataid: str, runid: int, token: str, group: int
    ):
        from ..lease.keeper import keeper_for

        keeper_for(store).watch(jobid, dataid, runid, token, group)

    def ended(self, store: LeaseStore, jobid: str, dataid: str, runid: int) -> None:
        from ..lease.keeper import current

        found = current(store)
        if found is not None and found.ended(runid):
            # its holder is gone, its processes killed: the chunk is free at once, or (the
            # store out of reach for longer than its patience) once the lease lapses
            with contextlib.suppress(StoreUnavailable, *DRIVER_ERRORS):
                patience.patiently(store, lambda: _release(store, runid))

    def released(self, store: LeaseStore) -> None:
        from ..lease.keeper import current

        found = current(store)
        if found is not None:
            found.look()

    def lapsing(self, since: float) -> bool:
        return time.monotonic() - since > address.liveness_timeout() / 2

    def live_runs(self, store: LeaseStore, chunks: list[tuple[str, str]], revoke: bool):
        held = store.run_locks_held(chunks)
        return held | store.live_leases([c for c in chunks if c not in held], revoke)

    def last_run_lives(self, store: LeaseStore, jobid: str, dataid: str) -> bool:
        # the lease covers other hosts' processes (see take); this host's are looked at
        # too: a helper whose holder was killed after RunJob ended
        last = store.last_run(jobid, dataid)
        token = {run_token(store, last): (jobid, dataid)} if last else {}
        return bool(processes.chunks_alive(token, store.identity, host_name()))


def _release(store: LeaseStore, runid: int) -> None:
    with store.transaction():
        store.release_leases([runid])


def _leased(
    store: LeaseStore, keeper, chunks: list[tuple[str, str, Row | None]]
) -> set[tuple[str, str]]:
    """Those chunks whose last run (not one of this RunJob's: its holder judges those)
    holds a lease. Fresh, it lives elsewhere; stale, it is revoked now under its row's lock
    (all of them in one statement), unless its holder renewed it since the look or holds
    its row now."""
    others = [
        (jobid, dataid, last)
        for jobid, dataid, last in chunks
        if last and last.get("seen") is not None and last["runid"] not in keeper.runs
    ]
    fresh = {(jobid, dataid) for jobid, dataid, last in others if last["leased"]}
    stale = [(jobid, dataid) for jobid, dataid, _ in others if (jobid, dataid) not in fresh]
    return fresh | store.live_leases(stale, revoke=True)


_KINDS = {"lock": _Locks(), "lease": _Leases()}


def _of(store: Store) -> _Locks:
    return _KINDS[store.liveness]


def before_threads(store: Store) -> None:
    """Reach now, before this process starts threads (a Spark driver, gRPC), what a claim
    needs: a shared store's lease holder (started when none lives)."""
    _of(store).before_threads(store)


def prepare(store: Store, jobid: str) -> None:
    """Before a claim: what liveness needs ready (a shared store's lease holder, when
    there is work)."""
    _of(store).prepare(store, jobid)


def take(store: Store, chunks: list[tuple[locks.ChunkLock, str, str, Row | None]]) -> list[bool]:
    """Lock chunks for runs that are about to be claimed (inside the claim's
    transaction), each (lock, jobid, dataid, last): its local lock, and on a shared store
    its lease too: no lease of its last run ``last`` (one of this RunJob's own runs is
    judged by its holder, which knows its processes), and the run lock, held by this
    host's lease holder (one request for them all). Never waits. A lock not taken is
    closed."""
    if not chunks:
        return []
    local: list[bool] = []
    try:  # a lock that cannot be opened (no descriptor left) lets go of those taken
        local.extend(lock.try_acquire() for lock, *_ in chunks)
        ours = [
            (jobid, dataid, last)
            for (_, jobid, dataid, last), ok in zip(chunks, local, strict=True)
            if ok
        ]
        held = iter(_of(store).hold(store, ours))
        taken = [ok and next(held) for ok in local]
    except BaseException:
        for lock, *_ in chunks:
            lock.close()
        raise
    for (lock, *_), ok in zip(chunks, taken, strict=True):
        if not ok:
            lock.close()
    return taken


def released(store: Store) -> None:
    """Claims were given back unstarted, their chunk locks closed: their leases end now."""
    _of(store).released(store)


def lapsing(store: Store, since: float) -> bool:
    """May the lease of a run claimed at ``since`` (``time.monotonic()``) and not started
    yet lapse soon? Nobody renews it before its start (its holder watches a run from its
    start): once it is older than the bound another host may take the chunk, so a drain
    gives such claims back at half the bound (``claims.release`` leaves one taken since)."""
    return _of(store).lapsing(since)


def started(store: Store, jobid: str, dataid: str, runid: int, token: str, group: int) -> None:
    """A claimed chunk's job now runs as process group ``group``."""
    _of(store).started(store, jobid, dataid, runid, token, group)


def ended(store: Store, jobid: str, dataid: str, runid: int) -> None:
    """A run's end is recorded and its chunk lock closed (its holder holds the lease on
    while a process of the run lives)."""
    _of(store).ended(store, jobid, dataid, runid)


def run_token(store: Store, run: Row) -> str:
    """``DATAFLOW_RUN`` of a run, from its history row."""
    return run.get("token") or processes.legacy_token(store.identity, run["runid"])


def is_live(store: Store, jobid: str, dataid: str) -> bool:
    """Does any process of the chunk's last run live (its lock, or its token)?"""
    return bool(live_runs(store, [(jobid, dataid)]))


def last_run_lives(store: Store, jobid: str, dataid: str) -> bool:
    """May the chunk's last run still have a process (one that left its job's process
    group and closed its descriptors), so that its outputs may not be rewritten yet?"""
    return _of(store).last_run_lives(store, jobid, dataid)


def live_runs(
    store: Store, chunks: list[tuple[str, str]], revoke: bool = False
) -> set[tuple[str, str]]:
    """Those of ``chunks`` (jobid, dataid) whose last run has a live process; one look at
    the processes for all the chunks whose lock is free. On a shared store, with
    ``revoke`` (in a write transaction), the stale leases of the others are revoked."""
    return _of(store).live_runs(store, chunks, revoke)


def living(store: Store, runs: list[Row]) -> set[int]:
    """The runids of ``runs`` a process of which lives on this host (its token), or that
    are their chunk's last run while the chunk's lock is held."""
    tokens = {run_token(store, run): run["runid"] for run in runs}
    found = {tokens[token] for token in processes.carrying(set(tokens))}
    for run in runs:
        if locks.is_held(store.lockfile, run["jobid"], run["dataid"]):
            last = store.last_run(run["jobid"], run["dataid"])
            if last and last["runid"] == run["runid"]:
                found.add(run["runid"])
    return found


def where(store: Store, run: Row | None) -> str:
    """Where a run lives, for a person: ``pid 4242 on host edge1``; on this host, the
    processes that really live when its RunJob has ended (the job, a helper it left);
    on a shared store, when its holder last renewed its lease."""
    if not run:
        return "no run recorded"
    place = f"pid {run['pid']} on host {run['host']}"
    if run["host"] == host_name() and not _exists(run["pid"]):
        pids = sorted(processes.pids_carrying(run_token(store, run)))
        if pids:
            listed = ", ".join(map(str, pids[:5])) + (", ..." if len(pids) > 5 else "")
            word = "pid" if len(pids) == 1 else "pids"
            place = (
                f"{word} {listed} on host {run['host']}; its RunJob (pid {run['pid']}) has ended"
            )
    if run.get("seen"):
        place += f", last seen {seen_ago(run['seen'])} s ago"
    return place


def seen_ago(seen: object) -> int:
    """Seconds since a heartbeat (a time with its zone, or its ISO text)."""
    from datetime import datetime

    moment = seen if isinstance(seen, datetime) else datetime.fromisoformat(str(seen))
    return max(0, round((datetime.now(moment.tzinfo) - moment).total_seconds()))


def _exists(pid: object) -> bool:
    try:
        os.kill(int(pid), 0)  # type: ignore[call-overload]
    except (OSError, TypeError, ValueError):
        return False
    return True
