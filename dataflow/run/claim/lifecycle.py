"""The rules of a chunk's life: which chunk a job may claim, and how a run ends
(claiming itself is in :mod:`.claims`).

Every change here is one short ``BEGIN IMMEDIATE`` transaction on the store; no
transaction is held while a job runs.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Sequence
from datetime import datetime

from ...dataids import CLOCKS
from ...errors import (
    BadStatus,
    ChunkBusy,
    ChunkLive,
    JobConfigError,
    RunFenced,
    UnknownChunk,
    UnknownJob,
)
from ...store import ChunkRow, JobItem, Row, Store
from ...store.offers import READY, RERUNNABLE
from . import liveness
from .settings import LONGEST_DELAY, SETTINGS, Settings, settings_of

# READY and RERUNNABLE are facts of the claim rule that the stores' triggers share
# (store/offers.py): the triggers offer a chunk, :func:`claimable` judges it.
RESUBMIT, FAILED = RERUNNABLE
RUNNING, HOLD = "RUNNING", "HOLD"
END_STATUSES = (READY, FAILED, RESUBMIT, HOLD)
ABANDONED = "abandoned"  # the reason recorded for a run that died without ending


class Job(namedtuple("Job", "jobid inputs outputs clock settings extras")):
    """A job as registered in table ``job``.

    inputs: IN datasets, without the clock datasets (``today``, ``this_hour``,
    ``this_week``, ``this_month``: :data:`dataflow.dataids.CLOCKS`); clock: the one of
    them it has as IN dataset ("" for none); extras: other rows, (itemtype, itemvalue)
    environment items.
    """

    __slots__ = ()

    def __new__(cls, jobid, inputs, outputs, clock="", settings=None, extras=()):
        return super().__new__(cls, jobid, inputs, outputs, clock, settings or Settings(), extras)


def known(store: Store, jobid: str) -> None:
    """Refuse a job name the store has never heard of (not registered, no chunk, no run),
    with a guess among the registered names; an unregistered job's history still counts."""
    if store.job_items(jobid) or store.dataids_of_job(jobid) or store.history(jobid, None, 1):
        return
    raise UnknownJob(jobid, store.job_ids())


def load_job(store: Store, jobid: str, items: list[JobItem] | None = None) -> Job:
    """Read a job's registration (its rows ``items``, if read already); errors if it
    cannot run at all."""
    items = store.job_items(jobid) if items is None else items
    if not items:
        raise UnknownJob(jobid, store.job_ids())
    inputs, outputs, settings, extras, clocks = [], [], {}, [], []
    for item in items:
        if item.itemtype in ("IN", "OUT"):
            if not item.datasetid:
                raise JobConfigError(jobid, f"an {item.itemtype} row has no datasetid")
            if item.itemtype == "OUT":
                outputs.append(item.datasetid)
            elif item.datasetid in CLOCKS:
                clocks.append(item.datasetid)
            else:
                inputs.append(item.datasetid)
        elif item.itemtype in SETTINGS:
            settings[item.itemtype] = (item.itemvalue or "").strip()
        else:
            extras.append((item.itemtype, item.itemvalue or ""))
    if not outputs:
        raise JobConfigError(jobid, "it has no OUT dataset; add a job row with itemtype 'OUT'")
    if not inputs and not clocks:
        raise JobConfigError(
            jobid, "it has no IN dataset; add one, or IN dataset 'today' for a daily job"
        )
    if len(set(clocks)) > 1:
        raise JobConfigError(jobid, f"it has two clocks as IN datasets: {' and '.join(clocks)}")
    clock = clocks[0] if clocks else ""
    return Job(
        jobid, tuple(inputs), tuple(outputs), clock, settings_of(jobid, settings), tuple(extras)
    )


COUNT_END = 2**31 - 1  # PostgreSQL's integer: the next attempt must fit


def counted(last: dict) -> bool:
    """Are a run's attempt and retry counts a claim can add one to? Any SQLite client may
    write text or bytes into their columns, and any client a count at the limit."""
    counts = (last["attempt"], last["retry"])
    return all(type(n) is int and 0 <= n < COUNT_END for n in counts)


def claimable(
    job: Job, rows: list[ChunkRow], ready_inputs: int, last_retry: int | None = None
) -> bool:
    """May ``job`` start the chunk whose own rows are ``rows``?

    Every input READY; the job not consuming it already; its outputs absent,
    RESUBMIT, or FAILED with automatic retries left (``last_retry``: the retry
    number of the chunk's last run, None if it never ran).
    """
    if ready_inputs < len(job.inputs):
        return False
    outs = [row.status for row in rows if row.locktype == "OUT"]
    if any(row.locktype == "IN" for row in rows):
        return False
    if any(status not in RERUNNABLE for status in outs):
        return False
    if not outs or RESUBMIT in outs:
        return True
    return (last_retry or 0) < job.settings.retries


def retry_wait(job: Job, rows: list[ChunkRow], last: Row | None, now: datetime) -> float:
    """Seconds before an automatic retry of a FAILED chunk (``rows``: the job's rows at it)
    may be claimed: ``retry_delay`` after its last run (``last``) ended, by the store's
    clock ``now``; 0 when it may be claimed now, or when the chunk is not waiting for an
    automatic retry (a RESUBMIT runs at once)."""
    seconds, factor = job.settings.retry_delay
    outs = [row.status for row in rows if row.locktype == "OUT"]
    if not seconds or not last or not last.get("ended") or not outs or RESUBMIT in outs:
        return 0.0
    if any(status != FAILED for status in outs):
        return 0.0
    try:
        ended = datetime.fromisoformat(str(last["ended"]))
    except ValueError:
        return 0.0  # a time no run of ours wrote: no wait rather than a chunk stuck
    if ended.tzinfo is None:  # written without its offset: this host's local time
        ended = ended.astimezone()
    try:  # the retry about to start is the last run's retry number + 1
        delay = min(seconds * factor ** int(last.get("retry") or 0), LONGEST_DELAY)
    except OverflowError:
        delay = LONGEST_DELAY
    return max(0.0, delay - (now - ended).total_seconds())


def finish(
    store: Store,
    jobid: str,
    dataid: str,
    status: str,
    runid: int,
    publish: Callable[[], object] | None = None,
    **outcome: object,
) -> tuple[int, int, str]:
    """End a run: OUT rows to ``status``, IN rows deleted, its history row closed
    with ``outcome`` (exitcode, signal, duration, reason). A run that a cascade asked
    to rerun while it ran ends RESUBMIT instead of READY: its history row stays READY
    (the run succeeded) and its reason says why the chunk is RESUBMIT. A READY run's
    ``publish()`` moves its output into place inside the transaction, once the run is
    known to own the chunk still (an error there rolls the finish back). Returns both
    counts and the chunk's status."""
    with store.transaction(pipeline=True):
        store.chunk_turn(dataid, wait=True)
        final = _end_run(store, jobid, dataid, status, runid, outcome)
        if publish is not None and status == READY:
            publish()
        return (*store.finish(jobid, dataid, final), final)


def finish_many(
    store: Store, jobid: str, ends: Sequence[tuple[str, str, int, dict]]
) -> list[tuple[int, int, str]] | None:
    """:func:`finish` of several runs (dataid, status, runid, outcome each) of a job
    without staged output, in one transaction: one commit for them all. None, with
    nothing written, when one of them is fenced: each is then finished on its own."""
    # their rows of run locked in the order of runid, as a keeper's renewal locks them
    order = sorted(range(len(ends)), key=lambda i: ends[i][2])
    done: dict[int, tuple[int, int, str]] = {}
    try:
        with store.transaction(pipeline=True):
            store.chunk_turns([dataid for dataid, *_ in ends])
            for i in order:
                dataid, status, runid, outcome = ends[i]
                final = _end_run(store, jobid, dataid, status, runid, outcome)
                done[i] = (*store.finish(jobid, dataid, final), final)
    except RunFenced:
        return None
    return [done[i] for i in range(len(ends))]


def _end_run(store: Store, jobid: str, dataid: str, status: str, runid: int, outcome: dict) -> str:
    """Close the run's history row; the chunk's status now (RESUBMIT if a rerun was asked
    of a READY run)."""
    # fenced by the attempt: a run recovered as dead (its host cut off) or ended by hand
    # meanwhile must not overwrite what happened since
    outcome = dict(outcome)  # (a finish tried again is given the same)
    log = outcome.pop("log", None)  # its log's end, as the store keeps it
    ended, rerun = store.end_run(runid, status, **outcome)
    if not ended:
        raise RunFenced(jobid, dataid, status)
    if log is not None:
        store.put_log(runid, *log, True)
    if rerun and status == READY:
        store.note_runs([runid], f"its chunk set to RESUBMIT: {rerun} asked a rerun")
        return RESUBMIT
    return status


def refuse_live(store: Store, jobid: str, dataid: str) -> None:
    """A chunk a process of whose last run lives may not be changed by hand: the run's
    own finish would overwrite it, a consumer could read an output that then fails, and
    a rerun would start beside a helper the run left."""
    if liveness.is_live(store, jobid, dataid):
        raise ChunkLive(jobid, dataid, liveness.where(store, store.last_run(jobid, dataid)))


def end_chunk(
    store: Store,
    jobid: str,
    dataid: str,
    status: str,
    force: bool = False,
    then: Callable[[], None] | None = None,
) -> tuple[int, int]:
    """``utility endjob``: set a chunk's end status by hand (a live run's only with ``force``);
    ``then``: called in its transaction once the chunk is ended (its audit row)."""
    from ...dataids import check_name

    check_name("dataid", dataid)
    status = status.upper()
    if status not in END_STATUSES:
        raise BadStatus(status, END_STATUSES)
    with store.transaction():
        store.chunk_turn(dataid, wait=True)
        if not force:
            refuse_live(store, jobid, dataid)
        store.abandon_runs(
            jobid, dataid, f"ended by hand ({status})"
        )  # a live run's finish is fenced off
        updated, released = store.finish(jobid, dataid, status)
        if not updated:
            known(store, jobid)
            raise UnknownChunk(jobid, dataid)  # rolls back the IN-row deletion too
        if then:
            then()
        return updated, released


def force(store: Store, job: Job, dataid: str) -> None:
    """``utility forcejob``: mark a chunk RUNNING without checking its inputs."""
    from ...dataids import check_name  # (a claim's own chunks were named by someone else)

    check_name("dataid", dataid)
    with store.transaction():
        if any(row.status == RUNNING for row in store.chunk_rows(job.jobid, dataid)):
            raise ChunkBusy(job.jobid, dataid, RUNNING)
        store.mark_running(job.jobid, dataid, job.outputs, job.inputs)


def delete_chunk(store: Store, jobid: str, dataid: str, force: bool = False) -> int:
    """``utility deleterun``: forget every row of a job at a dataid (a live run's only
    with ``force``)."""
    with store.transaction():
        if not force:
            refuse_live(store, jobid, dataid)
        deleted = store.delete_chunk(jobid, dataid)
        if not deleted:
            known(store, jobid)
            raise UnknownChunk(jobid, dataid)
        return deleted
