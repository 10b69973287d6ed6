"""What the status board says beyond colours: for each failure what to do and where its
log is (the advice ``explain`` gives), and which empty cells are blocked by a failure
upstream rather than simply not reached yet."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..errors import DataflowError
from ..run.claim import lifecycle
from ..run.process import logs
from ..store import Store
from .lineage import job_graph


def blocked(
    rows: Iterable[dict], job_rows: list[dict], jobs: Sequence[str], dataids: Sequence[str]
) -> dict[tuple[str, str], str]:
    """The chunks (job, dataid) with no row that wait on a FAILED chunk upstream (at the
    same dataid, directly or through a job it blocks in turn), each with why in words.
    ``jobs`` in pipeline order: a producer comes before its consumers."""
    status = {(r["jobid"], r["dataid"]): r["status"] for r in rows}
    upstream: dict[str, list[str]] = {}
    for producer, consumers in job_graph(job_rows).items():
        for consumer in consumers:
            upstream.setdefault(consumer, []).append(producer)
    found: dict[tuple[str, str], str] = {}
    for job in jobs:
        for dataid in dataids:
            if (job, dataid) in status:
                continue
            for producer in sorted(upstream.get(job, ())):
                if status.get((producer, dataid)) == lifecycle.FAILED:
                    found[job, dataid] = f"blocked: {producer} FAILED at {dataid}"
                    break
                if (producer, dataid) in found:
                    found[job, dataid] = found[producer, dataid]
                    break
    return found


def advice(store: Store, cell: dict) -> str:
    """For a FAILED cell: what happens next or what to do, and where its log is."""
    jobid, dataid = cell["jobid"], cell["dataid"]
    run = store.last_run(jobid, dataid)
    try:
        retries = lifecycle.load_job(store, jobid).settings.retries
    except DataflowError:
        retries = 0
    retry = run["retry"] if run else 0
    if run and not lifecycle.counted(run):  # written by hand: no count
        todo = "its last run's attempt or retry is not a count: correct or delete its rows"
    elif retry < retries:
        todo = f"automatic retry {retry + 1} of {retries} at the next RunJob"
    else:
        todo = f"no retry left: fix the cause, then '{_command('resubmit', jobid, dataid)}'"
    try:
        where = f"log {logs.find(store, jobid, dataid)}"
    except DataflowError:
        where = "no log here"
    host = f" on {run['host']}" if run and run.get("host") else ""
    log, explain = _command("log", jobid, dataid), _command("explain", jobid, dataid)
    return f"{todo}; {where}{host} ('{log}', '{explain}')"


def _command(verb: str, *words: str) -> str:
    """A command line to paste: a job name or dataid written by any store writer is
    quoted for the shell (``'; touch x'`` stays a word)."""
    import shlex

    return shlex.join(["utility", verb, *words])
