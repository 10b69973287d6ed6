"""Recording a run's end: its chunk's status and history row, its staged output published
(or discarded), then its chunk lock let go. A drain records in a thread of its own, over
a store connection of its own, so that it starts its next job while the last one's end
is written: its claims do not wait on its finishes.

A store that fails in a way that passes (busy, a connection lost, a server restarting)
is tried again with backoff for up to its patience (:func:`..claim.patience.patiently`).
"""

from __future__ import annotations

import threading
from _queue import Empty, SimpleQueue  # queue's C core (queue's module imports heapq)
from collections import namedtuple
from collections.abc import Callable

from ... import layout
from ...errors import DataflowError, RunFenced, StoreUnavailable
from ...store import DRIVER_ERRORS, Store
from ..claim import lifecycle, liveness
from ..claim.claims import Claim
from ..claim.lifecycle import FAILED, READY, Job
from ..claim.patience import Failed, asked, patiently
from ..process import storedlogs

TYPE_CHECKING = False  # typing's flag, without importing typing (a run's start)
if TYPE_CHECKING:
    from ..process.runner import Outcome

FINISH_PATIENCE = 3  # a finish waits this many times the store's patience for it
TOGETHER_MAX = 32  # ends waiting for a recorder that it records in one transaction


class Ended(namedtuple("Ended", "claim outcome kind status counts")):
    """A run's end as recorded. kind: ``ended`` (status: the chunk's status now),
    ``fenced`` (its result was refused; status says why), ``lost`` (the store failed
    for longer than its patience; status is the error: the chunk stays RUNNING, and is
    recovered later) or ``unrecorded`` (a :class:`Recorder` could not open its own
    connection: the end is for the drain to record). counts: OUT rows updated and IN
    rows released."""

    __slots__ = ()


def waiting(store: Store, jobid: str) -> int:
    """Chunks still waiting for ``jobid``, asked over the session of a process that left
    the drain to others (a Spark driver, workers): idle so long that the server may have
    ended it, it is opened again."""
    count = asked(store, lambda: store.count_candidates(jobid))
    assert isinstance(count, int)
    return count


def record(
    store: Store,
    job: Job,
    tables: dict,
    claim: Claim,
    outcome: Outcome,
    failed: Failed,
    retried: bool = False,
) -> Ended:
    """Record the end of ``claim``'s run (READY if its outcome is, else FAILED; RESUBMIT
    if asked meanwhile), publish or discard its staged output, let go of its lock.
    ``retried``: an earlier try may have recorded it (its COMMIT lost with the
    connection)."""
    status = READY if outcome.ok else FAILED
    try:
        try:
            *counts, status = _finish(store, job, tables, claim, outcome, status, failed, retried)
        except layout.PublishFailed as exc:  # its output is not there: not READY
            outcome = outcome._replace(returncode=1, error=f"output not published: {exc}")
            *counts, status = _finish(store, job, tables, claim, outcome, FAILED, failed, retried)
    except RunFenced as refused:
        return Ended(claim, outcome, "fenced", str(refused), ())
    except (StoreUnavailable, *DRIVER_ERRORS) as exc:
        return Ended(claim, outcome, "lost", exc, ())
    if not counts[0]:
        return _unrecorded(store, job, claim, outcome, status)
    return Ended(claim, outcome, "ended", status, tuple(counts))


def _unrecorded(store: Store, job: Job, claim: Claim, outcome: Outcome, status: str) -> Ended:
    """A run whose chunk's OUT rows a writer deleted while it ran (``utility dml "delete
    from datastatus ..."``): its end has no row to go in (nothing was published), which
    RunJob says in one line, as of a run fenced off; its history row notes it."""
    why = f"its rows were deleted while it ran: its result {status} is not recorded"
    try:
        with store.transaction():
            store.note_runs([claim.runid], why)
    except (DataflowError, *DRIVER_ERRORS):  # only a note: the warning says it anyway
        pass
    return Ended(claim, outcome, "fenced", f"{job.jobid} {claim.dataid}: {why}", ())


def _finish(
    store: Store,
    job: Job,
    tables: dict,
    claim: Claim,
    outcome: Outcome,
    status: str,
    failed: Failed,
    retried: bool = False,
) -> tuple[int, int, str]:
    tries: list[int] = [1] if retried else []
    done = layout.Publication([], [])  # what publishing did, kept until it is committed
    reached: list[int] = []  # the tries that published: their run still owned the chunk

    def publish() -> None:
        if not store.out_status(job.jobid, claim.dataid):  # deleted while it ran (SQL)
            return  # not published: nothing records it
        reached.append(len(tries))
        published = layout.publish(tables, claim.dataid, claim.token)
        done.aside.extend(published.aside)
        done.moves.extend(published.moves)

    said = _said(outcome, claim)  # (its log read once, however many tries)

    def finish() -> tuple[int, int, str]:
        tries.append(1)
        try:
            return lifecycle.finish(
                store, job.jobid, claim.dataid, status, claim.runid, publish, **said
            )
        except RunFenced:
            if len(tries) > 1 and _recorded(store, job, claim, status):
                # a try whose COMMIT was lost with the connection had gone through
                outs = {s for _, s in store.out_status(job.jobid, claim.dataid)}
                final = outs.pop() if len(outs) == 1 else status
                return len(job.outputs), len(job.inputs), final
            raise
        except BaseException as exc:
            # A try that published, not committed (the store said so; a commit whose
            # answer was lost with the connection may have been: the next try tells):
            # the chunks keep what they held. It published once the run was known to
            # own the chunk still, so no earlier try was committed either.
            if reached[-1:] == [len(tries)] and not store.outcome_unknown(exc):
                layout.unpublish(done.moves)
                done.aside.clear()
            raise

    published = False
    try:
        # a finish is worth more waiting than a claim: the run's work is done
        counts = patiently(store, finish, FINISH_PATIENCE, failed)
        published = status == READY and bool(counts[0])  # type: ignore[index]
        return counts  # type: ignore[return-value]
    finally:
        if published:  # what the chunk held before, and older attempts' folders
            layout.remove(done.aside)
        else:  # a failed or fenced attempt's output is never published
            layout.discard(tables, claim.dataid, claim.token)
        # Only now: the status is final before anyone else may take the chunk.
        claim.lock.close()
        liveness.ended(store, job.jobid, claim.dataid, claim.runid)


def _said(outcome: Outcome, claim: Claim) -> dict[str, object]:
    """What the history row of a run says of how it ended, and its log as the store keeps
    it (its end is recorded with it: the store's copy is whole once its status is final)."""
    return {
        "log": storedlogs.ended(claim.runid, claim.logpath),
        "exitcode": outcome.returncode if outcome.returncode >= 0 else None,
        "signal": outcome.signal,
        "duration": outcome.duration,
        "reason": outcome.note,
        "validation": outcome.validation,
    }


def record_together(
    store: Store, job: Job, ends: list[tuple[Claim, Outcome]], failed: Failed
) -> list[Ended]:
    """:func:`record` of the ends of several runs of a job without staged output, in one
    transaction: one commit for them all. If one of them is fenced, each is recorded on
    its own (:func:`record` says which)."""
    tries: list[int] = []
    wanted = [(c.dataid, READY if o.ok else FAILED, c.runid, _said(o, c)) for c, o in ends]

    def finish() -> object:
        tries.append(1)
        return lifecycle.finish_many(store, job.jobid, wanted)

    try:
        done = patiently(store, finish, FINISH_PATIENCE, failed)
    except (StoreUnavailable, *DRIVER_ERRORS) as exc:
        done = exc
    if done is None:  # one is fenced (or all were recorded by a try whose COMMIT was lost)
        return [record(store, job, {}, c, o, failed, len(tries) > 1) for c, o in ends]
    for claim, _ in ends:  # only now: the status is final before anyone else may take it
        claim.lock.close()
        liveness.ended(store, job.jobid, claim.dataid, claim.runid)
    if isinstance(done, BaseException):  # as record says it: RUNNING, recovered later
        return [Ended(c, o, "lost", done, ()) for c, o in ends]
    assert isinstance(done, list)
    return [
        Ended(c, o, "ended", final, (updated, released))
        if updated
        else _unrecorded(store, job, c, o, final)
        for (c, o), (updated, released, final) in zip(ends, done, strict=True)
    ]


def _recorded(store: Store, job: Job, claim: Claim, status: str) -> bool:
    last = store.last_run(job.jobid, claim.dataid)
    return bool(last) and last["runid"] == claim.runid and last["status"] == status


class Recorder:
    """Records ends in a thread of its own, over its own connection to the store (opened
    at the first end), in the order they come; each recorded end is handed to ``done``."""

    def __init__(
        self, store: Store, job: Job, tables: dict, failed: Failed, done: Callable[[Ended], None]
    ):
        self.store, self.job, self.tables, self.failed, self.done = store, job, tables, failed, done
        self._queue: SimpleQueue[tuple[Claim, Outcome] | None] = SimpleQueue()
        self._thread: threading.Thread | None = None

    def record(self, claim: Claim, outcome: Outcome) -> None:
        if self._thread is None:
            thread = threading.Thread(target=self._serve, daemon=True)
            try:
                thread.start()
            except RuntimeError:  # no thread left (a limit of tasks): recorded here, now
                self.done(record(self.store, self.job, self.tables, claim, outcome, self.failed))
                return
            self._thread = thread
        self._queue.put((claim, outcome))

    def close(self) -> None:
        """Once every end handed to it is recorded (the drain waits for them)."""
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()

    def _serve(self) -> None:
        own: Store | None = None
        try:
            while ends := self._take():
                try:
                    if own is None:
                        own = type(self.store).open(self.store.path)
                except (DataflowError, OSError, *DRIVER_ERRORS) as exc:  # no descriptor left...
                    for claim, outcome in ends:  # for the drain
                        self.done(Ended(claim, outcome, "unrecorded", exc, ()))
                    continue
                for ended in self._record(own, ends):
                    self.done(ended)
        finally:
            if own is not None:
                own.close()

    def _take(self) -> list[tuple[Claim, Outcome]]:
        """The next end, with those that came meanwhile (while the last were recorded):
        ends of quick jobs are recorded together. None left once closed."""
        ends = [self._queue.get()]
        while ends[-1] is not None and len(ends) < TOGETHER_MAX:
            try:
                ends.append(self._queue.get_nowait())
            except Empty:
                break
        if ends[-1] is None:
            self._queue.put(None)  # (still there for the next look)
            ends.pop()
        return ends  # type: ignore[return-value]

    def _record(self, store: Store, ends: list[tuple[Claim, Outcome]]) -> list[Ended]:
        if len(ends) == 1 or self.tables:  # (staged output is published one run at a time)
            return [self._record_one(store, *end) for end in ends]
        try:
            return record_together(store, self.job, ends, self.failed)
        except BaseException as exc:  # a defect: RUNNING, recovered later
            for claim, _ in ends:
                claim.lock.close()
            return [Ended(claim, outcome, "lost", exc, ()) for claim, outcome in ends]

    def _record_one(self, store: Store, claim: Claim, outcome: Outcome) -> Ended:
        try:
            return record(store, self.job, self.tables, claim, outcome, self.failed)
        except BaseException as exc:  # a defect: RUNNING, recovered later
            claim.lock.close()
            return Ended(claim, outcome, "lost", exc, ())
