"""The read-only answers of the server, each what a CLI command prints with ``--json``
(``utility status``, ``runs``, ``history``, ``board``), the board page as ``utility
board`` writes it (live), and a run's log as ``utility log`` prints it (masked when it
was written). Each opens the store read-only, answers, and closes it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from ..errors import Refused, UsageError
from ..ops import board, status
from ..run.claim import lifecycle
from ..run.process import logs, storedlogs
from ..store import locate, now, open_store, shown

RUNS_LIMIT = 20  # as `utility runs`
HISTORY_LIMIT = 50  # as `utility history`


def as_json(value: object) -> bytes:
    """JSON as the CLI's ``--json`` prints it (values it cannot write as their text)."""
    return json.dumps(value, indent=2, default=str).encode()


def count(query: Mapping[str, str], name: str, default: int | None) -> int | None:
    """A whole-number parameter of a query (``?limit=20``), at least 1."""
    text = query.get(name)
    if text is None or text == "":
        return default
    if not text.isdigit() or int(text) < 1:
        raise UsageError(f"{name}={text!r}: give a whole number, at least 1")
    return int(text)


def job_status(db: str | None, query: Mapping[str, str]) -> bytes:
    with open_store(locate(db), readonly=True) as store:
        return as_json(status.job_status(store, query.get("job") or None))


def runs(db: str | None, query: Mapping[str, str]) -> bytes:
    limit = count(query, "limit", RUNS_LIMIT)
    with open_store(locate(db), readonly=True) as store:
        return as_json(store.runs(limit))


def history(db: str | None, query: Mapping[str, str]) -> bytes:
    job, dataid = query.get("job") or None, query.get("dataid") or None
    limit = count(query, "limit", HISTORY_LIMIT)
    with open_store(locate(db), readonly=True) as store:
        if job:
            lifecycle.load_job(store, job)  # an unknown job is an error, not "no rows"
        return as_json(store.history(job, dataid, limit))


def log(db: str | None, jobid: str, dataid: str, query: Mapping[str, str]) -> bytes:
    attempt = count(query, "attempt", None)
    with open_store(locate(db), readonly=True) as store:
        try:
            return storedlogs.read(store, logs.run_of(store, jobid, dataid, attempt))
        except UsageError as exc:  # no such run, or its log is on a host that sent none
            raise Refused(404, str(exc)) from None


def board_json(db: str | None, query: Mapping[str, str]) -> bytes:
    last = count(query, "last", board.DEFAULT_LAST)
    with open_store(locate(db), readonly=True) as store:
        return as_json(board.as_json(board.collect(store, query.get("job") or None, last)))


def actions(db: str | None, query: Mapping[str, str]) -> bytes:
    """What was done to chunks by hand (``utility actions --json``)."""
    job, dataid = query.get("job") or None, query.get("dataid") or None
    limit = count(query, "limit", HISTORY_LIMIT)
    with open_store(locate(db), readonly=True) as store:
        if job:
            lifecycle.known(store, job)  # an unknown job is an error, not "no rows"
        return as_json(store.actions(job, dataid, limit))


def board_page(db: str | None, query: Mapping[str, str], live: float, acts: bool = False) -> bytes:
    """The status board, refreshing itself every ``live`` seconds; ``acts``: with the
    buttons of its actions (the server takes write tokens)."""
    last = count(query, "last", board.DEFAULT_LAST)
    address = locate(db)
    with open_store(address, readonly=True) as store:
        grid = board.collect(store, query.get("job") or None, last)
    page = board.render(grid, generated=now()[:19], source=shown(address), live=live, acts=acts)
    return page.encode()
