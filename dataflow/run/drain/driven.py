"""One Spark driver for a whole drain: ``RunJob --all ./job.py`` when the job defines
``def run(spark, job)``. RunJob starts one ``spark-submit`` of the driver program
(:mod:`dataflow.driver.sparkdrain`), which claims, runs and finishes chunk after chunk
itself (a :class:`~.drain.Drain` whose runs are threads), and tells RunJob what happens
through an events file of JSON lines, which this module writes and reads.

The driver holds its chunks' locks: a driver that dies (``kill -9``, out of memory)
frees them, and its RUNNING chunks are recovered like any dead run's. Passwords reach
the driver in its environment, as they reach a job, never in its arguments.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Sequence

from ...errors import DriverFailed
from ...store import Store
from ...store.address import Address
from ..claim.jobenv import JobEnv
from ..claim.lifecycle import Job
from ..process.logs import driver_log_path
from ..process.runner import KILL_GRACE_S, Outcome, Run, child_environment, signal_name
from . import recorder
from .events import Event, Summary, Tally, from_fields

_POLL_S = 0.2


def is_running(pid: int) -> bool:
    """Is the process there and not a zombie?"""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            return file.read().rpartition(b")")[2].split()[0] != b"Z"
    except (OSError, IndexError):
        return False


def driver_log(files: str, jobid: str) -> str:
    """Where the drain's driver writes (Spark's own log): beside the job's chunk logs."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return driver_log_path(files, jobid, stamp, os.getpid())


class DriverDrain:
    """RunJob's side: starts the driver, relays its events, passes signals on. The same
    face as :class:`~.drain.Drain` (``run``, ``stop``, ``left``, ``summary``)."""

    def __init__(
        self,
        store: Store,
        address: Address,
        job: Job,
        env: JobEnv,
        launch: Callable[[list[str]], list[str]],
        *,
        parallel: int = 1,
        batch: int = 0,
        command: str = "",
        notify: Callable[[Event], None] = lambda event: None,
        validate: Sequence[str] | None = None,
        role: str = "Spark driver",
    ):
        self.role = role  # or "Spark Connect client": what the messages call it
        self.store, self.address, self.job, self.env = store, address, job, env
        self.launch, self.parallel, self.command = launch, parallel, command
        self.batch = batch  # chunks per call of run_batch (0: the job's setting, or default)
        self.notify, self.validate = notify, validate
        self._tally = Tally()  # the summary, from the driver's events
        self.summary = self._tally.summary
        self.log = driver_log(store.files, job.jobid)
        self._run: Run | None = None
        self._error: str | None = None
        self._driver: int | None = None  # the driver's pid, once it said so

    def left(self) -> int:
        return recorder.waiting(self.store, self.job.jobid)

    def stop(self, number: int) -> None:
        """A signal RunJob received: the driver gets it (its chunks end FAILED)."""
        self.summary.interrupted = self.summary.interrupted or number
        if self._run is not None:
            self._run.signal(number)

    def pass_on(self, number: int) -> None:
        if self._run is not None:
            self._run.pass_on(number)  # the driver's group (suspend.suspended)

    def run(self) -> Summary:
        folder = tempfile.mkdtemp(prefix="dataflow-driver-")
        try:
            return self._drive(os.path.join(folder, "events"))
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def _options(self, events: str) -> list[str]:
        options = ["--job", self.job.jobid]  # the store's address, which may hold a
        # password, goes in the environment (DATAFLOW_DB), never in the command line
        options += ["--parallel", str(self.parallel), "--events", events]
        if self.batch:
            options += ["--batch", str(self.batch)]
        options += ["--log", str(self.log), "--command", self.command]
        if self.validate:
            options += ["--validate", *self.validate[:1]]
        return [*options, "--"]

    def _drive(self, events: str) -> Summary:
        open(events, "wb").close()
        run = Run(
            self.launch(self._options(events)),
            {**child_environment(self.env.variables), "DATAFLOW_DB": str(self.address)},
            log_path=self.log,
            secrets=self.env.secrets,
            echo=False,
        )
        self._run = run  # before it starts: a ^Z meanwhile is passed on once it has
        run.start()
        if self.summary.interrupted:  # the signal came while it was starting
            run.signal(self.summary.interrupted)
        ended: list[Outcome] = []
        waiter = threading.Thread(target=lambda: ended.append(run.wait()), daemon=True)
        waiter.start()
        offset = 0
        while waiter.is_alive():
            waiter.join(_POLL_S)
            offset = self._relay(events, offset)
        # spark-submit's JVM may end first (a signal reaches both): the driver's own last
        # records still count, for a while
        deadline = time.monotonic() + KILL_GRACE_S
        while self._driver and is_running(self._driver) and time.monotonic() < deadline:
            time.sleep(_POLL_S / 4)
            offset = self._relay(events, offset)
        if self._driver and is_running(self._driver):
            with contextlib.suppress(OSError):
                os.kill(self._driver, signal.SIGKILL)
        self._relay(events, offset)
        outcome = ended[0] if ended else Outcome(1)
        self._check(outcome)
        return self.summary

    def _relay(self, events: str, offset: int) -> int:
        """Pass on the complete lines written since ``offset``; the new offset."""
        with open(events, "rb") as file:
            file.seek(offset)
            data = file.read()
        done = data.rfind(b"\n") + 1
        for line in data[:done].decode("utf-8", "surrogatepass").splitlines():
            self._event(line)
        return offset + done

    def _event(self, line: str) -> None:
        fields = json.loads(line)
        if fields["kind"] == "error":
            self._error = fields["message"]
            return
        if fields["kind"] == "driver":
            self._driver = fields["pid"]
            return
        event = from_fields(fields)
        self._tally.count(event)
        self.notify(event)

    def _check(self, outcome: Outcome) -> None:
        """A driver that ended without draining is an error, unless RunJob stopped it."""
        if self._error:
            raise DriverFailed(
                self.job.jobid, self._error, self.log, self.summary.started > 0, self.role
            )
        if self.summary.interrupted or (outcome.returncode == 0 and not self._tally.running):
            return
        code = outcome.returncode
        how = f"was killed by {signal_name(-code)}" if code < 0 else f"exited with code {code}"
        if code > 128:
            how += f" ({signal_name(code - 128)})"
        left = len(self._tally.running)
        if left:
            how += (
                f" with {left} chunk{'s' if left > 1 else ''} RUNNING (marked FAILED, "
                "abandoned, by the next run or 'utility recover')"
            )
        raise DriverFailed(self.job.jobid, how, self.log, self.summary.started > 0, self.role)
