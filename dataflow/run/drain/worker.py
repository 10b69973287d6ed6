"""One worker of a drain spread over processes (:mod:`.workers`): ``python -m
dataflow.run.drain.worker --job J --parallel K --events FD --runjob PID -- SCRIPT [ARGS...]``,
started by RunJob. It drains the job's chunks as a ``RunJob --all --parallel K`` would (its own
connection, keeper and chunk locks; the same claims, which other workers race safely)
and tells RunJob what happens as JSON lines on descriptor FD, RunJob reporting it all
as one drain. The job's variables are in its environment (RunJob decrypted them), the
store's address in ``DATAFLOW_DB``; nothing secret is in its arguments.

It stops claiming once RunJob is gone (its chunks under way still end and are recorded)
and passes a signal it gets to its jobs, as RunJob does.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from ...errors import DataflowError, StoreUnavailable
from ...store import DRIVER_ERRORS, Store, open_store
from ...store.address import Address, for_job, liveness_timeout, locate
from ..claim import claims, jobenv, lifecycle, patience
from ..process import processes
from . import foreground
from .drain import Drain
from .events import EventWriter, store_failed
from .foreground import SIGNALS


def _options(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m dataflow.run.drain.worker")
    parser.add_argument("--job", required=True)
    parser.add_argument("--parallel", type=int, default=1)
    parser.add_argument("--events", type=int, required=True)  # a descriptor: the pipe
    parser.add_argument("--runjob", type=int)  # RunJob's process: gone, no more claims
    parser.add_argument("--validate")
    parser.add_argument("argv", nargs=argparse.REMAINDER)
    options = parser.parse_args(argv)
    options.argv = options.argv[1:] if options.argv[:1] == ["--"] else options.argv
    return options


def main(argv: list[str]) -> int:
    # RunJob starts a worker with these signals blocked, so that one it passes on while
    # the worker starts is kept until now, not taken by Python's default (death, or
    # KeyboardInterrupt); its drain stops as it begins
    early: list[int] = []
    processes.keep_exit_codes()
    for number in SIGNALS:
        signal.signal(number, lambda n, _: early.append(n))
    signal.pthread_sigmask(signal.SIG_UNBLOCK, SIGNALS)
    options = _options(argv)
    events = EventWriter(options.events)
    # RunJob's pid as it said it: one that died as this worker started was not its parent
    # (a worker adopted meanwhile would take its new parent for RunJob, and drain alone)
    parent = options.runjob or os.getppid()
    try:
        return _drain(options, events, parent, early)
    except DataflowError as exc:
        events.error(str(exc), exc.exit_code)
        return exc.exit_code
    except tuple(DRIVER_ERRORS) as exc:
        events.error(f"store error: {' '.join(str(exc).split())}", 3)
        return 3
    except (OSError, RuntimeError) as exc:  # no process or thread left for its keeper...
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        events.error(f"cannot drain {options.job}: {why}", 2)
        return 2


def _opened(address: Address, events: EventWriter, early: list[int]) -> Store | None:
    """The store RunJob opened a moment ago. A session the server refuses now (its
    connections all taken for a moment, a restart) is asked for again, with backoff, for
    the liveness bound, and the wait is said as any failure of the store that passed.
    None: a signal came first."""

    def failed(exc: BaseException, seconds: float) -> None:
        if not early:
            events(store_failed(exc, seconds))

    store = patience.retried(
        lambda: None if early else open_store(address),
        lambda exc: isinstance(exc, StoreUnavailable),
        liveness_timeout(),
        failed,
    )
    assert store is None or isinstance(store, Store)
    return store


def _drain(options: argparse.Namespace, events: EventWriter, parent: int, early: list[int]) -> int:
    address = locate()  # $DATAFLOW_DB, set by RunJob
    store = _opened(address, events, early)
    if store is None:
        return 128 + early[0]
    with store:
        # a session the server ends as it starts (RunJob's drain is under way) costs nothing
        job = patience.asked(store, lambda: lifecycle.load_job(store, options.job))
        assert isinstance(job, lifecycle.Job)
        # its keeper started before its threads, outside any transaction: a holder slow
        # to start never leaves this session idle inside one
        patience.patiently(store, lambda: claims.prepare(store, job.jobid))
        env = jobenv.inherited(job)
        env.variables["DATAFLOW_DB"] = for_job(address)  # as RunJob gives it to a job
        drain = Drain(
            store,
            job,
            env,
            options.argv,
            parallel=max(options.parallel, 1),
            echo=False,
            notify=events,
            validate=[options.validate] if options.validate else None,
            healthy=lambda: os.getppid() == parent,  # RunJob gone: no more claims
        )
        summary = foreground.run(drain, early)  # (a signal that came as it started: stopped)
    return 128 + summary.interrupted if summary.interrupted else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
