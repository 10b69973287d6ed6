"""Operator actions on chunks: resubmit (with its downstream), hold, release, recover
and end by hand, for the CLI and the live board alike.

Each action is one transaction: all of it happens, with its rows in the audit (``by``:
who acts, see :mod:`.audit`), or none of it. ``dry_run``: what would change, nothing
changed nor recorded.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from ..dataids import CLOCKS, check_name, clock_of, natural_key
from ..errors import ChunkBusy, DataflowError, UnknownChunk, UsageError
from ..run.claim import lifecycle, liveness, recovery
from ..run.claim.lifecycle import ABANDONED, FAILED, HOLD, RESUBMIT, RUNNING
from ..store import Store
from .audit import Actor
from .housekeeping import alert_recovered
from .lineage import downstream


@dataclass(frozen=True)
class Change:
    jobid: str
    dataid: str
    before: str  # the statuses the chunk had, e.g. "READY"
    after: str  # what it has now, or "unchanged"
    note: str = ""


@dataclass(frozen=True)
class Recovered:
    """What :func:`recover` did: its changes, where each chunk's run was (``host h pid
    p``, or "" without a run), and the alerts it could not send."""

    changes: list[Change]
    places: list[str]
    problems: list[str]


class _Rollback(Exception):
    pass


@contextmanager
def _changing(store: Store, dry_run: bool) -> Iterator[None]:
    """One write transaction, rolled back at its end if ``dry_run``."""
    try:
        with store.transaction():
            yield
            if dry_run:
                raise _Rollback
    except _Rollback:
        pass


def select_dataids(
    store: Store,
    jobid: str,
    dataid: str | None,
    failed: bool = False,
    match: str | None = None,
    first: str | None = None,
    last: str | None = None,
) -> list[str]:
    """The job's chunks an operator named: one dataid, or by status, pattern and range."""
    if dataid is not None:
        check_name("dataid", dataid)
        return [dataid]
    if not (failed or match or first or last):
        raise UsageError("name a DATAID, or select chunks with --failed, --match or --from/--to")
    if first is not None and last is not None and natural_key(first) > natural_key(last):
        raise UsageError(f"--from {first} comes after --to {last}")  # as ready's range
    chosen = store.dataids_of_job(jobid, (FAILED,) if failed else ())
    if match:
        _check_pattern(match)
        chosen = [d for d in chosen if fnmatch.fnmatchcase(d, match)]
    if first is not None:
        chosen = [d for d in chosen if natural_key(d) >= natural_key(first)]
    if last is not None:
        chosen = [d for d in chosen if natural_key(d) <= natural_key(last)]
    return sorted(chosen, key=natural_key)


def _check_pattern(match: str) -> None:
    """Refuse a ``--match`` pattern whose ``[`` is not closed: fnmatch would take it for a
    literal ``[`` and match nothing, and the operator would read "0 chunks changed"."""
    i = 0
    while i < len(match):
        if match[i] == "[":
            j = i + 1 + (match[i + 1 : i + 2] in ("!", "^"))
            j += match[j : j + 1] == "]"  # a "]" first in a set is one of its characters
            end = match.find("]", j)
            if end < 0:
                raise UsageError(
                    f"--match '{match}': a '[' is not closed by ']' (a literal '[' is '[[]')"
                )
            i = end + 1
        else:
            i += 1


def _joined(outs: list[tuple[str, str]]) -> str:
    """The distinct statuses of a chunk's OUT rows, e.g. "READY" or "FAILED,READY"."""
    return ",".join(sorted({status for _, status in outs}))


def resubmit(
    store: Store,
    jobid: str,
    dataids: list[str],
    cascade: bool = False,
    dry_run: bool = False,
    backfill: Sequence[str] = (),
    by: Actor | None = None,
) -> list[Change]:
    """Set chunks to RESUBMIT and, with ``cascade``, every downstream chunk built from them;
    ``backfill``: periods a job run by a clock never ran, created as RESUBMIT."""
    job = lifecycle.load_job(store, jobid)
    changes: list[Change] = []
    with _changing(store, dry_run):
        for day in backfill:
            store.put_out_status(jobid, day, job.outputs, RESUBMIT)
            unit = CLOCKS[clock_of(day) or "today"][1]
            changes.append(Change(jobid, day, "none", RESUBMIT, f"backfill of a missed {unit}"))
        for dataid in dataids:
            before = _joined(store.out_status(jobid, dataid))
            if not before:
                raise UnknownChunk(jobid, dataid)
            if HOLD in before:
                raise ChunkBusy(jobid, dataid, before)
            lifecycle.refuse_live(store, jobid, dataid)  # names what lives
            if RUNNING in before:  # its run died: nothing will end it but recovery
                store.finish(jobid, dataid, RESUBMIT)
                store.abandon_runs(jobid, dataid, ABANDONED)
                changes.append(Change(jobid, dataid, before, RESUBMIT, "its run had died"))
            else:
                store.set_out_status(jobid, dataid, RESUBMIT)
                changes.append(Change(jobid, dataid, before, RESUBMIT))
            if cascade:
                changes += _cascade(store, jobid, dataid)
        if by and not dry_run:
            by.record_changes(store, "resubmit --cascade" if cascade else "resubmit", changes)
    return changes


def _cascade(store: Store, jobid: str, dataid: str) -> list[Change]:
    changes = []
    for _, consumer, outs in downstream(store, jobid, dataid).steps:
        if not outs:
            continue  # it never produced this chunk: nothing to redo
        before = _joined(outs)
        if RUNNING in before and liveness.is_live(store, consumer, dataid):
            # its output will be stale: it ends RESUBMIT instead of READY (and its input
            # is not rewritten under it: a chunk with a live reader is not claimed)
            store.request_rerun(consumer, dataid, f"resubmit --cascade of {jobid} {dataid}")
            changes.append(Change(consumer, dataid, before, "RESUBMIT when it ends", "running now"))
            continue
        if RUNNING in before:  # its run died: nothing will end it but recovery
            store.finish(consumer, dataid, RESUBMIT)
            store.abandon_runs(consumer, dataid, ABANDONED)
            changes.append(Change(consumer, dataid, before, RESUBMIT, "its run had died"))
            continue
        if HOLD in before:
            changes.append(Change(consumer, dataid, before, "unchanged", "on hold"))
            continue
        store.set_out_status(consumer, dataid, RESUBMIT)
        changes.append(Change(consumer, dataid, before, RESUBMIT, f"downstream of {jobid}"))
    return changes


def hold(
    store: Store, jobid: str, dataid: str, dry_run: bool = False, by: Actor | None = None
) -> Change:
    """Freeze a chunk (existing or future): nobody runs or consumes it until released."""
    job = lifecycle.load_job(store, jobid)
    with _changing(store, dry_run):
        if store.held(jobid, dataid):
            raise DataflowError(f"{jobid} {dataid} is already on hold")
        current = dict(store.out_status(jobid, dataid))
        if RUNNING in current.values():
            raise ChunkBusy(jobid, dataid, RUNNING)
        store.hold_chunk(jobid, dataid, [(d, current.get(d)) for d in job.outputs])
        change = Change(jobid, dataid, ",".join(sorted(set(current.values()))) or "none", HOLD)
        if by and not dry_run:
            by.record_changes(store, "hold", [change])
    return change


def release(
    store: Store, jobid: str, dataid: str, dry_run: bool = False, by: Actor | None = None
) -> Change:
    """Unfreeze a chunk: its outputs get back the statuses they had."""
    with _changing(store, dry_run):
        restored = store.release_chunk(jobid, dataid)
        if not restored:
            lifecycle.known(store, jobid)
            raise DataflowError(f"{jobid} {dataid} is not on hold")
        after = ",".join(sorted({status or "none" for _, status in restored}))
        change = Change(jobid, dataid, HOLD, after)
        if by and not dry_run:
            by.record_changes(store, "release", [change])
    return change


def end(
    store: Store, jobid: str, dataid: str, status: str, force: bool = False,
    by: Actor | None = None,
) -> tuple[int, int]:  # fmt: skip
    """``utility endjob``: :func:`lifecycle.end_chunk`, recorded for ``by``. The rows
    updated and the IN locks released."""
    detail = f"set to {status.upper()}" + (" (--force)" if force else "")

    def record() -> None:
        if by:
            by.record(store, "end", jobid, dataid, detail)

    return lifecycle.end_chunk(store, jobid, dataid, status, force=force, then=record)


def dead_runs(store: Store, jobid: str | None = None) -> list[Change]:
    """What :func:`recover` would change now: the RUNNING chunks none of whose run's
    processes lives (read only; recover judges them again in its transaction)."""
    if jobid:
        lifecycle.known(store, jobid)
    running = store.running(jobid)
    live = liveness.live_runs(store, running) if running else set()
    return [Change(j, d, RUNNING, FAILED, "its run died") for j, d in running if (j, d) not in live]


def recover(store: Store, jobid: str | None = None, by: Actor | None = None) -> Recovered:
    """``utility recover``: mark FAILED every RUNNING chunk (of ``jobid``) whose run has
    died, delete what those runs staged, and alert their jobs' alerts."""
    if jobid:
        lifecycle.known(store, jobid)  # an unknown job is an error, not "0"
    with store.transaction():
        found = recovery.recover(store, jobid)
        changes = [Change(j, d, RUNNING, FAILED, "its run died; abandoned") for j, d in found.dead]
        if by:
            by.record_changes(store, "recover", changes)
    recovery.discard(found)  # after the commit: deleting a large output takes a while
    places = []
    for chunk in found.dead:
        last = store.last_run(*chunk)
        places.append(liveness.where(store, last) if last else "")
    problems = alert_recovered(store, found.dead)  # after the commit
    return Recovered(changes, places, problems)
