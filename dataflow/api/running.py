"""Running a job's chunks: :func:`run_job` (``RunJob SCRIPT``: one chunk), :func:`drain`
(``RunJob --all``) and :func:`preview` (``--dry-run``), over :class:`JobRun`, the one
place that wires a run: the passkey, the store, the job, its environment, its launch
plan, its listeners (alerts, OpenLineage) and the drain in the foreground."""

from __future__ import annotations

import threading
from collections import namedtuple
from collections.abc import Callable, Sequence

from .. import crypto
from ..errors import UsageError
from ..run import listeners
from ..run.claim import claims, jobenv, lifecycle
from ..run.drain import foreground, launch
from ..run.process import scripts
from ..store import locate, open_store
from ..store.address import for_job

TYPE_CHECKING = False  # typing's flag, without importing typing (a run's start)
if TYPE_CHECKING:
    from typing import Any

    from ..run.drain.events import Event, Summary
    from ..store import Store

STORE_ENV = (
    "DATAFLOW_DB"  # the store, as the job gets it (a file's absolute path, a URL without password)
)

Notify = Callable[["Event"], None]
Warn = Callable[[str], None]


class Drained(
    namedtuple(
        "Drained",
        [
            "jobid",  # str
            "every",  # bool: a drain (True) or one chunk
            "started",  # int: attempts launched (a chunk retried in the drain counts twice)
            "ready",  # int: attempts that ended READY
            "failed",  # int: attempts that ended FAILED
            "fenced",  # int: results refused: their chunks were taken from them meanwhile
            "cap_full",  # bool: max_parallel runs of the job were live: it did not start one
            "interrupted",  # int | None: the signal that stopped it
            "last",  # Outcome | None: the last attempt's outcome (its exit code, reason, log)
            "elapsed",  # float: seconds
            "waiting",  # int: a drain's chunks still waiting at its end (0 for one chunk)
            "warnings",  # tuple[str, ...]: what went wrong beside the runs (an alert not sent...)
        ],
    )
):
    """What :func:`run_job` or :func:`drain` did. (A named tuple, not a dataclass:
    ``dataclasses`` imports ``inspect``, ~5 ms of every RunJob's start.)"""

    __slots__ = ()

    @property
    def exit_code(self) -> int:
        """What RunJob exits with: 128+n when stopped by signal n, 1 when a result was
        fenced; one chunk's own exit code; a drain's 1 if any attempt FAILED, else 0."""
        if self.interrupted:
            return 128 + self.interrupted
        if self.fenced:
            return 1
        if not self.every:
            return self.last.exit_code if self.last else 0
        return 1 if self.failed else 0


class Preview(
    namedtuple(
        "Preview",
        [
            "jobid",  # str
            "dataid",  # str | None: None: nothing to do (or the job's max_parallel runs are live)
            "command",  # str: what would run the chunk, as a shell would read it
            "remote",  # str | None: the Spark Connect server it would be a client of, described
            "environment",  # dict[str, str]: the job's variables, passwords and tokens masked
            "cap_full",  # bool
            "live",  # int: live runs of the job, when cap_full
            "cap",  # int | None: its max_parallel, when cap_full
        ],
    )
):
    """What :func:`preview` found: the chunk a run would claim, and how it would run."""

    __slots__ = ()


def check_options(
    parallel: int | None = None,
    workers: int | None = None,
    batch: int | None = None,
    script: str | None = None,
) -> None:
    """Refuse a drain's numbers that cannot be (:class:`~dataflow.errors.UsageError`),
    and ``workers`` for a ``script`` run through Spark; before anything is opened."""
    if parallel is not None and parallel < 1:
        raise UsageError("--parallel needs a number >= 1")
    if batch is not None and batch < 1:
        raise UsageError("--batch needs a number >= 1")
    if workers is not None and workers < 1:
        raise UsageError("--workers needs a number >= 1")
    if workers is not None and parallel is None:
        raise UsageError("--workers spreads the slots of --parallel N: give --parallel too")
    if workers is not None and script is not None:
        _spread(script)


def _spread(script: str) -> None:
    """A script whose chunks may be spread over worker processes: not a Spark job."""
    if scripts.is_spark_job(script):
        raise UsageError(
            f"--workers is for a job run as a process a chunk, not through Spark: {script}"
        )


def environment(store: Store, job: lifecycle.Job, passkey: str | None, warn: Warn) -> jobenv.JobEnv:
    """A job's environment (all but the chunk's ``dataid``), built before any claim: a
    bad passkey or name is an error while nothing has changed. ``warn`` is told of each
    job row this host does not allow (ignored)."""
    env = jobenv.build(job, store.datasets(job.inputs + job.outputs), passkey)
    for ignored in env.ignored:
        warn(ignored)
    return env


class JobRun:
    """A script's run, wired: its store open, its job read, the job's environment and
    launch plan built; a context manager (the store closes at its end). Nothing is
    claimed until :meth:`drain`. What :func:`run_job`, :func:`drain` and :func:`preview`
    do in one call, RunJob does step by step, to print as it goes.

    ``passkey``: None reads ``PASSKEY`` or ``PASSKEY_FILE``. ``warn``: told each warning
    as it arises (a job row this host does not allow, an alert not sent); every one is
    also in the result's ``warnings``."""

    def __init__(
        self,
        script: str,
        args: Sequence[str] = (),
        *,
        db: str | None = None,
        passkey: str | None = None,
        warn: Warn | None = None,
    ):
        self.script, self.args = script, list(args)
        self.jobid = scripts.job_name(script)
        self.path = scripts.resolve(script)
        self.address = locate(db)
        self.passkey = crypto.read_passkey() if passkey is None else passkey
        self.warnings: list[str] = []
        self._warn = warn

    def __enter__(self) -> JobRun:
        self.store = open_store(self.address)
        try:
            self.job = lifecycle.load_job(self.store, self.jobid)
            self.env = environment(self.store, self.job, self.passkey, self.warn)
            self.env.variables[STORE_ENV] = for_job(self.address)  # the store it runs for
            self.plan = launch.plan(self.path, self.args, self.job, self.env)
        except BaseException as exc:
            self.store.__exit__(type(exc), exc, exc.__traceback__)  # a driver error, said
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        """Close the store; a driver error on its way out says what it means for the
        store (the disk is full...), as the store's own ``with`` does."""
        self.store.__exit__(*exc)

    def warn(self, message: str) -> None:
        self.warnings.append(message)
        if self._warn is not None:
            self._warn(message)

    def preview(self) -> Preview:
        """The chunk a run would claim now and its environment; nothing changes."""
        import shlex

        argv, remote = self.plan.argv, self.plan.remote
        result = claims.claim(self.store, self.job, command=shlex.join(argv), dry_run=True)
        found = Preview(self.jobid, None, shlex.join(argv), None, {}, False, 0, None)
        if result.cap_full:
            return found._replace(cap_full=True, live=result.live, cap=result.cap)
        if result.claim is None:
            return found
        from ..run.spark import sparkconnect

        dataid = result.claim.dataid
        shown = {}
        for name, value in sorted(self.env.for_chunk(dataid).items()):
            masked = "***" if name.lower().endswith("_password") and value else value
            shown[name] = sparkconnect.masked(value) if name == sparkconnect.REMOTE_ENV else masked
        described = sparkconnect.describe(remote) if remote else None
        return found._replace(dataid=dataid, remote=described, environment=shown)

    def drain(
        self,
        *,
        every: bool,
        parallel: int = 1,
        workers: int | None = None,
        batch: int = 0,
        validate: str | None = None,
        echo: bool = False,
        notify: Notify | None = None,
        started: Callable[[Summary, Callable[[], int]], None] | None = None,
    ) -> Drained:
        """Run the job's next chunk (``every`` false) or all its claimable ones,
        ``parallel`` at once (spread over ``workers`` processes; ``batch`` chunks a
        ``run_batch`` call), each checked by ``validate`` (a script) before READY;
        ``echo``: one chunk's output copied to this process's stdout too (RunJob's).
        ``notify`` is told every event; ``started``, before the first claim, the
        drain's live summary and a count of the chunks left (a progress bar's)."""
        if threading.current_thread() is not threading.main_thread():
            raise UsageError(
                "a run takes its process's signals (SIGINT, SIGTERM, SIGHUP): "
                "call it from the process's main thread"
            )
        if workers is not None:
            _spread(self.script)
        self.plan.check(self.script)
        checks = [scripts.resolve(validate, submitted=False)] if validate else None
        pager = listeners.Alerts(self.store, self.job)  # sends when the drain ends
        lineage = listeners.lineage(self.job, self.env, self.store)  # where configured
        running = launch.drain(
            self.plan, self.store, self.address, self.job, self.env, every=every,
            parallel=parallel, processes=workers, batch=batch, validate=checks, echo=echo,
            notify=lineage.watch(pager.watch(notify or _ignore)),
        )  # fmt: skip
        if started is not None:
            started(running.summary, running.left)
        try:
            summary = foreground.run(running)
        finally:
            for problem in (pager.send(), lineage.close()):  # every status told is committed
                if problem:
                    self.warn(problem)
        return self._drained(summary, running.left, every)

    def _drained(self, summary: Summary, left: Callable[[], int], every: bool) -> Drained:
        asked = every and (summary.started or summary.cap_full or summary.interrupted)
        return Drained(
            self.jobid, every, summary.started, summary.ready, summary.failed,
            summary.fenced, summary.cap_full, summary.interrupted, summary.last,
            summary.elapsed, left() if asked else 0, tuple(self.warnings),
        )  # fmt: skip


def _ignore(event: Any) -> None:
    pass


def run_job(
    script: str,
    args: Sequence[str] = (),
    *,
    db: str | None = None,
    passkey: str | None = None,
    validate: str | None = None,
    notify: Notify | None = None,
) -> Drained:
    """``RunJob SCRIPT ARGS...``: claim the job's next chunk, run ``script`` on it and
    record READY or FAILED. A FAILED chunk is a result (``failed``, ``exit_code``), not
    an error; nothing to do is ``started == 0``."""
    with JobRun(script, args, db=db, passkey=passkey) as job:
        return job.drain(every=False, validate=validate, notify=notify)


def drain(
    script: str,
    args: Sequence[str] = (),
    *,
    db: str | None = None,
    parallel: int | None = None,
    workers: int | None = None,
    batch: int | None = None,
    passkey: str | None = None,
    validate: str | None = None,
    notify: Notify | None = None,
) -> Drained:
    """``RunJob --all [--parallel N] [--workers W] [--batch K] SCRIPT``: run every
    claimable chunk of the job until none is left, each once."""
    check_options(parallel, workers, batch, script)
    with JobRun(script, args, db=db, passkey=passkey) as job:
        return job.drain(
            every=True, parallel=parallel or 1, workers=workers, batch=batch or 0,
            validate=validate, notify=notify,
        )  # fmt: skip


def preview(
    script: str, args: Sequence[str] = (), *, db: str | None = None, passkey: str | None = None
) -> Preview:
    """``RunJob --dry-run SCRIPT``: the chunk that would be claimed and its environment."""
    with JobRun(script, args, db=db, passkey=passkey) as job:
        return job.preview()
