"""Is a chunk's run alive? Its chunk lock says so, or a process carrying its token.

The lock is held by every process that inherited its descriptor (the job and its
children); the token (:mod:`.processes`) is carried by every process that inherited
the environment, which covers a helper that closed its descriptors and left. On a
shared store, whose runs may live on other hosts, a run's keeper turns both into the
store's run lock (:mod:`.keeper`), which every host can see.
"""

from __future__ import annotations

import os

from ..store import Row, Store
from . import locks, processes

HOST_ENV = "DATAFLOW_HOST"


def host_name() -> str:
    """This host's name in the run history: ``$DATAFLOW_HOST``, else the node name."""
    return os.environ.get(HOST_ENV) or os.uname().nodename


def take(store: Store, lock: locks.ChunkLock, jobid: str, dataid: str) -> bool:
    """Lock a chunk for a run that is about to be claimed: its local lock, and on a
    shared store its run lock too (held by this RunJob's keeper). Never waits."""
    if not lock.try_acquire():
        return False
    if not store.shared:
        return True
    from .keeper import keeper_for

    try:
        if keeper_for(store).hold(jobid, dataid):
            return True
    except BaseException:
        lock.close()
        raise
    lock.close()
    return False


def started(store: Store, jobid: str, dataid: str, token: str, group: int) -> None:
    """A claimed chunk's job now runs as process group ``group``."""
    if store.shared:
        from .keeper import keeper_for

        keeper_for(store).watch(jobid, dataid, token, group)


def run_token(store: Store, runid: int) -> str:
    """``DATAFLOW_RUN`` for one run: the store's identity and the run's history row."""
    return processes.token(store.identity, runid)


def is_live(store: Store, jobid: str, dataid: str) -> bool:
    """Does any process of the chunk's last run live (its lock, or its token)?"""
    return bool(live_runs(store, [(jobid, dataid)]))


def live_runs(store: Store, chunks: list[tuple[str, str]]) -> set[tuple[str, str]]:
    """Those of ``chunks`` (jobid, dataid) whose last run has a live process; one look at
    the processes for all the chunks whose lock is free."""
    if store.shared:
        return store.run_locks_held(chunks)
    live = {chunk for chunk in chunks if locks.is_held(store.lockfile, *chunk)}
    tokens = {}
    for chunk in set(chunks) - live:
        last = store.last_run(*chunk)
        if last:
            tokens[run_token(store, last["runid"])] = chunk
    return live | {tokens[t] for t in processes.carrying(set(tokens))}


def where(run: Row | None) -> str:
    """Where a run lives, for a person: ``pid 4242 on host edge1``."""
    if not run:
        return "no run recorded"
    return f"pid {run['pid']} on host {run['host']}"
