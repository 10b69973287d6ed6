"""``utility explain``: the five questions for one chunk of a job, from stored facts.

Ready? Right data? Expected place? Validated? Safe? Then one verdict line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from .. import dataids
from ..dataids import natural_key
from ..run.claim import claims, lifecycle, liveness
from ..run.claim.jobenv import FIELDS
from ..run.claim.lifecycle import FAILED, HOLD, READY, RESUBMIT, RUNNING, Job
from ..store import Store

QUESTIONS = ("ready", "right data", "location", "validated", "safe")
WAITING = "waiting"  # without a claimable chunk: each chunk that waits to rerun, and why
_SHOWN = 20  # waiting chunks listed


@dataclass
class Explanation:
    jobid: str
    dataid: str | None
    summary: str  # which chunk and why this one
    answers: dict[str, list[str]] = field(default_factory=dict)
    verdict: str = ""


def explain(store: Store, jobid: str, dataid: str | None = None) -> Explanation:
    job = lifecycle.load_job(store, jobid)
    waiting: list[str] = []
    if dataid is None:
        dataid, summary = _next_chunk(store, job)
        if claims.peek(store, job) is None:
            waiting = _waiting(store, job)
        if dataid is None:
            if not waiting:
                return Explanation(
                    jobid, None, summary, verdict="will not run: no chunk waits for it"
                )
            count = "1 chunk waits" if len(waiting) == 1 else f"{len(waiting)} chunks wait"
            summary = f"nothing claimable for {jobid} now; {count} to rerun"
            first = waiting[0].split(": ", 1)[1]
            return Explanation(jobid, None, summary, {WAITING: waiting}, f"will not run: {first}")
    else:
        summary = f"chunk {dataid} of {jobid}"
    result = Explanation(jobid, dataid, summary)
    if waiting:
        result.answers[WAITING] = waiting
    blockers: list[str] = []
    result.answers["ready"] = _ready(store, job, dataid, blockers)
    result.answers["right data"] = _producers(store, job, dataid)
    result.answers["location"] = _locations(store, job)
    result.answers["validated"] = _validated(store, job, dataid)
    result.answers["safe"] = _safe(store, job, dataid, blockers)
    result.verdict = f"will not run: {blockers[0]}" if blockers else "will run"
    return result


def _next_chunk(store: Store, job: Job) -> tuple[str | None, str]:
    waiting = store.count_candidates(job.jobid)
    nxt = claims.peek(store, job)
    if nxt is not None:
        return nxt, f"next chunk of {job.jobid}: {nxt} ({waiting} waiting)"
    # Nothing claimable: show the first chunk it waits for upstream, if any.
    pending = [
        row["dataid"]
        for dataset in job.inputs
        for row in store.waiting_upstream(dataset)
        if not store.out_status(job.jobid, row["dataid"])
    ]
    if pending:
        first = min(pending, key=natural_key)
        return first, f"nothing claimable for {job.jobid}; first chunk waiting upstream: {first}"
    return None, f"nothing to do for {job.jobid}: no input chunk waits for it"


def _waiting(store: Store, job: Job) -> list[str]:
    """Each chunk of the job that waits to rerun (RESUBMIT, FAILED), with what blocks it."""
    chosen = sorted(store.dataids_of_job(job.jobid, (RESUBMIT, FAILED)), key=natural_key)
    lines = []
    for dataid in chosen[:_SHOWN]:
        blockers: list[str] = []
        _ready(store, job, dataid, blockers)
        _safe(store, job, dataid, blockers)
        status = ",".join(sorted({s for _, s in store.out_status(job.jobid, dataid)}))
        lines.append(f"{dataid} {status}: {blockers[0] if blockers else 'claimable'}")
    if len(chosen) > _SHOWN:
        lines.append(f"... and {len(chosen) - _SHOWN} more: (see 'utility runs')")
    return lines


def _ready(store: Store, job: Job, dataid: str, blockers: list[str]) -> list[str]:
    lines = []
    if job.clock:
        now = dataids.period(job.clock)
        backfill = dataid < now and RESUBMIT in dict(store.out_status(job.jobid, dataid)).values()
        ok = dataid == now or backfill
        lines.append(f"{job.clock}: {'ready' if ok else f'not ready ({job.clock} is {now})'}")
        if not ok:
            what = dataids.described(job.clock)
            blockers.append(f"it is {what} and {dataid} is not {job.clock} ({now})")
    for dataset in job.inputs:
        outs = [r for r in store.chunk_of_dataset(dataset, dataid) if r["locktype"] == "OUT"]
        ready = [r for r in outs if r["status"] == READY]
        if ready:
            lines.append(f"{dataset}: READY (produced by {ready[0]['jobid']})")
        elif outs:
            states = ", ".join(f"{r['status']} by {r['jobid']}" for r in outs)
            lines.append(f"{dataset}: not ready ({states})")
            blockers.append(f"input {dataset} is not READY at {dataid} ({states})")
        else:
            lines.append(f"{dataset}: no chunk {dataid} yet")
            blockers.append(f"input {dataset} has no chunk {dataid} yet")
    return lines


def _producers(store: Store, job: Job, dataid: str) -> list[str]:
    lines = []
    for dataset in job.inputs:
        for row in store.chunk_of_dataset(dataset, dataid):
            if row["locktype"] != "OUT":
                continue
            run = store.last_run(row["jobid"], dataid)
            if run is None:
                lines.append(
                    f"{dataset}: set {row['status']} by hand as job {row['jobid']} "
                    f"at {row['modified']} (no run history)"
                )
            else:
                lines.append(
                    f"{dataset}: {row['jobid']} attempt {run['attempt']}, started {run['started']}, "
                    f"ended {run['ended'] or '-'} on {run['host']}"
                )
    return lines or ["(no input chunk recorded)"]


def _locations(store: Store, job: Job) -> list[str]:
    lines = []
    datasets = store.datasets(job.inputs + job.outputs)
    for itemtype, names in (("IN", job.inputs), ("OUT", job.outputs)):
        for name in names:
            row = datasets.get(name)
            if row is None:
                lines.append(f"{name} ({itemtype}): not registered in table dataset")
                continue
            parts = [f"{column}={row[column]}" for column in FIELDS[1:] if row[column]]
            parts.append("password=***" if row["encryptedpass"] else "password=none")
            lines.append(f"{name} ({itemtype}): " + " ".join(parts))
    return lines


def _validated(store: Store, job: Job, dataid: str) -> list[str]:
    lines = []
    for dataset in job.inputs:
        for row in store.chunk_of_dataset(dataset, dataid):
            if row["locktype"] == "OUT":
                run = store.last_run(row["jobid"], dataid)
                check = (run or {}).get("validation") or "no check recorded"
                lines.append(f"{dataset}: {check}")
    own = store.last_run(job.jobid, dataid)
    if own and own.get("validation"):
        lines.append(f"this job's last run: validation {own['validation']}")
    return lines or ["(no input chunk recorded)"]


def _safe(store: Store, job: Job, dataid: str, blockers: list[str]) -> list[str]:
    rows = store.chunk_rows(job.jobid, dataid)
    statuses = {r.status for r in rows if r.locktype == "OUT"}
    run = store.last_run(job.jobid, dataid)
    live = liveness.is_live(store, job.jobid, dataid)
    lines = [f"{job.jobid} at {dataid}: " + (", ".join(sorted(statuses)) or "not produced yet")]
    if any(r.locktype == "IN" for r in rows):
        lines.append(f"its inputs are being consumed by a run of {job.jobid}")
        if RUNNING not in statuses:  # (a run producing it says more, below)
            blockers.append(f"a run of {job.jobid} is consuming its inputs (its IN rows)")
    if RUNNING in statuses:
        if live:
            holder = f" (pid {run['pid']} on {run['host']})" if run else ""
            lines.append(f"a live run holds it{holder}")
            blockers.append(f"a live run of {job.jobid} is producing it{holder}")
        else:
            lines.append("its run died: the next RunJob or 'utility recover' marks it FAILED")
            blockers.append("its last run died; it becomes FAILED at the next RunJob")
    elif live:
        lines.append("a process of its previous run is still alive and holds its lock")
        blockers.append("a process of its previous run is still alive")
    if HOLD in statuses:
        since = store.held(job.jobid, dataid)
        lines.append(f"on hold since {since[0]['since']}" if since else "on hold")
        blockers.append("it is on hold ('utility release' unfreezes it)")
    if READY in statuses:
        blockers.append(f"{job.jobid} already produced it (READY); resubmit it to rerun")
    if run and not lifecycle.counted(run):
        lines.append(f"its last run's attempt, retry: {run['attempt']!r}, {run['retry']!r}")
        blockers.append(f"it {claims.MISCOUNTED}: correct or delete its rows")
    elif FAILED in statuses and RESUBMIT not in statuses:
        retry = run["retry"] if run else 0
        if retry >= job.settings.retries:
            why = f", {run['reason']}" if run and run["reason"] else ""
            lines.append(f"FAILED after attempt {run['attempt'] if run else '?'}{why}")
            blockers.append("it FAILED and has no automatic retry left; resubmit it to rerun")
        else:
            due = f"automatic retry {retry + 1} of {job.settings.retries}"
            wait = lifecycle.retry_wait(job, rows, run, store.clock()) if run else 0.0
            if wait > 0:
                when = f"retry in {math.ceil(wait)} s"
                lines.append(f"FAILED; {due}: {when} (retry_delay)")
                blockers.append(f"it FAILED; {due}: {when} (retry_delay)")
            else:
                lines.append(f"FAILED; {due} is due")
    cap = job.settings.max_parallel
    live_runs = store.count_running(job.jobid)
    if cap:
        lines.append(f"{live_runs} of max_parallel {cap} runs are live")
        if live_runs >= cap:
            blockers.append(f"max_parallel ({cap}) runs of {job.jobid} are live")
    return lines
