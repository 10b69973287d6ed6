"""Clock datasets beyond the day: ``this_hour``, ``this_week`` (ISO), ``this_month``. Their
dataids sort naturally, a job claims the current period after any backfilled earlier one,
oldest first, and ``resubmit --from/--to`` backfills them. A fixed clock: ``at``."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataflow import dataids
from dataflow.dataids import natural_key, period, periods, system_zone
from dataflow.run.claim import claims, lifecycle, liveness
from dataflow.store import open_store
from support import (
    rows,
    script,
    starts,
    statuses,
    wait_for,
)

ZONE = system_zone()  # the clock's zone: these instants are noon-ish wall-clock times there


def local(*parts: int) -> datetime:
    return datetime(*parts, tzinfo=ZONE)


@pytest.mark.parametrize(
    ("clock", "at", "dataid"),
    [
        ("this_hour", local(2026, 11, 25, 7, 59), "2026-11-25T07"),
        ("this_hour", local(2026, 11, 25, 0, 0), "2026-11-25T00"),
        ("today", local(2026, 11, 25, 23, 59), "2026-11-25"),
        ("this_week", local(2026, 11, 25, 12), "2026-W48"),
        ("this_week", local(2026, 12, 28, 12), "2026-W53"),  # 2026 has 53 ISO weeks
        ("this_week", local(2027, 1, 3, 12), "2026-W53"),  # a Sunday: still 2026's last week
        ("this_week", local(2027, 1, 4, 12), "2027-W01"),
        ("this_week", local(2025, 12, 29, 12), "2026-W01"),  # a Monday of 2025 in 2026's W01
        ("this_week", local(2026, 3, 2, 12), "2026-W10"),
        ("this_month", local(2026, 11, 30, 23, 59), "2026-11"),
        ("this_month", local(2027, 1, 1, 0, 0), "2027-01"),
    ],
)
def test_the_period_of_a_clock(clock, at, dataid):
    assert period(clock, at) == dataid
    assert dataids.clock_of(dataid) == clock


def test_periods_across_a_year_boundary():
    assert periods("2026-W51", "2027-W02", 100) == [
        "2026-W51",
        "2026-W52",
        "2026-W53",
        "2027-W01",
        "2027-W02",
    ]
    assert periods("2025-W51", "2026-W01", 100) == ["2025-W51", "2025-W52", "2026-W01"]
    assert periods("2026-11", "2027-02", 100) == ["2026-11", "2026-12", "2027-01", "2027-02"]
    assert periods("2026-12-31T22", "2027-01-01T01", 100) == [
        "2026-12-31T22",
        "2026-12-31T23",
        "2027-01-01T00",
        "2027-01-01T01",
    ]
    # every hour of a day, whatever daylight saving time does to a zone's wall clock
    assert len(periods("2026-03-29T00", "2026-03-29T23", 100)) == 24
    assert len(periods("2026-10-25T00", "2026-10-25T23", 100)) == 24
    with pytest.raises(ValueError):
        periods("2025-W53", "2026-W01", 100)  # 2025 has 52 weeks
    with pytest.raises(ValueError):
        periods("2026-11", "2026-W48", 100)  # two kinds
    assert periods("2020-01-01T00", "2030-01-01T00", 1000) is None  # too many


CLOCK_NAMES = sorted(dataids.CLOCKS)
instants = st.datetimes(min_value=datetime(1990, 1, 1), max_value=datetime(2090, 1, 1)).map(
    lambda t: t.replace(tzinfo=UTC)
)


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(CLOCK_NAMES), instants, st.integers(0, 24 * 120), st.integers(0, 1000))
def test_periods_follow_the_clock_in_natural_order(clock, start, hours, inside):
    """Later instants have periods no earlier, by natural order and as plain text; the
    range from one instant's period to a later one's lists each period once, in order,
    with the period of every instant between them."""
    end = start + timedelta(hours=hours)
    first, last = period(clock, start), period(clock, end)
    assert natural_key(first) <= natural_key(last) and first <= last
    listed = periods(first, last, 10_000)
    assert listed[0] == first and listed[-1] == last
    assert listed == sorted(listed, key=natural_key) == sorted(listed)
    assert len(set(listed)) == len(listed)
    between = start + (end - start) * (inside / 1000)
    assert period(clock, between) in listed


def _register(cli, jobid: str, clock: str) -> None:
    cli.ok("createtables")
    cli.ok("register-dataset", f"{jobid}_out")
    cli.ok("register-job", jobid, "--in", clock, "--out", f"{jobid}_out")


CASES = [
    # clock, backfilled range (in the past: a backfill stops at the current period), the
    # fixed "now" of the claims, the claims in their order
    (
        "this_hour",
        ("2020-01-01T22", "2020-01-02T01"),
        local(2020, 1, 2, 3, 30),
        ["2020-01-01T22", "2020-01-01T23", "2020-01-02T00", "2020-01-02T01", "2020-01-02T03"],
    ),
    (
        "this_week",  # 2020, like 2026, has 53 ISO weeks
        ("2020-W52", "2021-W01"),
        local(2021, 1, 20, 12),
        ["2020-W52", "2020-W53", "2021-W01", "2021-W03"],
    ),
    (
        "this_month",
        ("2020-11", "2021-01"),
        local(2021, 3, 10, 12),
        ["2020-11", "2020-12", "2021-01", "2021-03"],
    ),
]


@pytest.mark.both_stores
@pytest.mark.parametrize(("clock", "backfill", "now", "claimed"), CASES)
def test_backfill_then_claims_in_natural_order(cli, address, clock, backfill, now, claimed):
    """``resubmit --from/--to`` creates the missed periods, RESUBMIT, in natural order;
    the job's claims at a fixed clock take them oldest first, then the current period."""
    _register(cli, "job", clock)
    unit = dataids.CLOCKS[clock][1]
    done = cli.ok("resubmit", "job", "--from", backfill[0], "--to", backfill[1])
    expected = [f"job {d}: none -> RESUBMIT (backfill of a missed {unit})" for d in claimed[:-1]]
    assert done.lines == [*expected, f"{len(expected)} chunks changed"]
    again = cli.ok("resubmit", "job", "--from", backfill[0], "--to", backfill[1])
    assert [line for line in again.lines if "backfill" in line] == []  # idempotent
    order = []
    with open_store(address) as store:
        job = lifecycle.load_job(store, "job")
        for _ in range(len(claimed) + 1):
            found = claims.claim(store, job, dry_run=True, at=now).claim
            assert claims.peek(store, job, at=now) == (found and found.dataid)
            if found is None:
                break
            order.append(found.dataid)
            with store.transaction():  # as its run would have ended
                store.put_out_status("job", found.dataid, job.outputs, "READY")
    assert order == claimed


@pytest.mark.both_stores
def test_an_hourly_job_runs_its_backfill_then_this_hour(cli, tmp_path):
    """RunJob for real, on the real clock: the backfilled hours, oldest first, then the
    current hour (read before and after, so that an hour turning meanwhile is allowed)."""
    _register(cli, "hourly", "this_hour")
    script(tmp_path, "hourly.sh", 'echo "$dataid" >> ran')
    cli.ok("resubmit", "hourly", "--from", "2026-10-25T00", "--to", "2026-10-25T03")
    before = period("this_hour")
    drained = cli.runjob("--all", "./hourly.sh")
    after = period("this_hour")
    assert drained.code == 0, drained
    ran = (tmp_path / "ran").read_text().split()
    assert ran[:4] == ["2026-10-25T00", "2026-10-25T01", "2026-10-25T02", "2026-10-25T03"]
    assert ran[4:] in ([before], [after])
    assert set(statuses(tmp_path, "hourly").values()) == {"READY"}
    assert "no suitable data" in cli.runjob("./hourly.sh").out or period("this_hour") != after


@pytest.mark.both_stores
def test_a_failed_earlier_period_waits_for_a_resubmit(cli, address):
    """A clock job's claim takes the current period and earlier ones resubmitted only: a
    period that failed and has a retry left is retried while it is current, not once its
    time has passed (nor is an earlier period done again); resubmitted, it comes first."""
    _register(cli, "job", "this_month")
    cli.ok("set", "job", "retries=1")
    march, may = local(2021, 3, 10, 12), local(2021, 5, 10, 12)
    with open_store(address) as store:
        job = lifecycle.load_job(store, "job")
        for at, status in ((local(2021, 2, 10, 12), "READY"), (march, "FAILED")):
            claim = claims.claim(store, job, at=at).claim  # run here, as a driver's chunk
            liveness.started(store, "job", claim.dataid, claim.runid, claim.token, 0)
            lifecycle.finish(store, "job", claim.dataid, status, runid=claim.runid)
            claim.lock.close()
            liveness.ended(store, "job", claim.dataid, claim.runid)
            wait_for(lambda d=claim.dataid: not liveness.is_live(store, "job", d))
        assert claims.claim(store, job, dry_run=True, at=march).claim.dataid == "2021-03"
        assert claims.claim(store, job, dry_run=True, at=may).claim.dataid == "2021-05"
        assert claims.peek(store, job, at=may) == "2021-05"
    cli.ok("resubmit", "job", "2021-03")
    with open_store(address) as store:
        job = lifecycle.load_job(store, "job")
        assert claims.claim(store, job, dry_run=True, at=may).claim.dataid == "2021-03"


@pytest.mark.both_stores
def test_a_clock_jobs_period_waits_for_its_other_input(cli, address):
    """A clock job that reads a dataset too: a period whose chunk of it is not READY is
    passed over for the next ones, in order, each claimed once."""
    cli.ok("createtables")
    cli.ok("register-dataset", "feed")
    cli.ok("register-dataset", "job_out")
    cli.ok("register-job", "job", "--in", "this_month", "feed", "--out", "job_out")
    cli.ok("resubmit", "job", "--from", "2021-01", "--to", "2021-04")
    cli.ok("ready", "feed", "2021-02", "2021-03", "2021-04", "2021-05")
    may = local(2021, 5, 10, 12)
    with open_store(address) as store:
        job = lifecycle.load_job(store, "job")
        assert claims.peek(store, job, at=may) == "2021-02"
        assert claims.claim(store, job, dry_run=True, at=may).claim.dataid == "2021-02"
        result = claims.claim(store, job, dry_run=True, at=may, count=3)
        assert [c.dataid for c in (result.claim, *result.more)] == ["2021-02", "2021-03", "2021-04"]


def test_a_backfill_stops_at_the_current_period(cli):
    _register(cli, "monthly", "this_month")
    before = period("this_month")
    cli.ok("resubmit", "monthly", "--from", "2020-01", "--to", "2999-12")
    after = period("this_month")
    made = [d for (d,) in rows(cli.cwd, "select dataid from datastatus where jobid='monthly'")]
    assert sorted(made) in (periods("2020-01", before, 10_000), periods("2020-01", after, 10_000))


def test_clock_mistakes_are_one_line(cli):
    _register(cli, "weekly", "this_week")
    for argv, message in [
        (
            ("resubmit", "weekly", "--from", "2026-11-01", "--to", "2026-11-30"),
            "job 'weekly' is a weekly job (IN this_week): --from and --to name weeks, like 20",
        ),
        (
            ("resubmit", "weekly", "--from", "2025-W52", "--to", "2025-W53"),
            "--from 2025-W52 --to 2025-W53: give two whole numbers or two dates YYYY-MM-DD",
        ),
        (("register-dataset", "this_hour"), "dataset name 'this_hour' must be usable"),
        (
            ("register-job", "two", "--in", "today", "this_hour", "--out", "weekly_out"),
            "job 'two' has two clocks as IN datasets: today and this_hour",
        ),
        (
            ("register-job", "made", "--in", "weekly_out", "--out", "this_month"),
            "'this_month' can only be an IN dataset",
        ),
    ]:
        refused = cli.utility(*argv)
        assert refused.code != 0 and refused.err.startswith("error: "), (argv, refused)
        assert message in refused.err and "Traceback" not in refused.err, (argv, refused)


def test_explain_names_the_clock(cli):
    _register(cli, "hourly", "this_hour")
    told = cli.ok("explain", "hourly", "2020-01-01T05").out
    assert "this_hour: not ready (this_hour is 20" in told
    assert "will not run: it is an hourly job and 2020-01-01T05 is not this_hour (20" in told
    cli.ok("resubmit", "hourly", "--from", "2020-01-01T05", "--to", "2020-01-01T05")
    assert "this_hour: ready" in cli.ok("explain", "hourly", "2020-01-01T05").out


def test_a_daily_job_runs_once_whatever_tz_each_run_has(cli, tmp_path):
    """UTC-12 and UTC+14 are always on different dates: one day, one chunk."""
    cli.ok("createtables")
    cli.ok("dml", "insert into dataset (datasetid) values ('daily_out')")
    cli.ok(
        "dml",
        "insert into job (jobid,itemtype,datasetid) values ('daily','IN','today'), "
        "('daily','OUT','daily_out')",
    )
    script(tmp_path, "daily.sh", 'echo "$dataid" >> starts')
    first = cli.runjob("./daily.sh", env={"TZ": "Etc/GMT+12"})
    second = cli.runjob("./daily.sh", env={"TZ": "Etc/GMT-14"})
    assert first.code == 0 and "Launching" in first.out, first
    assert "no suitable data" in second.out, second
    system_day = subprocess.run(
        ["date", "+%F"], env={"TZ": ":/etc/localtime"}, capture_output=True, text=True
    ).stdout.strip()
    assert starts(tmp_path) == [system_day]
