"""A terminal's ^Z (SIGTSTP) reaches our processes in process groups of their own (a
drain's jobs, a spread drain's workers, a folder's RunJob), which the terminal does not
reach: passed on to them, then this process stops; fg or bg lets them all go on."""

from __future__ import annotations

import _signal as signal  # signal's C core: its module's enums import enum
import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator

TYPE_CHECKING = False  # typing's flag, without importing typing (a run's start)
if TYPE_CHECKING:
    from typing import Any

_counting = threading.Lock()
_starting = 0  # processes of ours being started
_put_off = False  # a ^Z came while one was: acted on once they are started
_under_way = False  # a ^Z is being passed on, this process not yet continued
_continues = 0  # SIGCONTs this process has had


@contextlib.contextmanager
def starting() -> Iterator[None]:
    """A process of ours being started and noted where ``pass_on`` finds it: a ^Z that
    comes meanwhile would miss it (it would go on through the stop). It is put off until
    every start under way is noted, then comes again. A start in another thread while a
    ^Z is being passed on waits until this process is continued (fg, bg)."""
    global _starting
    while True:
        with _counting:
            _starting += 1
        if not _under_way:  # (read after the count: the handler sets it before it reads)
            break
        _start_ended()  # a stop it put off for this start comes again now
        while _under_way:
            time.sleep(0.01)
    try:
        yield
    finally:
        _start_ended()


def _start_ended() -> None:
    global _starting, _put_off
    with _counting:
        _starting -= 1
        again = not _starting and _put_off
        if again:
            _put_off = False
    if again:
        os.kill(os.getpid(), signal.SIGTSTP)


def install(pass_on: Callable[[int], None]) -> dict[int, Any]:
    """The handlers of a ^Z (:func:`suspended`) and of a SIGCONT set; the ones before."""
    return {
        signal.SIGTSTP: signal.signal(signal.SIGTSTP, suspended(pass_on)),
        signal.SIGCONT: signal.signal(signal.SIGCONT, _continued),
    }


def _continued(_number: int, _frame: Any) -> None:
    """This process is continued: a stop put off meanwhile is void (as the kernel drops a
    stop that is pending when a SIGCONT comes)."""
    global _put_off, _continues
    _put_off = False
    _continues += 1


def suspended(pass_on: Callable[[int], None]) -> Callable[[int, Any], None]:
    """A SIGTSTP handler: ``pass_on(SIGTSTP)`` to the processes of ours in groups of their
    own, then this process stops as it would have; continued (fg, bg), it passes SIGCONT
    on. A job's timeout counts the time it was stopped."""

    stopping = False  # between passing the stop on and this process's own stop

    def handler(number: int, _frame: Any) -> None:
        global _put_off, _under_way
        nonlocal stopping
        if stopping:  # a second ^Z before this process has stopped: the same stop
            return
        # the flags first, then the count (no lock: the handler runs in the main thread,
        # between two of its steps). A start in another thread that ends between these
        # two lines finds the flag and says it again: the same stop; one that begins
        # finds the stop under way and waits.
        stopping = _put_off = _under_way = True
        if _starting:
            stopping = _under_way = False
            return
        _put_off = False
        continues = _continues
        try:
            pass_on(signal.SIGTSTP)
            ours = signal.signal(signal.SIGTSTP, signal.SIG_DFL)  # (runs a SIGCONT's handler)
            try:
                if _continues == continues:  # else continued already: the stop is void
                    os.kill(os.getpid(), signal.SIGTSTP)  # stopped here until continued
            finally:
                signal.signal(signal.SIGTSTP, ours)
        finally:
            stopping = False  # a ^Z from now on is a new one
            try:
                pass_on(signal.SIGCONT)
            finally:
                _under_way = False

    return handler
