"""Is a chunk's run alive? Its chunk lock says so, or a process carrying its token.

The lock is held by every process that inherited its descriptor (the job and its
children); the token (:mod:`.processes`) is carried by every process that inherited
the environment, which covers a helper that closed its descriptors and left.
"""

from __future__ import annotations

from ..store import Row, Store
from . import locks, processes


def run_token(store: Store, runid: int) -> str:
    """``DATAFLOW_RUN`` for one run: the store's identity and the run's history row."""
    return processes.token(store.identity, runid)


def is_live(store: Store, jobid: str, dataid: str) -> bool:
    """Does any process of the chunk's last run live (its lock, or its token)?"""
    if locks.is_held(store.lockfile, jobid, dataid):
        return True
    last = store.last_run(jobid, dataid)
    return bool(last) and bool(processes.carrying({run_token(store, last["runid"])}))


def live_runs(store: Store, chunks: list[tuple[str, str]]) -> set[tuple[str, str]]:
    """Those of ``chunks`` (jobid, dataid) whose last run has a live process; one look at
    the processes for all the chunks whose lock is free."""
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
