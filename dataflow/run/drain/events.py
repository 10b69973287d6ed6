"""What a drain tells of as it goes (:class:`Event`) and what it did (:class:`Summary`);
events as JSON lines, for a drain in another process (a Spark driver, a drain's worker)
to tell RunJob (:class:`EventWriter`, :func:`decode`, :class:`Tally`). The face every
drain shows the process that runs it is :class:`.face.Draining`."""

from __future__ import annotations

import contextlib
import os
import time
from collections import namedtuple

TYPE_CHECKING = False  # typing's flag, without importing typing (a run's start)
if TYPE_CHECKING:
    from ..process.runner import Outcome


class Event(
    namedtuple(
        "Event",
        "kind dataid claim outcome status counts live cap",
        defaults=("", None, None, "", (0, 0), 0, None),
    )
):
    """Something a person may want to see: ``abandoned``, ``cap_full``, ``launch``,
    ``ending`` (the job ended, its status not yet recorded), ``ended``, ``fenced`` (its
    result refused: status says why), ``store`` (the store failed for a while and the
    drain went on: status says how long and why), ``unusable`` (a candidate skipped:
    status says why) or ``cramped`` (a job could not start for want of descriptors,
    processes or memory, and the drain goes on with fewer at once: status says so).
    counts: OUT rows updated and IN rows released; live and cap: for ``cap_full``."""

    __slots__ = ()


def store_failed(error: BaseException, seconds: float) -> Event:
    """The ``store`` event: the store failed for ``seconds`` with ``error``, then answered."""
    why = " ".join(str(error).split())[:300]
    return Event("store", status=f"the store failed for {seconds:.1f} s ({why})")


class Summary:
    """What a drain did so far."""

    def __init__(self) -> None:
        # fenced: results refused, their chunks taken from them meanwhile
        self.started = self.ready = self.failed = self.running = self.fenced = 0
        self.cap_full = False
        self.interrupted: int | None = None
        self.last: Outcome | None = None
        self.began = time.monotonic()

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.began


class Tally:
    """A :class:`Summary` kept from the events of drains in other processes."""

    def __init__(self) -> None:
        self.summary = Summary()
        self.running: set[int] = set()  # the runids launched and not yet ended

    def count(self, event: Event) -> None:
        summary = self.summary
        if event.kind == "launch":
            summary.started += 1
            self.running.add(event.claim.runid)
        elif event.kind in ("ended", "fenced"):
            self.running.discard(event.claim.runid)
            if event.kind == "fenced":
                summary.fenced += 1
            else:
                summary.last = event.outcome
                if event.status == "READY":
                    summary.ready += 1
                else:
                    summary.failed += 1
        elif event.kind == "cap_full":
            summary.cap_full = True
        summary.running = len(self.running)


def _json():
    """The json module, imported by the drains that pass events between processes (a
    worker, a Spark driver) only: a plain RunJob never does (~1.5 ms of its start)."""
    import json

    return json


def encode(event: Event) -> str:
    """An event as one JSON line (a claim without its lock; dataids may hold escapes)."""
    claim = event.claim
    fields = {
        "kind": event.kind,
        "dataid": event.dataid,
        "claim": None
        if claim is None
        else [claim.dataid, claim.attempt, claim.runid, str(claim.logpath), claim.token],
        "outcome": None if event.outcome is None else list(event.outcome),
        "status": event.status,
        "counts": list(event.counts),
        "live": event.live,
        "cap": event.cap,
    }
    return _json().dumps(fields) + "\n"


# the types of an event's fields, and of its claim's and outcome's, as encode writes them
# (None: may be null; a tuple: any of those types)
_FIELDS = {"kind": str, "dataid": str, "status": str, "live": int, "cap": (int, None)}
_CLAIM = (str, int, int, str, str)
_OUTCOME = (int, (int, float), (int, float, None), (int, None), (str, None), list)
_OUTCOME += ((str, None),) * 4  # exception, cluster, error, said


def _typed(value: object, kind: type | tuple) -> bool:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if value is None:
        return None in kinds
    return any(type(value) is k or (k is float and type(value) is int) for k in kinds if k)


def _check(fields: object) -> None:
    """Raise ValueError unless ``fields`` are what :func:`encode` writes (a line written
    into the pipe by another process must not reach the report as an event)."""
    if not isinstance(fields, dict):
        raise ValueError("not an object")
    claim, outcome, counts = fields["claim"], fields["outcome"], fields["counts"]
    wrong = [name for name, kind in _FIELDS.items() if not _typed(fields[name], kind)]
    if claim is not None and (
        type(claim) is not list or len(claim) != 5 or not all(map(_typed, claim, _CLAIM))
    ):
        wrong.append("claim")
    if outcome is not None and (
        type(outcome) is not list
        or not 0 < len(outcome) <= len(_OUTCOME)
        or not all(map(_typed, outcome, _OUTCOME))
        or (len(outcome) > 5 and not all(type(item) is str for item in outcome[5]))
    ):
        wrong.append("outcome")
    if type(counts) is not list or len(counts) != 2 or not all(type(n) is int for n in counts):
        wrong.append("counts")
    if wrong:
        raise ValueError(f"not an event: {', '.join(wrong)}")


def decode(line: str) -> Event:
    """The event of a line :func:`encode` wrote; ValueError (or KeyError) for another."""
    return from_fields(_json().loads(line))


def from_fields(fields: object) -> Event:
    """The event of a line already read as JSON (a reader that looked at its kind)."""
    from ..claim.claims import Claim
    from ..process.runner import Outcome

    _check(fields)
    assert isinstance(fields, dict)
    claim = fields["claim"]
    if claim is not None:
        dataid, attempt, runid, logpath, token = claim
        claim = Claim(dataid, attempt, runid, None, logpath, token, ())
    outcome = fields["outcome"]
    if outcome is not None:
        outcome = Outcome(*outcome)
        outcome = outcome._replace(lost=tuple(outcome.lost))
    return Event(
        fields["kind"],
        fields["dataid"],
        claim,
        outcome,
        fields["status"],
        tuple(fields["counts"]),
        fields["live"],
        fields["cap"],
    )


class EventWriter:
    """The telling side: writes events to ``fd`` (a file opened to append, a pipe); a
    RunJob that is gone is no reason to stop."""

    def __init__(self, fd: int):
        self.fd = fd

    def __call__(self, event: Event) -> None:
        self.write(encode(event))

    def started(self) -> None:
        """The driver says which process it is (spark-submit's JVM is its parent)."""
        self.write(_json().dumps({"kind": "driver", "pid": os.getpid()}) + "\n")

    def error(self, message: str, exit_code: int = 2) -> None:
        """The drain cannot go on (the job script does not import, the store failed...)."""
        fields = {"kind": "error", "message": message, "code": exit_code}
        self.write(_json().dumps(fields) + "\n")

    def write(self, line: str) -> None:
        data = line.encode("utf-8", "surrogatepass")
        with contextlib.suppress(OSError):
            while data:  # a pipe may take a long line in parts
                data = data[os.write(self.fd, data) :]
