"""Chunks that appear from outside our jobs: a producer's drop (``utility ready``), and the
missing periods of a job run by a clock (``utility resubmit JOB --from P1 --to P2``).

Each is one transaction, checked first, and idempotent: repeating it changes nothing.
"""

from __future__ import annotations

import re
from datetime import datetime

from .. import dataids
from ..errors import ChunkLive, UsageError
from ..run.claim import liveness
from ..run.claim.lifecycle import READY, RUNNING, Job
from ..store import Store

EXTERNAL = "external"  # the producer's name for a drop nobody named
MAX_RANGE = 100_000  # dataids one range may name


def dataid_range(first: str, last: str) -> list[str]:
    """Every dataid from ``first`` to ``last``: whole numbers, or periods of one clock (days
    ``YYYY-MM-DD``, hours ``YYYY-MM-DDTHH``, ISO weeks ``YYYY-Www``, months ``YYYY-MM``)."""
    if first.isdigit() and last.isdigit():
        width = len(first) if first.startswith("0") else 0  # 007..012 keeps its width
        low, high = int(first), int(last)
        names = (
            [str(n).zfill(width) for n in range(low, high + 1)] if high - low < MAX_RANGE else None
        )
    else:
        try:
            names = dataids.periods(first, last, MAX_RANGE)
        except ValueError:
            raise UsageError(
                f"--from {first} --to {last}: give two whole numbers or two dates YYYY-MM-DD "
                f"(or two periods of one kind: {dataids.FORMATS})"
            ) from None
    if names is None:
        raise UsageError(f"--from {first} --to {last} names more than {MAX_RANGE} chunks")
    if not names:
        raise UsageError(f"--from {first} comes after --to {last}")
    return names


def _check(dataid: str) -> str:
    if not dataid or "\0" in dataid or "\n" in dataid:
        raise UsageError(f"dataid {dataid!r} cannot name a chunk (empty, NUL or newline)")
    dataids.check_name("dataid", dataid)
    return dataid


def mark_ready(
    store: Store, datasetid: str, chunks: list[str], producer: str | None = None
) -> tuple[int, int]:
    """Record that ``producer`` (default: the dataset's registered producer job, else
    ``external``) has made these chunks of ``datasetid`` READY. Returns (marked, already).
    A named producer is one of the dataset's registered producers, or, when it has none,
    a name outside our jobs: never a job that does not produce it (whose own chunks the
    rows would mark done)."""
    for dataid in chunks:
        _check(dataid)
    if datasetid not in store.datasets([datasetid]):
        raise UsageError(f"dataset '{datasetid}' is not registered (see 'utility datasets')")
    producers = store.jobs_using(datasetid, "OUT")
    if producer is None:
        if len(producers) > 1:
            raise UsageError(
                f"dataset '{datasetid}' has producers {', '.join(producers)}: name one with --by"
            )
        producer = producers[0] if producers else EXTERNAL
    elif producers and producer not in producers:
        raise UsageError(
            f"job '{producer}' does not produce '{datasetid}' (its producer: {', '.join(producers)})"
        )
    elif not producers and store.job_items(producer):  # its chunks would look done
        raise UsageError(
            f"job '{producer}' does not produce '{datasetid}', which has no registered "
            "producer: name the producer outside our jobs, or leave out --by (external)"
        )
    with store.transaction():
        marked = 0
        for dataid in chunks:
            statuses = dict(store.out_status(producer, dataid))
            if statuses.get(datasetid) == RUNNING and liveness.is_live(store, producer, dataid):
                where = liveness.where(store, store.last_run(producer, dataid))
                raise ChunkLive(producer, dataid, where)
            marked += store.put_out_status(producer, dataid, [datasetid], READY)
    return marked, len(chunks) - marked


def missing_periods(
    store: Store, job: Job, first: str, last: str, at: datetime | None = None
) -> list[str]:
    """The periods from ``first`` to ``last`` (up to the current one, at ``at``: default now)
    that a job run by a clock (``today``, ``this_hour``...) never ran: a backfill gives them
    RESUBMIT rows, and the job's next RunJobs run them, oldest first."""
    if not job.clock:
        raise UsageError(f"job '{job.jobid}' is not run by a clock: only its own chunks can rerun")
    unit = dataids.CLOCKS[job.clock][1]
    shape = dataids.PERIODS[job.clock]
    if not (re.fullmatch(shape, first) and re.fullmatch(shape, last)):
        example = dataids.period(job.clock, at)
        raise UsageError(
            f"job '{job.jobid}' is {dataids.described(job.clock)} (IN {job.clock}): "
            f"--from and --to name {unit}s, like {example}"
        )
    now = dataids.period(job.clock, at)
    chosen = [d for d in dataid_range(first, last) if d <= now]
    return [d for d in chosen if not store.out_status(job.jobid, d)]
