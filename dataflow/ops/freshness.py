"""Freshness: is each day's data READY on time? (``utility check``, the board's late cells)

A job's setting ``ready_by`` is a promise on the datasets it produces: each day's chunk
(the dataid ``YYYY-MM-DD`` of that day, as ``today`` names days) is READY by ``HH:MM``
that day, or ``HH:MM+N`` N days later, in the host's system time zone (the rule of
``today``). Time is the store's clock (a shared store's server time). A chunk is late
once its time has passed and not all its OUT rows are READY: the last due day's chunk
(whether or not it exists yet, unless it was due before the job's rows were written),
and any earlier day's, back ``LOOKBACK_DAYS``, that has rows and is not READY. Each is told with what blocks it, in the words of ``explain``.
"""

from __future__ import annotations

import os
import re
from collections import namedtuple
from datetime import datetime, time, timedelta, tzinfo
from pathlib import Path

from ..dataids import natural_key, system_zone
from ..errors import DataflowError
from ..run import alerts, lifecycle
from ..run.lifecycle import FAILED, HOLD, READY, RESUBMIT, RUNNING, TODAY
from ..run.settings import DUE
from ..store import Store, shown
from .explain import explain

LOOKBACK_DAYS = 31
ALERTED = "late-alerted"  # in the store's folder: the late chunks already alerted, a line each
_DAY = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")

Late = namedtuple("Late", "jobid dataid due status blocked")


def due(day: str, promise: str, zone: tzinfo) -> datetime:
    """When the chunk of ``day`` is due under ``ready_by`` = ``promise``."""
    hours, minutes, later = DUE.fullmatch(promise).groups()  # type: ignore[union-attr]
    date = datetime.fromisoformat(day).date() + timedelta(days=int(later or 0))
    return datetime.combine(date, time(int(hours), int(minutes)), tzinfo=zone)


def late(store: Store, at: datetime | None = None) -> list[Late]:
    """Every late chunk of every job with a ``ready_by`` promise, at ``at`` (default: the
    store's clock now), job by job, oldest first."""
    zone = system_zone()
    now = (at or store.clock()).astimezone(zone)
    found = []
    promised: dict[str, str] = {}  # when each job's rows were written: its promise's start
    for row in store.jobs():
        promised[row["jobid"]] = min(promised.get(row["jobid"], "~"), str(row["modified"]))
    for jobid in store.job_ids():
        try:
            job = lifecycle.load_job(store, jobid)
        except DataflowError:  # a job that cannot run is told by status and explain
            continue
        promise = job.settings.ready_by
        if not promise or job.clock not in ("", TODAY):
            continue  # a promise on days: the chunks of an hourly, weekly or monthly job are none
        # the newest day whose chunk is due by now
        last = now.date()
        while due(last.isoformat(), promise, zone) > now:
            last -= timedelta(days=1)
        first = (last - timedelta(days=LOOKBACK_DAYS)).isoformat()
        days = {last.isoformat()} | {
            d
            for d in store.dataids_of_job(jobid, (FAILED, RESUBMIT, RUNNING, HOLD))
            if _DAY.fullmatch(d) and first <= d <= last.isoformat()
        }
        for day in sorted(days, key=natural_key):
            statuses = sorted({status for _, status in store.out_status(jobid, day)})
            when = due(day, promise, zone)
            if statuses == [READY] or (not statuses and str(when)[:19] < promised[jobid][:19]):
                continue  # READY, or due before the promise was made
            verdict = explain(store, jobid, day).verdict
            blocked = verdict.removeprefix("will not run: ")
            if verdict == "will run":
                blocked = "nothing: the job's next RunJob runs it (is it in cron?)"
            shown_due = when.strftime("%Y-%m-%d %H:%M")
            found.append(Late(jobid, day, shown_due, ",".join(statuses) or "no chunk yet", blocked))
    return found


def alert(store: Store, chunks: list[Late]) -> list[str]:
    """Alert each late chunk once (the jobs' alert URLs, one message per destination);
    returns a warning line per destination that was not reached (tried again next time).
    The late chunks already told are kept in the store's folder, as long as they stay late."""
    record = Path(store.files) / ALERTED
    try:
        told = set(record.read_text(encoding="utf-8").splitlines())
    except OSError:
        told = set()
    key = {chunk: f"{chunk.jobid}\t{chunk.dataid}" for chunk in chunks}
    groups: dict[tuple[str, ...], list[Late]] = {}
    for chunk in chunks:
        if key[chunk] not in told:
            setting = lifecycle.load_job(store, chunk.jobid).settings.alerts
            urls = tuple(alerts.urls_for(store, setting))
            if urls:
                groups.setdefault(urls, []).append(chunk)
    still = {key[chunk] for chunk in chunks} & told
    problems = []
    for urls, group in groups.items():
        lines = [
            f"{c.jobid} {c.dataid}: due {c.due}, {c.status}; blocked by {c.blocked}" for c in group
        ]
        title = (
            f"dataflow: {group[0].jobid} {group[0].dataid} late"
            if len(group) == 1
            else (f"dataflow: {len(group)} chunks late")
        )
        body = "\n".join([*lines[: alerts.LISTED], f"store {shown(store.path)}"])
        problem = alerts.failures(alerts.deliver(list(urls), title, body))
        if problem:
            problems.append(problem)
        else:
            still |= {key[chunk] for chunk in group}
    try:
        record.parent.mkdir(parents=True, exist_ok=True)
        temporary = record.with_name(f".{ALERTED}.{os.getpid()}")
        temporary.write_text("".join(f"{line}\n" for line in sorted(still)), encoding="utf-8")
        os.replace(temporary, record)
    except OSError as exc:
        problems.append(f"cannot remember the late chunks alerted in {record}: {exc.strerror}")
    return problems
