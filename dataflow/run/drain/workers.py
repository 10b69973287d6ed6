"""A drain spread over processes: ``RunJob --all --parallel N`` of a job that runs as a
process of its own (not through Spark) on a shared store, with several cores, shares
its N slots among up to one worker a core (:mod:`.worker`). Each worker claims, runs
and records its chunks with its own connection and keeper, as that many RunJobs would
(their claims race safely); RunJob relays what they tell it as one drain's events,
passes a signal it gets on to each, and ends when they have.

One process doing every chunk's claim, start, copy and finish in turn was the limit of
``--parallel 4`` of short jobs on PostgreSQL: its four slots drained fewer chunks a
second than one slot did (benchmarks/findings.md, 24 and 25).
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import subprocess
from collections.abc import Callable, Iterator, Sequence

from ...errors import WorkerFailed
from ...store import Store
from ...store.address import Address
from ..claim.jobenv import JobEnv
from ..claim.lifecycle import Job
from ..process.runner import child_environment, python_command, signal_name, start_in_own_group
from ..process.suspend import starting
from . import recorder
from .drain import SCARCE
from .events import Event, Summary, Tally, from_fields
from .foreground import SIGNALS  # RunJob's, passed on to its workers

LINE_MAX = 1 << 20  # bytes of an event line (a long dataid's is a few KB)
# said once a drain, not once a worker (unusable: once a dataid)
ONCE = ("store", "cramped", "cap_full", "unusable")


def shares(store: Store, job: Job, parallel: int, workers: int | None = None) -> list[int]:
    """The slots of each of ``workers`` processes (None: one a core on a shared store, one
    on SQLite, whose writes are one file's) for a drain of ``parallel`` slots, never more
    than the chunks waiting; none (the drain runs in RunJob) when that is one."""
    if workers is None:
        workers = cores() if store.liveness == "lease" else 1
    workers = min(workers, parallel)
    if workers > 1:
        workers = min(workers, store.count_candidates(job.jobid))
    if workers < 2:
        return []
    return [parallel // workers + (n < parallel % workers) for n in range(workers)]


def cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """The signals a drain passes on held back: one that comes while a worker starts is
    handled once it is among the workers, and the worker is born with them held until it
    has set its own handlers (:func:`.worker.main`), as Python's would kill it."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


class WorkerDrain:
    """RunJob's side: starts the workers, relays their events, passes signals on. The
    same face as :class:`~.drain.Drain` (``run``, ``stop``, ``left``, ``summary``)."""

    def __init__(
        self,
        store: Store,
        address: Address,
        job: Job,
        env: JobEnv,
        argv: Sequence[str],
        *,
        slots: list[int],
        notify: Callable[[Event], None] = lambda event: None,
        validate: Sequence[str] | None = None,
    ):
        self.store, self.address, self.job, self.env = store, address, job, env
        self.argv, self.slots, self.notify, self.validate = list(argv), slots, notify, validate
        self._tally = Tally()
        self.summary = self._tally.summary
        self._workers: list[subprocess.Popen] = []
        self._said: set[tuple[str, str]] = set()
        self._error: WorkerFailed | None = None  # the first a worker said

    def left(self) -> int:
        return recorder.waiting(self.store, self.job.jobid)

    def stop(self, number: int) -> None:
        """A signal RunJob received: each worker gets it (and passes it to its jobs)."""
        self.summary.interrupted = self.summary.interrupted or number
        self.pass_on(number)

    def pass_on(self, number: int) -> None:
        """Each worker gets it (and passes it to its jobs; suspend.suspended)."""
        for worker in self._workers:
            with contextlib.suppress(OSError):
                worker.send_signal(number)

    def run(self) -> Summary:
        pipes: list[int] = []  # the reading end of each worker's events
        try:
            for slots in self.slots:
                if self.summary.interrupted:
                    break
                reading, writing = os.pipe()
                try:
                    with _signals_held(), starting():  # passed on once it is a worker
                        self._workers.append(self._start(slots, writing))
                except OSError as exc:  # short of processes, memory: fewer workers
                    os.close(reading)
                    if exc.errno not in SCARCE or not self._workers:
                        raise
                    why = f"cannot start a worker: {exc.strerror or exc}"
                    self.notify(Event("cramped", status=f"{why}; {len(self._workers)} at work"))
                    break
                finally:
                    os.close(writing)
                pipes.append(reading)
            self._relay(pipes)
        except BaseException:  # nothing more is told: the workers are stopped, not waited out
            self.stop(signal.SIGTERM)
            raise
        finally:
            for reading in pipes:
                with contextlib.suppress(OSError):
                    os.close(reading)
            ends = [worker.wait() for worker in self._workers]
        self._check(ends)
        return self.summary

    def _start(self, slots: int, events: int) -> subprocess.Popen:
        command = [*python_command("dataflow.run.drain.worker"), "--job", self.job.jobid]
        command += ["--parallel", str(slots), "--events", str(events), "--runjob", str(os.getpid())]
        command += ["--validate", self.validate[0]] if self.validate else []
        # the store's address, which may hold a password, and the job's decrypted
        # passwords go in its environment, never in its command line
        env = {**child_environment(self.env.variables), "DATAFLOW_DB": str(self.address)}
        return start_in_own_group([*command, "--", *self.argv], env=env, pass_fds=(events,))

    def _relay(self, pipes: list[int]) -> None:
        """Pass on what the workers tell until each has closed its end."""
        partial = dict.fromkeys(pipes, b"")  # a line not yet whole, by pipe
        with selectors.DefaultSelector() as selector:
            for reading in pipes:
                selector.register(reading, selectors.EVENT_READ)
            while partial:
                for key, _ in selector.select():
                    data = os.read(key.fd, 1 << 16)
                    if not data:
                        selector.unregister(key.fd)
                        del partial[key.fd]
                        continue
                    lines = (partial[key.fd] + data).split(b"\n")
                    partial[key.fd] = lines.pop()
                    if len(partial[key.fd]) > LINE_MAX:  # no event is this long: a run-on
                        lines.append(partial[key.fd])  # line written into the pipe
                        partial[key.fd] = b""
                    for line in lines:
                        self._event(line)

    def _event(self, line: bytes) -> None:
        try:
            text = line.decode("utf-8", "surrogatepass")
            fields = json.loads(text)
            if fields["kind"] == "error":
                code = fields["code"]
                code = code if type(code) is int and 0 < code < 256 else 1
                self._error = self._error or WorkerFailed(str(fields["message"]), code)
                return
            event = from_fields(fields)
            self._tally.count(event)
        except (ValueError, LookupError, TypeError, AttributeError):
            # not what a worker writes: another process of the user wrote into the pipe
            # (a job, through /proc/PPID/fd); the drain goes on, RunJob ends in an error
            shown = line[:60].decode("ascii", "backslashreplace")
            self._error = self._error or WorkerFailed(
                f"a worker of the drain of {self.job.jobid} sent a line that is not an event "
                f"(something else wrote into its pipe): {shown!r}",
                1,
            )
            return
        once = (event.kind, event.dataid if event.kind == "unusable" else "")
        if event.kind in ONCE:
            if once in self._said:
                return
            self._said.add(once)
        self.notify(event)

    def _check(self, ends: list[int]) -> None:
        """Raise what a worker said, else how one that was not stopped ended early."""
        if self._error is not None:
            raise self._error
        for code in ends:
            stopped = self.summary.interrupted and code in (0, 128 + self.summary.interrupted)
            if code == 0 or stopped:
                continue
            if code - 128 in SIGNALS:  # its own handler: what it ran is recorded
                raise WorkerFailed(
                    f"a worker of the drain of {self.job.jobid} was stopped by "
                    f"{signal_name(code - 128)} (not RunJob): it claimed nothing more and "
                    "its jobs under way were stopped and recorded",
                    1,
                )
            how = f"was killed by {signal_name(-code)}" if code < 0 else f"exited with {code}"
            raise WorkerFailed(
                f"a worker of the drain of {self.job.jobid} {how}; the chunks it left "
                "RUNNING are marked FAILED (abandoned) by the next run or 'utility recover'",
                1,
            )
