"""The rules of a chunk's life: which chunk a job may claim, and how a run ends.

Every change here is one short ``BEGIN IMMEDIATE`` transaction on the store; no
transaction is held while a job runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import dataids
from .errors import BadStatus, JobConfigError, UnknownChunk, UnknownJob
from .store import ChunkRow, Store

TODAY = "today"
READY, FAILED, RESUBMIT, RUNNING, HOLD = "READY", "FAILED", "RESUBMIT", "RUNNING", "HOLD"
END_STATUSES = (READY, FAILED, RESUBMIT, HOLD)
RERUNNABLE = (RESUBMIT, FAILED)
# job rows whose itemtype is one of these are settings, not environment items
SETTINGS = ("retries", "max_parallel", "timeout", "spark_args")
_BATCH = 64


@dataclass(frozen=True)
class Job:
    """A job as registered in table ``job``."""

    jobid: str
    inputs: tuple[str, ...]  # IN datasets, without the special ``today``
    outputs: tuple[str, ...]
    daily: bool = False  # has the IN dataset ``today``
    settings: dict[str, str] = field(default_factory=dict)
    extras: tuple[tuple[str, str], ...] = ()  # other rows: environment items


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
            settings[item.itemtype] = item.itemvalue or ""
        else:
            extras.append((item.itemtype, item.itemvalue or ""))
    if not outputs:
        raise JobConfigError(jobid, "it has no OUT dataset; add a job row with itemtype 'OUT'")
    if not inputs and not daily:
        raise JobConfigError(
            jobid, "it has no IN dataset; add one, or IN dataset 'today' for a daily job"
        )
    return Job(jobid, tuple(inputs), tuple(outputs), daily, settings, tuple(extras))


def claimable(job: Job, rows: list[ChunkRow], ready_inputs: int) -> bool:
    """May ``job`` start the chunk whose own rows are ``rows``?

    Every input READY; the job not consuming it already; its outputs absent,
    RESUBMIT, or FAILED (a FAILED chunk reruns only when resubmitted).
    """
    if ready_inputs < len(job.inputs):
        return False
    outs = [row.status for row in rows if row.locktype == "OUT"]
    if any(row.locktype == "IN" for row in rows):
        return False
    if any(status not in RERUNNABLE for status in outs):
        return False
    return not outs or RESUBMIT in outs


def _claimable_at(store: Store, job: Job, dataid: str) -> bool:
    ready = store.ready_inputs(job.inputs, dataid)
    return claimable(job, store.chunk_rows(job.jobid, dataid), ready)


def claim(store: Store, job: Job) -> str | None:
    """Atomically claim the job's smallest claimable dataid, or return None."""
    with store.transaction():
        if job.daily:
            dataid = dataids.today()
            if not _claimable_at(store, job, dataid):
                return None
            store.mark_running(job.jobid, dataid, job.outputs, job.inputs)
            return dataid
        while batch := store.candidates(job.jobid, _BATCH):
            for dataid in batch:
                if _claimable_at(store, job, dataid):
                    store.mark_running(job.jobid, dataid, job.outputs, job.inputs)
                    return dataid
                # Stale: any later change that could make it claimable offers it again.
                store.drop_candidate(job.jobid, dataid)
        return None


def finish(store: Store, jobid: str, dataid: str, status: str) -> tuple[int, int]:
    """End a run: OUT rows to ``status``, IN rows deleted. Returns both counts."""
    with store.transaction():
        return store.finish(jobid, dataid, status)


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
