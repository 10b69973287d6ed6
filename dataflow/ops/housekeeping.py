"""``utility purge``: delete old run history and its log files.

Never touches datastatus, keeps each chunk's last run (the next attempt's number
follows it, and fences what that attempt writes into a database; a FAILED chunk's retry
count decides whether it reruns by itself), and keeps every run a process of which still
lives (its token is how the run is known to be live).
"""

from __future__ import annotations

import contextlib
import math
import os
from datetime import timedelta

from ..errors import DataflowError, UsageError
from ..run.claim import lifecycle, liveness
from ..run.drain.events import Event
from ..run.listeners import alerts
from ..run.process import logs
from ..store import Row, Store

MAX_DAYS = 36_500  # a century: more is a typo, and past ~2.7 million days dates overflow


def purge(
    store: Store, jobid: str | None = None, days_old: float | None = None, dry_run: bool = False
) -> list[Row]:
    """Delete (or with ``dry_run`` list) history rows and their logs (in the store's log
    folder only: see :func:`dataflow.run.process.logs.own`); returns the runs."""
    before = None
    if days_old is not None:
        if not (math.isfinite(days_old) and 0 <= days_old <= MAX_DAYS):
            raise UsageError(
                f"--days-old must be a number of days from 0 to {MAX_DAYS}, not {days_old}"
            )
        moment = store.clock() - timedelta(days=days_old)  # the server's, for a shared store
        before = moment.isoformat(sep=" ", timespec="microseconds")  # as the history's times
    with store.transaction():
        runs = store.purgeable_runs(jobid, before)  # a shared store keeps runs with a lease
        store.unhurried()  # many runs take a while to look at
        live = liveness.living(store, runs)  # a process of the run still lives here
        runs = [run for run in runs if run["runid"] not in live]
        if not dry_run:
            store.delete_runs([run["runid"] for run in runs])
    if not dry_run:  # the rows are gone for good: now their files, in the log folder only
        for run in runs:
            path = logs.own(store.files, run)
            if path is not None:  # a row naming a folder there (a store writer's) is skipped
                with contextlib.suppress(FileNotFoundError, IsADirectoryError, PermissionError):
                    os.unlink(path)
    return runs


def alert_recovered(store: Store, chunks: list[tuple[str, str]]) -> list[str]:
    """Alert of chunks whose run was found dead outside a drain (``utility recover``):
    one message per job; returns the warnings of those not sent."""
    problems = []
    for jobid in dict.fromkeys(jobid for jobid, _ in chunks):
        try:
            pager = alerts.Pager(store, lifecycle.load_job(store, jobid))
        except DataflowError:  # no longer registered: nobody to tell
            continue
        for job, dataid in chunks:
            if job == jobid:
                pager.see(Event("abandoned", dataid))
        if problem := pager.send():
            problems.append(problem)
    return problems
