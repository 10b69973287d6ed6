"""Dataids: the names of chunks, and the natural order they are claimed in."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, tzinfo

_DIGITS = "0123456789"  # ASCII digits only: int() would take any script's digits

# The longest dataid, dataset name or job name our commands write (docs/stores.md). A file
# dataset's chunk is a folder named after its dataid (file systems allow 255 bytes), and
# PostgreSQL's indexes hold a key of a few kilobytes. A longer one written by SQL is run
# and shown as any other.
MAX_NAME = 200  # characters


def check_name(what: str, name: str) -> None:
    """Refuse a name longer than :data:`MAX_NAME` (``what``: "dataid", "dataset name"...),
    in one line that shows its start, not all of it."""
    if len(name) > MAX_NAME:
        from .errors import UsageError

        raise UsageError(
            f"a {what} is at most {MAX_NAME} characters, not {len(name)} ('{name[:20]}...')"
        )


# The natural key's marker of a digit run (a code point) and the width of the run's length
# in it; the stores' SQL forms of the key use the same (dataflow/store/offers.py).
KEY_MARK, KEY_WIDTH = 1, 3


def natural_key(dataid: str) -> str:
    """A text key whose plain (byte-wise) order is the natural order of dataids.

    Digit runs compare by value (``2`` before ``10``, ``1.0`` before ``10.0``), so
    dates ``YYYY-MM-DD`` and shard numbers sort as people expect. Each digit run
    becomes a marker + its length (3 digits) + the digits without leading zeros; the
    text around it is kept. SQLite stores this key in an index, so the claim is an
    index seek in natural order. The marker is ``\x01`` rather than a printable
    character so that a number sorts before any text at the same place, as when
    comparing the runs one by one.
    """
    parts, start, end = [], 0, len(dataid)
    while start < end:  # (by hand: re's import is a tenth of a cron tick's RunJob)
        stop = start
        digits = dataid[start] in _DIGITS
        while stop < end and (dataid[stop] in _DIGITS) == digits:
            stop += 1
        if digits:
            run = dataid[start:stop].lstrip("0") or "0"
            parts.append(f"{chr(KEY_MARK)}{len(run):0{KEY_WIDTH}d}{run}")
        else:
            parts.append(dataid[start:stop])
        start = stop
    return "".join(parts)


def chunk_hash(jobid: str, dataid: str) -> int:
    """A 64-bit FNV-1a hash of ``jobid NUL dataid``: where a chunk's lock lives (a byte of
    the local lock file, a key of a shared store's run locks). A few lines instead of
    ``hashlib``, whose OpenSSL import costs ~4 ms of every RunJob's start-up."""
    value = 0xCBF29CE484222325
    for byte in f"{jobid}\0{dataid}".encode("utf-8", "surrogatepass"):
        value = ((value ^ byte) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return value


SYSTEM_ZONE = "/etc/localtime"

# The clock datasets: special IN datasets that are always ready, whose dataid is the
# current period of the host's clock. Each name: (what its jobs are called, its period).
CLOCKS = {
    "this_hour": ("hourly", "hour"),
    "today": ("daily", "day"),
    "this_week": ("weekly", "week"),
    "this_month": ("monthly", "month"),
}
# the dataids each clock names, all sorting naturally and as plain text
PERIODS = {
    "this_hour": r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}",  # 2026-11-25T07
    "today": r"[0-9]{4}-[0-9]{2}-[0-9]{2}",  # 2026-11-25
    "this_week": r"[0-9]{4}-W[0-9]{2}",  # 2026-W48, ISO 8601 weeks
    "this_month": r"[0-9]{4}-[0-9]{2}",  # 2026-11
}
FORMATS = "days YYYY-MM-DD, hours YYYY-MM-DDTHH, ISO weeks YYYY-Www or months YYYY-MM"


def described(clock: str) -> str:
    """What a job whose IN dataset is ``clock`` is called: "an hourly job", "a daily job"..."""
    kind = CLOCKS[clock][0]
    return f"{'an' if kind == 'hourly' else 'a'} {kind} job"


def system_zone() -> tzinfo:
    """The host's system time zone (``/etc/localtime``; UTC without one). Not ``$TZ``: cron
    and a login shell may set it differently, and one period must have one dataid, whoever
    asks."""
    try:
        from zoneinfo import ZoneInfo  # only a job run by a clock pays for this import

        with open(SYSTEM_ZONE, "rb") as file:
            return ZoneInfo.from_file(file)
    except (OSError, ValueError):
        return UTC


def period(clock: str, at: datetime | None = None) -> str:
    """The dataid of clock dataset ``clock`` at ``at`` (default: now; without a zone: a
    wall-clock time of the host's), in the host's system time zone: ``2026-11-25T07``, ``2026-11-25``, ``2026-W48`` (the ISO week, whose year
    is the ISO year: 2027-01-01 is in ``2026-W53``) or ``2026-11``."""
    zone = system_zone()
    at = at or datetime.now(UTC)
    local = (at if at.tzinfo else at.replace(tzinfo=zone)).astimezone(zone)
    if clock == "this_hour":
        return local.strftime("%Y-%m-%dT%H")
    if clock == "this_week":
        year, week, _ = local.isocalendar()
        return f"{year:04d}-W{week:02d}"
    if clock == "this_month":
        return local.strftime("%Y-%m")
    return local.date().isoformat()


def today() -> str:
    """The dataid of the special IN dataset ``today``: the date in the host's system time
    zone (see :func:`system_zone`)."""
    return period("today")


def clock_of(dataid: str) -> str | None:
    """The clock dataset whose dataids look like ``dataid``, if any."""
    import re

    return next((clock for clock, shape in PERIODS.items() if re.fullmatch(shape, dataid)), None)


def periods(first: str, last: str, limit: int) -> list[str] | None:
    """Every period from ``first`` to ``last``, two dataids of one clock, in natural order
    (each hour of a day is listed, whatever the time zone's daylight saving time does).
    None when more than ``limit``; ValueError when they are not two periods of one kind."""
    clock = clock_of(first)
    if clock is None or clock_of(last) != clock:
        raise ValueError(f"not two periods of one kind: {first}, {last}")
    if clock == "this_hour":
        low, high = (datetime.strptime(d, "%Y-%m-%dT%H") for d in (first, last))
        count = int((high - low).total_seconds() // 3600)
        names = (
            (low + timedelta(hours=n)).strftime("%Y-%m-%dT%H") for n in range(min(count, limit) + 1)
        )
        step = list(names)
    elif clock == "this_week":
        monday, sunday = (_week_start(d) for d in (first, last))
        count = (sunday - monday).days // 7
        step = [_week(monday + timedelta(weeks=n)) for n in range(min(count, limit) + 1)]
    elif clock == "this_month":
        if not all(1 <= int(d[5:]) <= 12 for d in (first, last)):
            raise ValueError(f"not two months: {first}, {last}")
        low_month, high_month = (int(d[:4]) * 12 + int(d[5:]) - 1 for d in (first, last))
        count = high_month - low_month
        months = range(low_month, low_month + min(count, limit) + 1)
        step = [f"{m // 12:04d}-{m % 12 + 1:02d}" for m in months]
    else:
        low_day, high_day = date.fromisoformat(first), date.fromisoformat(last)
        count = (high_day - low_day).days
        step = [(low_day + timedelta(n)).isoformat() for n in range(min(count, limit) + 1)]
    return step if count < limit else None


def _week_start(dataid: str) -> date:
    """The Monday of an ISO week; ValueError for W00, or W53 of a 52-week year."""
    return date.fromisocalendar(int(dataid[:4]), int(dataid[6:]), 1)


def _week(day: date) -> str:
    year, week, _ = day.isocalendar()
    return f"{year:04d}-W{week:02d}"
