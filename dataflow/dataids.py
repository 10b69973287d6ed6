"""Dataids: the names of chunks, and the natural order they are claimed in."""

from __future__ import annotations

import re
from datetime import date

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


def today() -> str:
    """The dataid of the special IN dataset ``today``: the local date."""
    return date.today().isoformat()
