"""Freshness: is each chunk READY on time? (``utility check``, the board's late cells)

A job's setting ``ready_by`` (``HH:MM`` or ``HH:MM+N``) is a promise on the datasets it
produces: each period's chunk is READY by that time, counted from the period's start:
HH hours and MM minutes after it begins, plus N days. For a day (the dataid
``YYYY-MM-DD``, as ``today`` names days) that is the time of day: ``06:00`` is 06:00 that
day, ``02:00+1`` 02:00 the day after. For an hour (``YYYY-MM-DDTHH``, as ``this_hour``
names them, or ``YYYY-MM-DD-HH``) ``00:15`` is a quarter past it; for an ISO week
(``YYYY-Www``) ``09:00+1`` is its Tuesday 09:00; for a month (``YYYY-MM``) ``09:00+2``
is its 3rd at 09:00. Wall-clock times in the host's system time zone (the rule of the
clocks). A job's grain is its clock's (``this_hour``...), else that of its newest
chunk's dataid, else days. Time is the store's clock (a shared store's server time).

A chunk is late once its time has passed and not all its OUT rows are READY: the last
due period's chunk (whether or not it exists yet, unless it was due before the job's
rows were written), and any earlier period's, whose start is up to ``LOOKBACK_DAYS``
before, that has rows and is not READY. Each is told with what blocks it, in the words
of ``explain``.
"""

from __future__ import annotations

import os
import re
from collections import namedtuple
from datetime import date, datetime, timedelta, tzinfo
from pathlib import Path

from ..dataids import natural_key, system_zone
from ..errors import DataflowError
from ..run.claim import lifecycle
from ..run.claim.lifecycle import FAILED, HOLD, READY, RESUBMIT, RUNNING
from ..run.claim.settings import DUE
from ..run.listeners import alerts
from ..store import Store, shown
from .explain import explain

LOOKBACK_DAYS = 31
ALERTED = "late-alerted"  # in the store's folder: the late chunks already alerted, a line each

Late = namedtuple("Late", "jobid dataid due status blocked")


class Grain(namedtuple("Grain", "name shape spelling")):
    """A kind of period: its dataids' form (``shape``) and ``strftime`` spelling."""

    def start(self, dataid: str) -> datetime:
        """The wall-clock start of the period ``dataid`` names; ValueError for a name of
        this form that is no period (``2026-02-30``, ``2026-W60``)."""
        if self.name == "week":
            return datetime.combine(date.fromisocalendar(int(dataid[:4]), int(dataid[6:]), 1), _0)
        return datetime.strptime(dataid, self.spelling)

    def name_of(self, moment: datetime) -> str:
        """The dataid of the period a wall-clock ``moment`` falls in."""
        if self.name == "week":
            year, week, _ = moment.isocalendar()
            return f"{year:04d}-W{week:02d}"
        return moment.strftime(self.spelling)

    def before(self, dataid: str) -> str:
        """The period just before ``dataid``."""
        return self.name_of(self.start(dataid) - timedelta(minutes=1))


_0 = datetime.min.time()
GRAINS = (
    Grain("hour", re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}"), "%Y-%m-%dT%H"),
    Grain("hour", re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}-[0-9]{2}"), "%Y-%m-%d-%H"),
    Grain("day", re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}"), "%Y-%m-%d"),
    Grain("week", re.compile(r"[0-9]{4}-W[0-9]{2}"), "%G-W%V"),
    Grain("month", re.compile(r"[0-9]{4}-[0-9]{2}"), "%Y-%m"),
)
DAYS = GRAINS[2]
CLOCK_GRAINS = {
    "this_hour": GRAINS[0],
    "today": DAYS,
    "this_week": GRAINS[3],
    "this_month": GRAINS[4],
}


def grain_of(dataid: str) -> Grain | None:
    """The grain whose form ``dataid`` has, if it names a period of it."""
    for grain in GRAINS:
        if grain.shape.fullmatch(dataid):
            try:
                grain.start(dataid)
            except ValueError:
                return None
            return grain
    return None


def due(dataid: str, promise: str, zone: tzinfo, grain: Grain = DAYS) -> datetime:
    """When the chunk ``dataid`` of ``grain`` is due under ``ready_by`` = ``promise``."""
    hours, minutes, later = re.fullmatch(DUE, promise).groups()  # type: ignore[union-attr]
    offset = timedelta(days=int(later or 0), hours=int(hours), minutes=int(minutes))
    return (grain.start(dataid) + offset).replace(tzinfo=zone)


def _grain(store: Store, job: lifecycle.Job) -> Grain:
    """A job's grain: its clock's; else its newest period's; else days."""
    if job.clock:
        return CLOCK_GRAINS[job.clock]
    named = [d for d in store.dataids_of_job(job.jobid) if grain_of(d)]
    return grain_of(max(named, key=natural_key)) if named else DAYS  # type: ignore[return-value]


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
        if not promise:
            continue
        grain = _grain(store, job)
        # the newest period whose chunk is due by now
        last = grain.name_of(now.replace(tzinfo=None))
        while due(last, promise, zone, grain) > now:
            last = grain.before(last)
        first = grain.name_of(grain.start(last) - timedelta(days=LOOKBACK_DAYS))
        periods = {last} | {
            d
            for d in store.dataids_of_job(jobid, (FAILED, RESUBMIT, RUNNING, HOLD))
            if grain_of(d) == grain and first <= d <= last
        }
        for dataid in sorted(periods, key=natural_key):
            statuses = sorted({status for _, status in store.out_status(jobid, dataid)})
            when = due(dataid, promise, zone, grain)
            if statuses == [READY] or (not statuses and str(when)[:19] < promised[jobid][:19]):
                continue  # READY, or due before the promise was made
            verdict = explain(store, jobid, dataid).verdict
            blocked = verdict.removeprefix("will not run: ")
            if verdict == "will run":
                blocked = "nothing: the job's next RunJob runs it (is it in cron?)"
            shown_due = when.strftime("%Y-%m-%d %H:%M")
            found.append(
                Late(jobid, dataid, shown_due, ",".join(statuses) or "no chunk yet", blocked)
            )
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
        problem = alerts.failures(alerts.deliver(list(urls), title, body, alerts.WARNING))
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
