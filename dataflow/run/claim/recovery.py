"""Recovering dead runs: a RUNNING chunk none of whose run's processes lives is marked
FAILED (its run abandoned), in the caller's write transaction; what its run staged is put
back as it was and, once that transaction is committed, deleted (by a claim, while its
jobs start)."""

from __future__ import annotations

import threading
from collections import namedtuple

from ... import layout
from ...store import Store
from . import liveness
from .lifecycle import ABANDONED, FAILED, load_job


class Recovery(
    namedtuple(
        "Recovery",
        [
            "dead",  # list[tuple[str, str]]
            "staged",  # list[tuple[list[str], str, str]]
        ],
    )
):
    """The chunks a recovery marked FAILED, and what their runs staged: (folders, dataid,
    token) each, deleted by :func:`discard` once the recovery is committed."""

    __slots__ = ()


def recover(store: Store, jobid: str | None = None) -> Recovery:
    """Mark FAILED every RUNNING chunk none of whose run's processes lives.

    Runs inside the caller's write transaction: a claim takes its chunk lock
    before committing, so a committed RUNNING row with a free lock and no process
    carrying its token is dead. On a shared store each chunk is judged in its turn
    (nobody claims or finishes it meanwhile); one whose turn is taken is left for later.
    """
    seen = store.running(jobid)
    turned = {chunk for chunk in seen if store.chunk_turn(chunk[1])}
    # read again now that they are ours: a run may have finished since the first look,
    # and released its lock (it would look dead, and its READY be overwritten)
    running = [chunk for chunk in store.running(jobid) if chunk in turned] if turned else []
    live = liveness.live_runs(store, running, revoke=True) if running else set()
    dead = [chunk for chunk in running if chunk not in live]
    staged = []
    for job, dataid in dead:
        last = store.last_run(job, dataid)
        store.finish(job, dataid, FAILED)
        store.abandon_runs(job, dataid, ABANDONED)
        if last:  # nothing of the run lives: what it staged is never published
            tables, token = _staged_tables(store, job), liveness.run_token(store, last)
            layout.restore(tables, dataid, token)  # a finish that moved it did not commit
            layout.set_aside(tables, dataid, token)  # renames here, the deletion after
            staged.append((tables, dataid, token))
    return Recovery(dead, staged)


def discard(recovery: Recovery) -> None:
    """Delete what the recovered runs staged, once the recovery is committed: a large
    output takes a while, and no transaction waits for it (on SQLite every writer would)."""
    for tables, dataid, token in recovery.staged:
        layout.discard(tables, dataid, token)


_deleting: list[threading.Thread] = []  # deletions started by discard_meanwhile


def discard_meanwhile(recovery: Recovery) -> None:
    """:func:`discard` in a thread of its own: a claim's jobs start meanwhile, whatever
    a dead Spark run left to delete. :func:`wait_discarded` waits for it (with no thread
    to be had, it is deleted now)."""
    if not recovery.staged:
        return
    thread = threading.Thread(target=discard, args=(recovery,), name="discard", daemon=True)
    try:
        thread.start()
    except RuntimeError:  # no thread left (a limit of tasks)
        discard(recovery)
        return
    _deleting.append(thread)


def wait_discarded() -> None:
    """Until every deletion :func:`discard_meanwhile` started has ended."""
    while _deleting:
        _deleting.pop().join()


def _staged_tables(store: Store, jobid: str) -> list[str]:
    """The local folders where the job's runs stage their file outputs (layout.py)."""
    return layout.dataset_tables(store.datasets(load_job(store, jobid).outputs).values())
