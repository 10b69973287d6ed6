"""Operator actions and views, as ``utility`` offers them: :func:`status`,
:func:`explain`, :func:`resubmit`, :func:`hold`, :func:`release`, :func:`endjob`,
:func:`recover`, and a project's :func:`plan` and :func:`apply`.

Each opens the store, does its work in one transaction where it changes anything, and
returns what it found or changed. An action is recorded in the store's audit (``utility
actions``) for ``by`` (default: the OS user running this process). ``ops`` is imported
inside each function: RunJob imports this module, never the operator commands."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .. import crypto
from ..store import locate, open_store

if TYPE_CHECKING:
    from ..ops.audit import Actor
    from ..ops.explain import Explanation
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
    from ..run import lifecycle

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
