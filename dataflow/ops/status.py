"""``utility status``: per job, where its chunks stand."""

from __future__ import annotations

from ..errors import DataflowError, UnknownJob
from ..run.claim import claims, lifecycle, liveness
from ..store import Row, Store

WIDTH = 100  # characters of a cut cell, "..." included


def first_line(text: object, width: int = WIDTH) -> object:
    """The first non-blank line of ``text``, at most ``width`` characters; ``...`` ends it
    when more was there (another line, or the rest of a long one). Not text: as it is."""
    if not isinstance(text, str):
        return text
    lines = [line.strip() for line in text.strip().splitlines()]
    line = lines[0] if lines else ""
    if len(line) > width:
        return line[: width - 3].rstrip() + "..."
    return f"{line} ..." if len(lines) > 1 else line


STATUSES = ("READY", "RUNNING", "FAILED", "RESUBMIT", "HOLD")
WAITING_MEANS = (  # what the WAITING column counts (and explain's "N waiting")
    "the chunks a job could claim now: every input READY, and its own output not there yet, "
    "RESUBMIT, or FAILED with a retry left (held, running and done chunks are not counted)"
)


def job_status(store: Store, jobid: str | None = None) -> list[Row]:
    """Counts by status, chunks waiting, the next one, live runs and the last failure:
    of every job, or of the one named (an unknown name is an error)."""
    jobids = store.job_ids()
    if jobid is not None:
        if jobid not in jobids:
            raise UnknownJob(jobid, store.job_ids())
        jobids = [jobid]
    counts: dict[str, dict[str, int]] = {}
    for row in store.status_counts():
        counts.setdefault(row["jobid"], {})[row["status"]] = row["chunks"]
    rows = []
    for jobid in jobids:
        try:
            nxt = claims.peek(store, lifecycle.load_job(store, jobid)) or ""
        except DataflowError as exc:
            nxt = f"misconfigured: {exc}"
        live = liveness.live_runs(store, store.running(jobid))
        places = sorted(liveness.where(store, store.last_run(*chunk)) for chunk in live)
        failure = store.last_failure(jobid)
        row: Row = {"jobid": jobid}
        row.update({s.lower(): counts.get(jobid, {}).get(s, 0) for s in STATUSES})
        row.update(
            waiting=store.count_candidates(jobid),
            next=nxt,
            live=f"{len(live)} ({'; '.join(places)})" if live else 0,
            last_failure=(
                f"{failure['dataid']} at {failure['ended']}: {failure['reason'] or 'failed'}"
                if failure
                else ""
            ),
        )
        rows.append(row)
    return rows
