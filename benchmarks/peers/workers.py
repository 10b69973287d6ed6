"""Shared by the peers' scripts (run by the peers' own Python, never by the toolkit):
their worker processes started together and timed until the queue is drained."""

import multiprocessing
import time
from collections.abc import Callable


def timed(
    work: Callable[[], None], workers: int, drained: Callable[[], bool] | None = None
) -> float:
    """Seconds from the start of ``workers`` forked processes running ``work`` until
    ``drained()`` first says so (looked at every 5 ms), or else until the last of them
    ends. A peer whose workers take seconds to stop after the queue is empty is timed to
    the drain, not to its shutdown."""
    start = time.perf_counter()
    procs = [multiprocessing.get_context("fork").Process(target=work) for _ in range(workers)]
    for proc in procs:
        proc.start()
    seconds = None
    while drained is not None and seconds is None and any(p.is_alive() for p in procs):
        if drained():
            seconds = time.perf_counter() - start
        else:
            time.sleep(0.005)
    for proc in procs:
        proc.join()
    return seconds if seconds is not None else time.perf_counter() - start
