"""The rules of a chunk's life: which chunk a job may claim, and how a run ends.

Every change here is one short ``BEGIN IMMEDIATE`` transaction on the store; no
transaction is held while a job runs.
"""

from __future__ import annotations

import os
from collections import namedtuple
from collections.abc import Iterator

from .. import dataids
from ..errors import BadStatus, JobConfigError, UnknownChunk, UnknownJob
from ..store import ChunkRow, Store
from . import locks, logs

TODAY = "today"
READY, FAILED, RESUBMIT, RUNNING, HOLD = "READY", "FAILED", "RESUBMIT", "RUNNING", "HOLD"
END_STATUSES = (READY, FAILED, RESUBMIT, HOLD)
RERUNNABLE = (RESUBMIT, FAILED)
# job rows whose itemtype is one of these are settings, not environment items
SETTINGS = ("retries", "max_parallel", "timeout", "spark_args")
ABANDONED = "abandoned"  # the reason recorded for a run that died without ending
_BATCH = 64


# Value types of the run path are named tuples and plain classes, not dataclasses:
# ``dataclasses`` imports ``inspect`` and builds each class with exec, about 20 ms
# of every RunJob's start-up (benchmarks/findings.md).


class Settings(namedtuple("Settings", "retries max_parallel timeout spark_args")):
    """Job settings: ``job`` rows with a reserved itemtype, the value in itemvalue.

    retries: automatic reruns of a FAILED chunk; max_parallel: live runs of the job
    at once, across processes (None: no cap); timeout: seconds before the job is
    killed (None: never); spark_args: extra spark-submit arguments.
    """

    __slots__ = ()

    def __new__(cls, retries=0, max_parallel=None, timeout=None, spark_args=""):
        return super().__new__(cls, retries, max_parallel, timeout, spark_args)


class Job(namedtuple("Job", "jobid inputs outputs daily settings extras")):
    """A job as registered in table ``job``.

    inputs: IN datasets, without the special ``today``; daily: it has the IN
    dataset ``today``; extras: other rows, (itemtype, itemvalue) environment items.
    """

    __slots__ = ()

    def __new__(cls, jobid, inputs, outputs, daily=False, settings=None, extras=()):
        return super().__new__(cls, jobid, inputs, outputs, daily, settings or Settings(), extras)


def _number(jobid: str, name: str, value: str, kind: type, least: float) -> float:
    try:
        number = kind(value)
    except ValueError:
        number = None
    # "nan" and "inf" parse as floats; neither is a number of seconds or of runs
    if number is None or not number < float("inf") or number < least:
        raise JobConfigError(jobid, f"setting {name} must be a number >= {least}, not '{value}'")
    return number


def settings_of(jobid: str, values: dict[str, str]) -> Settings:
    """Parse and check a job's settings."""
    timeout = values.get("timeout")
    cap = values.get("max_parallel")
    return Settings(
        retries=int(_number(jobid, "retries", values.get("retries", "0"), int, 0)),
        max_parallel=int(_number(jobid, "max_parallel", cap, int, 1)) if cap else None,
        timeout=_number(jobid, "timeout", timeout, float, 0.001) if timeout else None,
        spark_args=values.get("spark_args", ""),
    )


def load_job(store: Store, jobid: str) -> Job:
    """Read a job's registration; errors if it cannot run at all."""
    items = store.job_items(jobid)
    if not items:
        raise UnknownJob(jobid)
    inputs, outputs, settings, extras, daily = [], [], {}, [], False
    for item in items:
        if item.itemtype in ("IN", "OUT"):
            if not item.datasetid:
                raise JobConfigError(jobid, f"an {item.itemtype} row has no datasetid")
            if item.itemtype == "OUT":
                outputs.append(item.datasetid)
            elif item.datasetid == TODAY:
                daily = True
            else:
                inputs.append(item.datasetid)
        elif item.itemtype in SETTINGS:
            settings[item.itemtype] = (item.itemvalue or "").strip()
        else:
            extras.append((item.itemtype, item.itemvalue or ""))
    if not outputs:
        raise JobConfigError(jobid, "it has no OUT dataset; add a job row with itemtype 'OUT'")
    if not inputs and not daily:
        raise JobConfigError(
            jobid, "it has no IN dataset; add one, or IN dataset 'today' for a daily job"
        )
    return Job(
        jobid, tuple(inputs), tuple(outputs), daily, settings_of(jobid, settings), tuple(extras)
    )


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


class Claim(namedtuple("Claim", "dataid attempt runid lock logpath")):
    """A chunk this process now owns: its lock (a ChunkLock) is held until the run
    ends; runid names its history row, logpath its log file."""

    __slots__ = ()


class ClaimResult:
    """What a claim found: the claim itself, or why there is none."""

    def __init__(self) -> None:
        self.claim: Claim | None = None
        self.live = 0  # runs of the job alive before this claim (counted when a cap is set)
        self.cap: int | None = None  # the max_parallel setting read by this claim
        self.cap_full = False  # max_parallel live runs already: nothing claimed
        self.abandoned: list[str] = []  # dead runs just marked FAILED


class _DryRun(Exception):
    """Raised inside the claim transaction to roll it back."""


def is_live(store: Store, jobid: str, dataid: str) -> bool:
    """Does a live process (a run or a child it left) hold the chunk's lock?"""
    return locks.is_held(store.files, jobid, dataid)


def recover(store: Store, jobid: str | None = None) -> list[tuple[str, str]]:
    """Mark FAILED every RUNNING chunk whose lock nobody holds (its run died).

    Runs inside the caller's write transaction: a claim takes its chunk lock
    before committing, so a committed RUNNING row with a free lock is dead.
    """
    dead = []
    for job, dataid in store.running(jobid):
        if not is_live(store, job, dataid):
            store.finish(job, dataid, FAILED)
            store.abandon_runs(job, dataid, ABANDONED)
            dead.append((job, dataid))
    return dead


def _choose(store: Store, job: Job) -> Iterator[tuple[str, str]]:
    """Candidates of the job as (sortkey, dataid), in natural order."""
    if job.daily:
        day = dataids.today()
        yield dataids.natural_key(day), day
        return
    seen, size = None, 4  # the first candidate is nearly always the one: fetch few first
    while batch := store.candidates(job.jobid, size, after=seen):
        yield from batch
        seen, size = batch[-1], _BATCH


def peek(store: Store, job: Job, limit: int = 10_000) -> str | None:
    """The chunk the job would claim next, read-only (locks are not probed)."""
    for seen, (_, dataid) in enumerate(_choose(store, job)):
        if seen >= limit:
            break
        last = store.last_run(job.jobid, dataid)
        rows = store.chunk_rows(job.jobid, dataid)
        if claimable(job, rows, store.ready_inputs(job.inputs, dataid), last and last["retry"]):
            return dataid
    return None


def claim(
    store: Store, job: Job, *, command: str = "", dry_run: bool = False, recover_dead: bool = True
) -> ClaimResult:
    """Atomically claim the job's smallest claimable chunk, in one short transaction:
    recover dead runs (``recover_dead``: RunJob does at its start, a drain now and then),
    respect ``max_parallel``, lock the chunk, mark it RUNNING and open its history row.
    With ``dry_run`` the transaction is always rolled back and no lock is taken."""
    result = ClaimResult()
    try:
        with store.transaction():
            if recover_dead:
                result.abandoned = [d for _, d in recover(store, job.jobid)]
            settings = load_job(store, job.jobid).settings  # read at every start
            result.cap = settings.max_parallel
            if settings.max_parallel:
                result.live = store.count_running(job.jobid)
                result.cap_full = result.live >= settings.max_parallel
            if not result.cap_full:
                job = job._replace(settings=settings)
                result.claim = _claim_first(store, job, command, dry_run)
            if dry_run:
                raise _DryRun
    except _DryRun:
        pass
    return result


def _claim_first(store: Store, job: Job, command: str, dry_run: bool) -> Claim | None:
    """The first claimable candidate, claimed. A candidate whose sort key is not its
    dataid's (an outside client wrote it) is put back in its place and looked at again;
    the scan is over rows as read, so it always ends."""
    for _ in range(2):  # a second pass only after repairs
        repaired = False
        for key, dataid in _choose(store, job):
            if key != dataids.natural_key(dataid):
                store.drop_candidate(job.jobid, key, dataid)
                store.put_candidate(job.jobid, dataid)
                repaired = True
                continue
            rows = store.chunk_rows(job.jobid, dataid)
            last = store.last_run(job.jobid, dataid)
            ready = store.ready_inputs(job.inputs, dataid)
            if not claimable(job, rows, ready, last and last["retry"]):
                # Stale: any later change that could make it claimable offers it again.
                store.drop_candidate(job.jobid, key, dataid)
                continue
            lock = locks.ChunkLock(store.files, job.jobid, dataid)
            if dry_run:
                if locks.is_held(store.files, job.jobid, dataid):
                    continue
            elif not lock.try_acquire():
                continue  # a process of an earlier run of this chunk is still alive: keep it
            return _mark(store, job, dataid, rows, last, lock, command)
        if not repaired:
            break
    return None


def _mark(store: Store, job: Job, dataid: str, rows, last, lock, command: str) -> Claim:
    """Record the claim of a locked chunk: RUNNING rows and a history row."""
    fresh = not any(r.status == FAILED for r in rows if r.locktype == "OUT") or any(
        r.status == RESUBMIT for r in rows
    )
    attempt = (last["attempt"] + 1) if last else 1
    retry = 0 if fresh or not last else last["retry"] + 1
    logpath = logs.log_path(store.files, job.jobid, dataid, attempt)
    store.mark_running(job.jobid, dataid, job.outputs, job.inputs)
    runid = store.start_run(
        jobid=job.jobid,
        dataid=dataid,
        attempt=attempt,
        retry=retry,
        pid=os.getpid(),
        host=os.uname().nodename,
        command=command,
        logpath=str(logpath),
    )
    return Claim(dataid, attempt, runid, lock, logpath)


def finish(
    store: Store, jobid: str, dataid: str, status: str, runid: int | None = None, **outcome: object
) -> tuple[int, int]:
    """End a run: OUT rows to ``status``, IN rows deleted, its history row closed
    with ``outcome`` (exitcode, signal, duration, reason). Returns both counts."""
    with store.transaction():
        counts = store.finish(jobid, dataid, status)
        if runid is not None:
            store.end_run(runid, status, **outcome)
        return counts


def end_chunk(store: Store, jobid: str, dataid: str, status: str) -> tuple[int, int]:
    """``utility endjob``: set a chunk's end status by hand."""
    status = status.upper()
    if status not in END_STATUSES:
        raise BadStatus(status, END_STATUSES)
    with store.transaction():
        updated, released = store.finish(jobid, dataid, status)
        if not updated:
            raise UnknownChunk(jobid, dataid)  # rolls back the IN-row deletion too
        return updated, released


def force(store: Store, job: Job, dataid: str) -> None:
    """``utility forcejob``: mark a chunk RUNNING without checking its inputs."""
    with store.transaction():
        if any(row.status == RUNNING for row in store.chunk_rows(job.jobid, dataid)):
            raise JobConfigError(job.jobid, f"chunk '{dataid}' is already RUNNING")
        store.mark_running(job.jobid, dataid, job.outputs, job.inputs)


def delete_chunk(store: Store, jobid: str, dataid: str) -> int:
    """``utility deleterun``: forget every row of a job at a dataid."""
    with store.transaction():
        deleted = store.delete_chunk(jobid, dataid)
        if not deleted:
            raise UnknownChunk(jobid, dataid)
        return deleted
