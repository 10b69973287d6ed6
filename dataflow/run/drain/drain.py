"""Running a job's chunks: one (a plain ``RunJob``) or every claimable one (``--all``),
up to ``parallel`` at once. The store is used from this thread only; its job processes
are watched by one thread (:mod:`..process.watcher`), and a drain of many chunks records their
ends in another (:mod:`.recorder`). While its jobs are short (the last ended within
:data:`AHEAD_BELOW_S`) and every slot is busy, a drain claims its next chunks ahead in one
transaction, to start each the moment a slot frees: one a slot, or :data:`MANY_AHEAD`
after a job that ended within :data:`MANY_BELOW_S`. Nothing here prints: progress is
reported through ``notify(Event)``."""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import time
from _queue import Empty, SimpleQueue  # queue's C core (queue's module imports heapq)
from collections.abc import Callable

from ... import layout
from ...errors import DataflowError, ScriptError, StoreUnavailable
from ...store import DRIVER_ERRORS, Store
from ..claim import claims, liveness, recovery
from ..claim.claims import Claim
from ..claim.jobenv import JobEnv
from ..claim.lifecycle import FAILED, READY, Job
from ..process.locks import make_room
from ..process.output import start_thread
from ..process.processes import ATTEMPT_VARIABLE, STORE_VARIABLE, VARIABLE
from . import drainclaim, recorder
from .events import Event, Summary, store_failed

TYPE_CHECKING = False  # typing's flag, without importing typing (a run's start)
if TYPE_CHECKING:
    from typing import Any

    from ..process.runner import Run
    from ..process.watcher import Watcher

CAP_POLL_S = 1.0  # how often a drain blocked by max_parallel looks again
RECOVER_EVERY_S = 30.0  # how often a drain looks for dead runs of its job
AHEAD_BELOW_S = 1.0  # jobs that end this quickly: their drain claims chunks ahead
MANY_BELOW_S, MANY_AHEAD = 0.1, 4  # jobs this quick: 4 chunks a slot ahead, not one
# a job that cannot start for want of these makes the drain go on with the jobs it runs
SCARCE = {errno.EMFILE, errno.ENFILE, errno.EAGAIN, errno.ENOMEM}


class Drain:
    """Claims and runs chunks of ``job`` until ``limit`` runs started (None: all)."""

    def __init__(
        self,
        store: Store,
        job: Job,
        env: JobEnv,
        argv: list[str],
        *,
        parallel: int = 1,
        limit: int | None = None,
        echo: bool = True,
        notify: Callable[[Event], None] = lambda event: None,
        validate: list[str] | None = None,
        run_with: Callable[..., Run] | None = None,
        in_process: Callable[[Claim, dict[str, str]], Run] | None = None,
        in_batch: Callable[[list[tuple[Claim, dict[str, str]]]], Any] | None = None,
        batch: int = 1,
        healthy: Callable[[], bool] = lambda: True,
    ):
        self.store, self.job, self.env, self.argv = store, job, env, argv
        # what runs the job's argv (None: a job process, runner.Run; a SparkRun for a cluster)
        self.run_with = run_with
        self.validate = validate  # a check run after each successful job, same environment
        # a chunk's run inside this process (a Spark driver's), instead of a job process
        self.in_process, self.healthy = in_process, healthy
        # chunks claimed together and run as one (a driver's BatchRun): up to ``batch``;
        # then ``parallel`` counts batches, and max_parallel still counts chunks
        self.in_batch, self.batch = in_batch, max(batch, 1)
        self.parallel, self.limit, self.echo, self.notify = parallel, limit, echo, notify
        self.summary, self._ahead_at = Summary(), 0.0
        self._active: dict[int, tuple[Claim, Run]] = {}
        # copies the output of every job process, waits for them: made with the first
        # (a driver's drain starts its checks from its runs' threads: under a lock)
        self._watcher: Watcher | None = None
        self._watcher_made = threading.Lock()
        # ("ended", (claim, outcome)) from the watcher or a run's thread, ("recorded",
        # Ended) and ("say", Event) from the recorder's: acted on in the drain's thread
        self._events: SimpleQueue[tuple[str, Any]] = SimpleQueue()
        self._recorder: recorder.Recorder | None = None  # None: ends are recorded here
        self._recording = 0  # ends handed to the recorder, not yet recorded
        self._ahead: list[Claim] = []  # claimed while every slot was busy (at _ahead_at)
        self._per_slot = 0  # chunks claimed ahead a slot, by how quickly the last job ended
        self._dry = False  # no claim ahead: the last found none, or the job has a cap
        self._recovered_at: float | None = None  # when dead runs were last looked for
        self.failure: BaseException | None = None  # a store error that outlasted our patience
        self._said_store = self._said_cramped = False
        self._owner = threading.current_thread()  # the drain's: it notifies and uses the store
        self._unusable_said: set[str] = set()  # dataids of candidates skipped, warned of
        # where runs stage their file outputs, published by their finish (layout.py); a
        # driver's drain has the job's variables in its own environment
        self.tables = layout.output_tables(job.outputs, {**os.environ, **env.variables})
        if (limit is None or limit > 1) and in_process is None and in_batch is None:
            self._recorder = recorder.Recorder(
                store, job, self.tables, self._failed, lambda e: self._events.put(("recorded", e))
            )

    def stop(self, number: int) -> None:
        """Stop claiming and pass signal ``number`` to every running job (a signal handler)."""
        self.summary.interrupted = self.summary.interrupted or number
        for _, run in list(self._active.values()):
            run.signal(number)

    def pass_on(self, number: int) -> None:
        for _, run in list(self._active.values()):
            run.pass_on(number)

    def left(self) -> int:
        """Chunks still waiting for this job (approximate: stale candidates count too)."""
        return self.store.count_candidates(self.job.jobid)

    def run(self) -> Summary:
        if self.in_process is None:  # descriptors for every slot's job, before the first
            make_room(self.parallel)  # claim takes a lock descriptor for each slot's chunk
        try:
            return self._drain()
        finally:
            claims.release_all(self.store, self.job.jobid, self._ahead)  # never started
            if self._watcher is not None:
                self._watcher.close()
            if self._recorder is not None:
                self._recorder.close()
            recovery.wait_discarded()  # what its claims' recoveries left to delete

    def _drain(self) -> Summary:
        cap_reported = False
        while True:
            blocked = self._start_more()
            if blocked and not cap_reported:
                self.notify(blocked)
            cap_reported = cap_reported or blocked is not None
            if not self._active and not self._recording:
                if self.failure is not None:  # every run it started is recorded (or lost)
                    raise self.failure
                if blocked and self.limit is None and not self.summary.interrupted:
                    time.sleep(CAP_POLL_S)
                    continue
                return self.summary
            if self._active and self._room_ahead():
                self._ahead = self._claim_some(self._wanted_ahead(), ahead=True)[0]
                self._ahead_at = time.monotonic()
            with contextlib.suppress(Empty):  # a timeout: signal handlers run promptly
                self._take(self._events.get(timeout=0.5))

    def _failed(self, error: BaseException, seconds: float) -> None:
        """The store failed for ``seconds`` and then answered: said once a drain."""
        if not self._said_store:
            self._said_store = True
            event = store_failed(error, seconds)
            if threading.current_thread() is self._owner:
                self.notify(event)
            else:
                self._events.put(("say", event))

    def _start_more(self) -> Event | None:
        """Claim and start runs while there is room; the cap-full event if that stopped us."""
        for _ in range(2):  # short of descriptors: fewer at once; again if none runs
            try:
                return self._start_some()
            except ScriptError as exc:  # given up once no run is under way nor recording
                if exc.errno not in SCARCE or not (self._active or self._ahead or self._recording):
                    raise
                self._cramped(str(exc))
                if self._active or self._recording:
                    return None
        return None

    def _start_some(self) -> Event | None:
        while (
            not self.summary.interrupted
            and self.failure is None
            and self._units() < self.parallel
            and (self.limit is None or self.summary.started < self.limit)
            and self.healthy()  # an engine that is gone would fail every chunk claimed
        ):
            if self._ahead and liveness.lapsing(self.store, self._ahead_at):
                claims.release_all(self.store, self.job.jobid, self._ahead)
            if self._ahead:  # claimed while every slot was busy
                self._launch(self._ahead.pop(0))
                continue
            # a batch of chunks for a run of in_batch; else a chunk for each free slot
            wanted = self.batch if self.in_batch is not None else self.parallel - self._units()
            if self.limit is not None:
                wanted = min(wanted, self.limit - self.summary.started)
            claimed, blocked = self._claim_some(wanted)
            if len(claimed) > 1 and self.in_batch is not None:
                self._launch_batch(claimed)
            else:
                self._launch_each(claimed)
            if blocked is not None or len(claimed) < wanted:
                return blocked
        return None

    def _cramped(self, why: str) -> None:
        self.parallel = max(self._units(), 1)
        claims.release_all(self.store, self.job.jobid, self._ahead)  # their descriptors
        if not self._said_cramped:
            self._said_cramped = True  # said once a drain
            self.notify(Event("cramped", status=f"{why}; at most {self.parallel} jobs at once"))

    def _room_ahead(self) -> bool:
        """May chunks be claimed ahead: every slot busy with short jobs, the last found."""
        return (
            not self._ahead
            and self._per_slot > 0
            and not self._dry
            and self.in_batch is None
            and not self._said_cramped  # short of descriptors: none held for later
            and self.failure is None
            and not self.summary.interrupted
            and self._units() >= self.parallel
            and (self.limit is None or self.summary.started < self.limit)
        )

    def _wanted_ahead(self) -> int:
        """Chunks for each slot, within the limit."""
        wanted = self.parallel * self._per_slot
        return wanted if self.limit is None else min(wanted, self.limit - self.summary.started)

    def _units(self) -> int:
        """What runs now, as ``parallel`` counts it: a batch of chunks is one."""
        return len({getattr(run, "unit", id(run)) for _, run in self._active.values()})

    def _claim_some(self, wanted: int, ahead: bool = False) -> tuple[list[Claim], Event | None]:
        """Up to ``wanted`` chunks in natural order, claimed in one transaction (each its
        own claim); and the cap-full event if ``max_parallel`` (which counts chunks)
        stopped us (not said of a claim ``ahead``: its slot is not free yet)."""
        if self.summary.interrupted:
            return [], None
        now = time.monotonic()
        if recover := self._recovered_at is None or now - self._recovered_at > RECOVER_EVERY_S:
            self._recovered_at = now
        try:
            result = drainclaim.claim_patiently(
                self.store,
                self.job,
                command=" ".join(self.argv),
                recover_dead=recover,
                count=wanted,
                idle=lambda: not (self._active or self._recording or self.summary.interrupted),
                failed=self._failed,
            )
        except (StoreUnavailable, *DRIVER_ERRORS) as exc:  # no more claims; the runs
            if not ahead:  # under way finish and are recorded, then it is raised
                self.failure = exc  # (a claim ahead is tried again once a slot frees)
            return [], None
        except OSError as exc:  # a chunk's lock cannot be opened: the runs under way go on
            if exc.errno not in SCARCE or not self._active:
                raise
            self._cramped(f"cannot claim a chunk: {exc.strerror or exc}")
            return [], None
        for dataid in result.abandoned:
            self.notify(Event("abandoned", dataid))
        fresh = {d: why for d, why in result.unusable if d not in self._unusable_said}
        self._unusable_said.update(fresh)  # said once per drain
        for dataid, why in fresh.items():
            self.notify(Event("unusable", dataid, status=why))
        claimed = [result.claim, *result.more] if result.claim is not None else []
        self._dry = not claimed or bool(result.cap)  # capped: one ahead holds a place idle
        if result.cap_full and not ahead:
            self.summary.cap_full = True
            self._recovered_at = None  # dead runs may fill the cap: look next time
            return claimed, Event("cap_full", live=result.live, cap=result.cap)
        return claimed, None

    def _launch_each(self, claimed: list[Claim]) -> None:
        """Start each claim in turn; those not started when one fails to are given back."""
        for n, claim in enumerate(claimed):
            try:
                self._launch(claim)
            except BaseException:
                claims.release_all(self.store, self.job.jobid, claimed[n + 1 :])
                raise

    def _launch(self, claim: Claim) -> None:
        self.summary.started += 1
        if self.in_process is None:
            run = self._run(self.argv, claim)
        else:
            run = self.in_process(claim, self._variables(claim))
        self.notify(Event("launch", claim.dataid, claim))
        self._active[claim.runid] = (claim, run)
        try:
            run.start()
        except BaseException:  # it never started: the chunk is as it was, no attempt used
            del self._active[claim.runid]
            self.summary.started -= 1
            claims.release(self.store, self.job.jobid, claim)
            raise
        group = getattr(getattr(run, "process", None), "pid", 0)  # 0: a driver's thread
        liveness.started(self.store, self.job.jobid, claim.dataid, claim.runid, claim.token, group)
        if self.summary.interrupted:  # the signal came while it was starting
            run.signal(self.summary.interrupted)
        try:  # the watcher says when a job process has ended; else a thread waits for it
            if not self.validate and callable(getattr(run, "when_ended", None)):
                run.when_ended(lambda outcome, c=claim: self._events.put(("ended", (c, outcome))))
            else:
                start_thread(lambda claim=claim, run=run: self._wait(claim, run))
        except RuntimeError as exc:  # no thread left (a limit of tasks): waited for here
            self._cramped(f"cannot run {self.argv[0]}: no thread to wait for it ({exc})")
            self._wait(claim, run)
        self.summary.running = len(self._active)

    def _launch_batch(self, batch: list[Claim]) -> None:
        """Start chunks claimed together as one run of ``in_batch``; each chunk is still
        recorded, finished and published on its own (its view's outcome)."""
        assert self.in_batch is not None
        self.summary.started += len(batch)
        run = self.in_batch([(claim, self._variables(claim)) for claim in batch])
        views = run.views()
        for claim, view in zip(batch, views, strict=True):
            self.notify(Event("launch", claim.dataid, claim))
            self._active[claim.runid] = (claim, view)
        try:
            run.start()
        except BaseException:  # it never started: the chunks are as they were
            for claim in batch:
                del self._active[claim.runid]
                self.summary.started -= 1
                claims.release(self.store, self.job.jobid, claim)
            raise
        for claim, view in zip(batch, views, strict=True):
            liveness.started(self.store, self.job.jobid, claim.dataid, claim.runid, claim.token, 0)
            start_thread(lambda claim=claim, view=view: self._wait(claim, view))
        if self.summary.interrupted:  # the signal came while it was starting
            run.signal(self.summary.interrupted)
        self.summary.running = len(self._active)

    def _variables(self, claim: Claim) -> dict[str, str]:
        """The chunk's environment; what tells its processes from any other's (the run's token,
        the store); the attempt's number, which fences what ``dataflow.spark`` writes."""
        marks = {VARIABLE: claim.token, ATTEMPT_VARIABLE: str(claim.attempt)}
        return {**self.env.for_chunk(claim.dataid), **marks, STORE_VARIABLE: self.store.identity}

    def _run(self, argv: list[str], claim: Claim, append: bool = False) -> Run:
        # imported for the first job process: a drain that starts none (a cron tick with
        # nothing to do) never loads subprocess and the watcher (a tenth of its start)
        from ..process import runner

        with self._watcher_made:
            if self._watcher is None:
                from ..process.watcher import Watcher

                self._watcher = Watcher()
        start = (self.run_with or runner.Run) if argv is self.argv else runner.Run
        return start(  # a check runs as itself
            argv,
            runner.child_environment(self._variables(claim)),
            lock_fd=claim.lock.fd,
            log_path=claim.logpath,
            secrets=self.env.secrets,
            echo=self.echo,
            timeout=self.job.settings.timeout,
            append=append,
            watcher=self._watcher,
        )

    def _wait(self, claim: Claim, run: Run) -> None:
        """In the run's thread: wait for the job, then for its check, then report. The
        drain waits for this report: it is always made, whatever goes wrong here."""
        from ..process.runner import Outcome  # loaded by then, by what started the run

        outcome = Outcome(1, lost=("RunJob: the run's thread failed",))
        try:
            outcome = run.wait()
            if outcome.ok and self.validate and not self.summary.interrupted:
                check = self._run(self.validate, claim, append=True)
                self._active[claim.runid] = (claim, check)  # a signal now reaches the check
                try:
                    check.start()
                    passed = check.wait().ok
                except DataflowError:  # the check cannot even start: not validated
                    passed = False
                outcome = outcome._replace(validation="passed" if passed else "failed")
        finally:
            self._events.put(("ended", (claim, outcome)))

    def _take(self, item: tuple[str, Any]) -> None:
        """Act on what happened: a job ended, its end is recorded, the recorder says."""
        kind, what = item
        if kind == "say":
            self.notify(what)
        elif kind == "recorded":
            self._recording -= 1
            self._report(what)
        else:
            claim, outcome = what
            del self._active[claim.runid]
            self.summary.running = len(self._active)
            quick, very = (outcome.duration < bound for bound in (AHEAD_BELOW_S, MANY_BELOW_S))
            self._per_slot = MANY_AHEAD if very else int(quick)
            status = READY if outcome.ok else FAILED
            self.notify(Event("ending", claim.dataid, claim, outcome, status))
            if self._recorder is None:
                self._report(recorder.Ended(claim, outcome, "unrecorded", None, ()))
            else:
                self._recording += 1
                self._recorder.record(claim, outcome)

    def _report(self, ended: recorder.Ended) -> None:
        if ended.kind == "unrecorded":  # no recorder, or it has no connection (no descriptor)
            ended = recorder.record(self.store, self.job, self.tables, *ended[:2], self._failed)
        claim, outcome = ended.claim, ended.outcome  # (recorded: not published, it failed)
        if ended.kind == "fenced":
            self.summary.fenced += 1
            self.notify(Event("fenced", claim.dataid, claim, outcome, ended.status))
            return
        if ended.kind == "lost":  # said once, when the drain ends: the chunk stays
            self.failure = self.failure or ended.status  # RUNNING, recovered later
            return
        self.summary.last = outcome
        if outcome.ok:
            self.summary.ready += 1
        else:
            self.summary.failed += 1
        self.notify(Event("ended", claim.dataid, claim, outcome, ended.status, ended.counts))
