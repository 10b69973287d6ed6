"""Running a drain in the foreground of its process (RunJob, a worker, a Spark driver):
a signal the process gets stops the drain's claims and reaches its jobs; a terminal's ^Z
stops its jobs with it, and fg or bg lets them go on; at the end the keeper of its chunk
locks is closed, and the signals handled as before."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Sequence
from typing import Any

from . import keeper
from .events import Summary

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def run(drain: Any, early: Sequence[int] = ()) -> Summary:
    """``drain.run()``, a signal passed to ``drain.stop`` meanwhile; one of ``early``
    (signals that came before) stops it as it begins. A SIGTSTP is :func:`suspended`."""
    previous = {number: signal.signal(number, lambda n, _: drain.stop(n)) for number in SIGNALS}
    previous[signal.SIGTSTP] = signal.signal(signal.SIGTSTP, suspended(drain.pass_on))
    for number in early[:1]:
        drain.stop(number)
    try:
        return drain.run()
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        keeper.close_all()


def suspended(pass_on: Callable[[int], None]) -> Callable[[int, Any], None]:
    """A SIGTSTP handler (a terminal's ^Z): ``pass_on(SIGTSTP)`` to the processes of ours
    in process groups of their own, which the terminal does not reach, then this process
    stops as it would have; continued (fg, bg), it passes SIGCONT on. A job's timeout
    counts the time it was stopped."""

    def handler(number: int, _frame: Any) -> None:
        pass_on(signal.SIGTSTP)
        ours = signal.signal(signal.SIGTSTP, signal.SIG_DFL)
        try:
            os.kill(os.getpid(), signal.SIGTSTP)  # stopped here until continued
        finally:
            signal.signal(signal.SIGTSTP, ours)
            pass_on(signal.SIGCONT)

    return handler
