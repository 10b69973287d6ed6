"""Running a drain in the foreground of its process (RunJob, a worker, a Spark driver):
a signal the process gets stops the drain's claims and reaches its jobs; a terminal's ^Z
stops its jobs with it, and fg or bg lets them go on; at the end the keeper of its chunk
locks is closed, and the signals handled as before."""

from __future__ import annotations

import _signal as signal  # signal's C core: its module's enums import enum
import sys
from collections.abc import Sequence

from ..process import suspend
from .events import Summary

TYPE_CHECKING = False  # typing's flag, without importing typing (a run's start)
if TYPE_CHECKING:
    from .face import Draining

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def run(drain: Draining, early: Sequence[int] = ()) -> Summary:
    """``drain.run()``, a signal passed to ``drain.stop`` meanwhile; one of ``early``
    (signals that came before) stops it as it begins. A ^Z is handled by
    :mod:`..process.suspend`."""
    previous = {number: signal.signal(number, lambda n, _: drain.stop(n)) for number in SIGNALS}
    previous.update(suspend.install(drain.pass_on))
    for number in early[:1]:
        drain.stop(number)
    try:
        return drain.run()
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        keeper = sys.modules.get("dataflow.run.lease.keeper")  # imported by a lease's liveness
        if keeper is not None:  # (else none was started: a lock's run imports nothing of it)
            keeper.close_all()
