"""Dataids: the names of chunks, and the natural order they are claimed in."""

from __future__ import annotations

import re
from datetime import UTC

_RUNS = re.compile(r"([0-9]+)")  # ASCII digits only: int() would take any script's digits


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
    parts = []
    for i, part in enumerate(_RUNS.split(dataid)):
        if i % 2:  # a digit run
            digits = part.lstrip("0") or "0"
            parts.append(f"\x01{len(digits):03d}{digits}")
        else:
            parts.append(part)
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


def today() -> str:
    """The dataid of the special IN dataset ``today``: the date in the host's system time
    zone (``/etc/localtime``; UTC without one). Not ``$TZ``: cron and a login shell
    may set it differently, and one day must have one dataid, whoever asks."""
    from datetime import datetime

    try:
        from zoneinfo import ZoneInfo  # only a daily job pays for this import

        with open(SYSTEM_ZONE, "rb") as file:
            zone = ZoneInfo.from_file(file)
    except (OSError, ValueError):
        zone = UTC
    return datetime.now(zone).date().isoformat()
