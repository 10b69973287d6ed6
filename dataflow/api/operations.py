"""Operator actions and views, as ``utility`` offers them: :func:`status`,
:func:`explain`, :func:`lineage`, :func:`check`, :func:`resubmit`, :func:`hold`,
:func:`release`, :func:`endjob`, :func:`recover`, :func:`mark_ready`, :func:`purge`, and
a project's :func:`plan` and :func:`apply`.

Each opens the store, does its work in one transaction where it changes anything, and
returns what it found or changed. An action is recorded in the store's audit (``utility
actions``) for ``by`` (default: the OS user running this process). ``ops`` is imported
inside each function: RunJob imports this module, never the operator commands."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from .. import crypto
from ..errors import UsageError
from ..store import locate, open_store

if TYPE_CHECKING:
    from datetime import datetime

    from ..ops.audit import Actor
    from ..ops.explain import Explanation
    from ..ops.freshness import Late
    from ..ops.lineage import Downstream
    from ..ops.plans import Change as PlanChange
    from ..ops.reruns import Change, Recovered
    from ..store import Store


def _store(db: str | None, readonly: bool = False) -> Store:
    return open_store(locate(db), readonly)


def _actor(by: str | Actor | None) -> Actor:
    from ..ops import audit

    if by is None:
        return audit.operator()
    return audit.Actor(by) if isinstance(by, str) else by


def status(jobid: str | None = None, *, db: str | None = None) -> list[dict[str, Any]]:
    """Per job (or ``jobid``'s only): its chunks by status, waiting, next, live runs and
    last failure, one dict a job (``utility status``)."""
    from ..ops import status as views

    with _store(db, readonly=True) as store:
        return views.job_status(store, jobid)


def explain(jobid: str, dataid: str | None = None, *, db: str | None = None) -> Explanation:
    """Will the job's next (or ``dataid``'s) chunk run, and why not (``utility explain``):
    ``summary``, ``answers`` by question, ``verdict``."""
    from ..ops import explain as explaining

    with _store(db, readonly=True) as store:
        return explaining.explain(store, jobid, dataid)


class Lineage(NamedTuple):
    """Who produced a dataset's chunk and who consumes it now, and the chain downstream."""

    producers: list[dict[str, Any]]  # the chunk's OUT rows (jobid, status, modified...)
    consumers: list[dict[str, Any]]  # its IN rows: the jobs consuming it now
    downstream: dict[str, Downstream]  # by producer: ``steps`` (depth, job, outs), ``cycles``
    runs: dict[str, dict[str, Any] | None]  # by producer: its last run of the chunk


def lineage(datasetid: str, dataid: str, *, db: str | None = None) -> Lineage:
    """``utility lineage DATASET DATAID``; :class:`~dataflow.errors.UsageError` when the
    dataset has no such chunk."""
    from ..ops import lineage as lines

    with _store(db, readonly=True) as store:
        rows = store.chunk_of_dataset(datasetid, dataid)
        if not rows:
            raise UsageError(f"dataset '{datasetid}' has no chunk '{dataid}'")
        producers = [r for r in rows if r["locktype"] == "OUT"]
        jobs = [p["jobid"] for p in producers]
        return Lineage(
            producers,
            [r for r in rows if r["locktype"] == "IN"],
            {job: lines.downstream(store, job, dataid) for job in jobs},
            {job: store.last_run(job, dataid) for job in jobs},
        )


class Checked(NamedTuple):
    """What :func:`check` found: the late chunks, and the alerts it could not send."""

    late: list[Late]  # each: jobid, dataid, due, what blocks it...
    problems: list[str]


def check(
    at: datetime | None = None, *, db: str | None = None, alert: bool | None = None
) -> Checked:
    """``utility check``: the chunks late on their job's ``ready_by`` promise at ``at``
    (default: the store's now), each alerted once. ``alert``: None alerts unless ``at``
    is given (a what-if tells no one and records nothing)."""
    from ..ops import freshness

    if at is not None and at.tzinfo is None:
        at = at.replace(tzinfo=freshness.system_zone())
    with _store(db) as store:
        late = freshness.late(store, at)
        telling = at is None if alert is None else alert
        return Checked(late, freshness.alert(store, late) if telling else [])


def resubmit(
    jobid: str,
    dataid: str | None = None,
    *,
    db: str | None = None,
    cascade: bool = False,
    dry_run: bool = False,
    failed: bool = False,
    match: str | None = None,
    first: str | None = None,
    last: str | None = None,
    by: str | Actor | None = None,
) -> list[Change]:
    """Set chunks to RESUBMIT: ``dataid``, every ``failed`` one, those matching ``match``
    (a glob) or from ``first`` to ``last`` (natural order; a clock's job gets the
    periods it never ran too); with ``cascade``, their downstream chunks as well. One
    change per chunk looked at (``after`` is ``unchanged`` where nothing changed);
    ``dry_run``: what would change, nothing changed."""
    from ..ops import drops, reruns
    from ..run.claim import lifecycle

    with _store(db) as store:
        job = lifecycle.load_job(store, jobid)
        missing = []
        if job.clock and first and last and dataid is None:
            missing = drops.missing_periods(store, job, first, last)
        dataids = reruns.select_dataids(store, jobid, dataid, failed, match, first, last)
        return reruns.resubmit(store, jobid, dataids, cascade, dry_run, missing, _actor(by))


def hold(
    jobid: str, dataid: str, *, db: str | None = None, by: str | Actor | None = None
) -> Change:
    """Freeze a chunk: nobody runs or consumes it until :func:`release`."""
    from ..ops import reruns

    with _store(db) as store:
        return reruns.hold(store, jobid, dataid, by=_actor(by))


def release(
    jobid: str, dataid: str, *, db: str | None = None, by: str | Actor | None = None
) -> Change:
    """Unfreeze a held chunk, restoring its statuses."""
    from ..ops import reruns

    with _store(db) as store:
        return reruns.release(store, jobid, dataid, by=_actor(by))


def endjob(
    jobid: str,
    dataid: str,
    status: str,
    *,
    db: str | None = None,
    force: bool = False,
    by: str | Actor | None = None,
) -> tuple[int, int]:
    """Set a chunk's end status by hand (READY, FAILED, RESUBMIT or HOLD; ``force``: even
    while a live run holds it): the OUT rows updated and the IN locks released."""
    from ..ops import reruns

    with _store(db) as store:
        return reruns.end(store, jobid, dataid, status.upper(), force, _actor(by))


def recover(
    jobid: str | None = None, *, db: str | None = None, by: str | Actor | None = None
) -> Recovered:
    """Mark FAILED every RUNNING chunk (of ``jobid``) whose run has died, delete what
    those runs staged, and alert their jobs' alerts: ``changes``, where each run was
    (``places``) and the alerts that could not be sent (``problems``)."""
    from ..ops import reruns

    with _store(db) as store:
        return reruns.recover(store, jobid, _actor(by))


def mark_ready(
    datasetid: str, dataids: list[str], *, db: str | None = None, producer: str | None = None
) -> tuple[int, int]:
    """``utility ready``: record that ``producer`` (default: the dataset's registered
    producer, else ``external``) made these chunks READY; (marked, already READY)."""
    from ..ops import drops

    with _store(db) as store:
        return drops.mark_ready(store, datasetid, dataids, producer)


def purge(
    jobid: str | None = None,
    *,
    db: str | None = None,
    days_old: float | None = None,
    dry_run: bool = False,
) -> list[dict[str, Any]]:
    """``utility purge``: delete run history and its logs (of ``jobid``; runs started at
    least ``days_old`` days ago), never the statuses that gate work, nor a run whose
    process lives; the runs purged (``dry_run``: that would be)."""
    from ..ops import housekeeping
    from ..run.claim import lifecycle

    with _store(db) as store:
        if jobid:
            lifecycle.load_job(store, jobid)
        return housekeeping.purge(store, jobid, days_old, dry_run)


def plan(
    folder: str, *, db: str | None = None, prune: bool = False, passkey: str | None = None
) -> list[PlanChange]:
    """What :func:`apply` would change in the store for the project in ``folder`` (its
    ``dataflow.toml``); nothing changes."""
    from ..ops import plans, project

    found = project.read(folder)
    with _store(db) as store:
        return plans.plan(store, found, _passkey(passkey), prune)


def apply(
    folder: str, *, db: str | None = None, prune: bool = False, passkey: str | None = None
) -> list[PlanChange]:
    """Make the store's datasets and jobs match the project in ``folder``, in one
    transaction (``prune``: remove the ones it does not declare); the changes made.
    ``passkey`` (default: ``PASSKEY``) encrypts the passwords the project names."""
    from ..ops import plans, project

    found = project.read(folder)
    with _store(db) as store:
        return plans.apply(store, found, _passkey(passkey), prune)


def _passkey(given: str | None) -> str | None:
    return crypto.read_passkey() if given is None else given
