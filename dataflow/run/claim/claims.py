"""Claiming a chunk: the smallest claimable one, in one short write transaction, and
letting go of a claim whose job could not even start.

A chunk is taken only when nothing of an earlier run of it lives (its lock, or a
process carrying that run's token), and a chunk that a live consumer is reading is
never taken for rewriting.
"""

from __future__ import annotations

import os
from collections import namedtuple
from collections.abc import Iterator
from datetime import datetime

from ... import dataids
from ...errors import RunSetupError, StoreUnavailable
from ...store import DRIVER_ERRORS, ChunkRow, Row, Store
from ..process import locks, logs, processes, storedlogs
from . import liveness, patience
from .lifecycle import (
    FAILED,
    RESUBMIT,
    RUNNING,
    Job,
    claimable,
    counted,
    load_job,
    retry_wait,
)
from .recovery import Recovery, discard_meanwhile, recover


class Claim(namedtuple("Claim", "dataid attempt runid lock logpath token previous")):
    """A chunk this process now owns: its lock (a ChunkLock) is held until the run
    ends; runid names its history row, logpath its log file, token is the run's
    ``DATAFLOW_RUN``; previous: the job's rows at the chunk before the claim."""

    __slots__ = ()


class ClaimResult:
    """What a claim found: the claim itself, or why there is none."""

    def __init__(self) -> None:
        self.claim: Claim | None = None
        self.more: list[Claim] = []  # claimed in the same transaction, after ``claim``
        self.live = 0  # runs of the job alive before this claim (counted when a cap is set)
        self.cap: int | None = None  # the max_parallel setting read by this claim
        self.cap_full = False  # max_parallel live runs already: nothing claimed
        self.abandoned: list[str] = []  # dead runs just marked FAILED
        # candidates that cannot be handed to a job: (dataid, why), why a phrase after it
        self.unusable: list[tuple[str, str]] = []
        # candidates passed over, their lock held while not RUNNING nor leased (given back
        # a moment ago by another drain, whose keeper lets go of them at once; a helper's)
        self.passed: list[str] = []


class _DryRun(Exception):
    """Raised inside the claim transaction to roll it back."""


def prepare(store: Store, jobid: str, keeper: bool = True) -> None:
    """Check, before anything is claimed, what a run needs on disk: its lock file and
    its log folder. A claim must never be spent on a failure that was foreseeable.
    ``keeper``: this process claims (on a shared store its keeper starts now)."""
    if keeper:
        liveness.prepare(store, jobid)
    try:
        locks.prepare(store.lockfile)
    except OSError as exc:
        raise RunSetupError("lock file", str(store.lockfile), exc.strerror or str(exc)) from None
    try:
        logs.prepare(store.files, jobid)
    except OSError as exc:
        path = str(exc.filename or store.files)
        raise RunSetupError("log folder", path, exc.strerror or str(exc)) from None


def _choose(
    store: Store,
    job: Job,
    at: datetime | None = None,
    size: int = 1,
    first: list[tuple[str, str]] | None = None,
    lock: bool = True,
) -> Iterator[list[tuple[str, str]]]:
    """Candidates of the job as (sortkey, dataid), in natural order, ``size`` at a time
    (a shared store locks the candidates it returns, unless ``lock`` is False: a claim
    asks for as many as it wants), from ``first`` on if its claim read them already. A
    job run by a clock: the current period at ``at`` (default now), after any earlier
    one resubmitted (a backfill), oldest first."""
    if job.clock:
        now = dataids.period(job.clock, at)
        periods = {d for d in store.dataids_of_job(job.jobid, (RESUBMIT,)) if d < now} | {now}
        ordered = [(dataids.natural_key(p), p) for p in sorted(periods, key=dataids.natural_key)]
        for start in range(0, len(ordered), size):
            yield ordered[start : start + size]
        return
    seen = None
    if first is not None:
        if not (batch := first[:size]):
            return
        yield batch
        seen = batch[-1]
    while batch := store.candidates(job.jobid, size, after=seen, lock=lock):
        yield batch
        seen = batch[-1]


def usable(dataid: str) -> bool:
    """Can the dataid name a chunk? Not with a NUL byte (no environment variable can carry
    it) nor with bytes that are not UTF-8 (an outside client wrote them; SQLite cannot be
    asked about them again)."""
    try:
        dataid.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return "\0" not in dataid


UNNAMEABLE = "cannot name a chunk (a NUL byte, or bytes that are not UTF-8)"
MISCOUNTED = "has a last run whose attempt or retry is not a count"


def peek(store: Store, job: Job, limit: int = 10_000, at: datetime | None = None) -> str | None:
    """The chunk the job would claim next (its clock read at ``at``, default now),
    read-only (locks are not probed)."""
    candidates = (pair for batch in _choose(store, job, at, lock=False) for pair in batch)
    for seen, (_, dataid) in enumerate(candidates):
        if seen >= limit:
            break
        if not usable(dataid):
            continue
        [(rows, last, ready)] = store.chunk_facts(job.jobid, job.inputs, [dataid])
        if last and not counted(last):
            continue  # a claim skips it too
        if claimable(job, rows, ready, last and last["retry"]) and not _delayed(
            store, job, rows, last
        ):
            return dataid
    return None


def anything_to_do(store: Store, job: Job) -> bool:
    """Would a drain of ``job`` claim a chunk now, or wait for a ``max_parallel`` slot?
    Asked before starting what a drain costs (a Spark driver), so that an idle cron tick
    costs what a shell job's does."""
    found = claim(store, job, dry_run=True)
    return found.claim is not None or found.cap_full


def claim(
    store: Store,
    job: Job,
    *,
    command: str = "",
    dry_run: bool = False,
    recover_dead: bool = True,
    at: datetime | None = None,
    count: int = 1,
) -> ClaimResult:
    """Atomically claim the job's smallest claimable chunk, in one short transaction:
    recover dead runs (``recover_dead``: RunJob does at its start, a drain now and then),
    respect ``max_parallel``, lock the chunk, mark it RUNNING and open its history row.
    With ``count``, up to that many chunks in natural order, in the same transaction,
    each with its own lock, attempt and history row (``result.more``: those after the
    first). With ``dry_run`` the transaction is always rolled back and no lock is taken.
    ``at``: the time a job run by a clock reads (default now)."""
    result = ClaimResult()
    claimed: list[Claim] = []
    recovered = Recovery([], [])
    try:
        with store.transaction(pipeline=True):
            if recover_dead:
                recovered = recover(store, job.jobid)
                result.abandoned = [d for _, d in recovered.dead]
            items, first = None, None  # the job's rows, read at every start: with its first
            if not job.clock:  # candidates, unless it is capped (one round trip on a shared store)
                items, first = store.job_and_candidates(job.jobid, count, job.inputs)
            settings = load_job(store, job.jobid, items).settings
            result.cap = settings.max_parallel
            if settings.max_parallel:
                store.job_turn(job.jobid)  # one claim of the job at a time counts live runs
                result.live = store.count_running(job.jobid)
                result.cap_full = result.live >= settings.max_parallel
            job = job._replace(settings=settings)
            room = settings.max_parallel - result.live if settings.max_parallel else count
            while len(claimed) < min(count, room):
                want = min(count, room) - len(claimed)
                found = _claim_next(store, job, command, dry_run, result, at, want, first)
                first = None
                if not found:
                    break
                claimed.extend(found)
            if dry_run:
                raise _DryRun
    except _DryRun:
        recovered = Recovery([], [])  # rolled back: nothing recovered
    except liveness.KeeperFirst:  # rolled back: its holder reached outside, claimed again
        for found in claimed:
            found.lock.close()
        liveness.before_threads(store)  # once: it is reached now (a dry run never leases)
        return claim(store, job, command=command, recover_dead=recover_dead, at=at, count=count)
    except BaseException as exc:  # nothing is claimed (a lost COMMIT given back): no lock held
        if claimed and store.outcome_unknown(exc):
            _give_back(store, job.jobid, claimed)
        for found in claimed:
            found.lock.close()
        raise
    discard_meanwhile(recovered)  # the drain waits for it at its end
    result.claim, result.more = (claimed[0], claimed[1:]) if claimed else (None, [])
    return result


def _claim_next(
    store: Store,
    job: Job,
    command: str,
    dry_run: bool,
    result: ClaimResult,
    at: datetime | None,
    want: int,
    first: list[tuple[str, str]] | None = None,
) -> list[Claim]:
    """The first ``want`` claimable candidates (or fewer), claimed. They are looked at
    ``want`` at a time, each batch's chunks read together and taken together (one round
    trip each on a shared store, however many). A candidate whose sort key is not its
    dataid's (any SQLite client may write rows; only exact keys come from plain SQL) is
    put in its place first, and the scan starts again before anything more is claimed
    (those taken before it are claimed), so that a chunk it moved ahead is not passed
    over. Each row is repaired once: it ends. ``first``: the first candidates, read
    already."""
    while True:
        repaired, taken = False, []
        try:  # whatever fails (a later batch, the marking) lets go of the locks taken
            for batch in _choose(store, job, at, want, first):
                looked = []
                for key, dataid in batch:
                    if not usable(dataid):
                        result.unusable.append((dataid, UNNAMEABLE))
                    elif not store.chunk_turn(dataid):
                        continue  # another transaction may be changing it: it stays for later
                    elif key != dataids.natural_key(dataid):
                        store.drop_candidate(job.jobid, key, dataid)
                        store.put_candidate(job.jobid, dataid)
                        repaired = True
                    else:
                        looked.append((key, dataid))
                facts = store.chunk_facts(job.jobid, job.inputs, [d for _, d in looked])
                found = []
                for (key, dataid), (rows, last, ready) in zip(looked, facts, strict=True):
                    if last and not counted(last):
                        result.unusable.append((dataid, MISCOUNTED))
                    elif _fits(store, job, key, dataid, rows, last, ready):
                        found.append((key, dataid, rows, last))
                if repaired and found:
                    break  # a chunk just put in its place may come before these: look again
                taken += _take(store, job, found[: want - len(taken)], dry_run, result.passed)
                if len(taken) >= want:
                    break
            if taken or not repaired:
                return _claimed(store, job, taken, command, dry_run)
        except BaseException:
            for *_, lock in taken:
                lock.close()
            raise
        result.unusable.clear()  # nothing taken: the scan starts again, and sees them again
        result.passed.clear()
        first = None


def _fits(
    store: Store, job: Job, key: str, dataid: str, rows: list[ChunkRow], last: Row | None, ready
) -> bool:
    """May the candidate be claimed now, as far as the store says? A stale one is dropped."""
    if not claimable(job, rows, ready, last and last["retry"]):
        # Stale: any later change that could make it claimable offers it again.
        store.drop_candidate(job.jobid, key, dataid)
        return False
    if _delayed(store, job, rows, last):
        return False  # keep the candidate: it is claimable once its retry_delay has passed
    # keep the candidate while a consumer reads it or a process of its last run lives (its
    # rows may have been deleted by hand): it is claimable once they are done
    return not ((rows or last) and _busy(store, job, dataid))


def _take(store: Store, job: Job, found: list, dry_run: bool, passed: list[str]) -> list:
    """Those of ``found`` whose chunk is locked now (a dry run: whose last run is not
    live), each with its lock; a process of an earlier run of another keeps it. Those
    whose lock is held while no run of them lives as far as the store says (not
    RUNNING, no fresh lease) are added to ``passed``."""
    chunk_locks = [locks.ChunkLock(store.lockfile, job.jobid, dataid) for _, dataid, *_ in found]
    if dry_run:
        taken = [not liveness.is_live(store, job.jobid, dataid) for _, dataid, *_ in found]
    else:
        asked = [(lock, job.jobid, f[1], f[3]) for lock, f in zip(chunk_locks, found, strict=True)]
        taken = liveness.take(store, asked)
    for (_, dataid, rows, last), ok in zip(found, taken, strict=True):
        lives = any(row.status == RUNNING for row in rows) or (last and last.get("leased"))
        if not ok and not lives:  # (a run that lives holds it: for as long as it lives)
            passed.append(dataid)
    return [(*f, lock) for f, lock, ok in zip(found, chunk_locks, taken, strict=True) if ok]


def _claimed(store: Store, job: Job, taken: list, command: str, dry_run: bool) -> list[Claim]:
    """Record the claims of locked chunks: candidates dropped, RUNNING rows and a history
    row each (nothing written in a dry run: a run's number is not taken from a sequence)."""
    if dry_run:
        return [
            Claim(d, (last["attempt"] + 1) if last else 1, None, lock, None, "", ())
            for _, d, _, last, lock in taken
        ]
    runs = [_run_row(store, job, dataid, rows, last, command) for _, dataid, rows, last, _ in taken]
    chunks = [(key, dataid) for key, dataid, *_ in taken]
    runids = store.record_claims(job.jobid, chunks, job.outputs, job.inputs, runs)
    claimed = [
        Claim(dataid, run["attempt"], runid, lock, run["logpath"], run["token"], tuple(rows))
        for (_, dataid, rows, _, lock), run, runid in zip(taken, runs, runids, strict=True)
    ]
    for claim in claimed:  # its log, sent while it runs
        storedlogs.watch(store, claim.runid, claim.logpath)
    return claimed


def _delayed(store: Store, job: Job, rows: list[ChunkRow], last: Row | None) -> bool:
    """Is the chunk a FAILED one whose automatic retry waits for ``retry_delay``? The
    candidate stays: time passing changes no row, so no trigger would offer it again."""
    if not rows or not last or not job.settings.retry_delay[0]:
        return False
    return retry_wait(job, rows, last, store.clock()) > 0


def _busy(store: Store, job: Job, dataid: str) -> bool:
    """May a chunk the job produced before not be rewritten yet? A consumer is reading
    one of its outputs, or a process of its last run (a helper that left the job's
    process group and closed its descriptors) still lives."""
    readers = store.readers(job.outputs, dataid)
    if any(liveness.is_live(store, reader, dataid) for reader in readers):
        return True
    return liveness.last_run_lives(store, job.jobid, dataid)


def _run_row(
    store: Store, job: Job, dataid: str, rows: list[ChunkRow], last: Row | None, command: str
) -> dict[str, object]:
    """The history row of a claim: its attempt, its retry, its log and token."""
    fresh = not any(r.status == FAILED for r in rows if r.locktype == "OUT") or any(
        r.status == RESUBMIT for r in rows
    )
    attempt = (last["attempt"] + 1) if last else 1
    return {
        "jobid": job.jobid,
        "dataid": dataid,
        "attempt": attempt,
        "retry": 0 if fresh or not last else last["retry"] + 1,
        "pid": os.getpid(),
        "host": liveness.host_name(),
        "command": command,
        "logpath": logs.log_path(store.files, job.jobid, dataid, attempt),
        "token": processes.new_token(),
    }


def release(store: Store, jobid: str, claim: Claim) -> None:
    """Undo a claim whose job never started: the chunk's rows as they were, no history
    row, no attempt used; then let go of its lock. A claim that is not the chunk's live
    run any more (on a shared store, one whose lease lapsed while it waited: recovered
    as dead, perhaps claimed since by another host) is left as it is now. A store that
    fails in a way that passes is tried again: a chunk given back this way never runs out
    of attempts for a blip (undone twice, the second finds nothing to undo). The claim's
    run is known by its token, not its number alone: PostgreSQL's give-back returns the
    number to its sequence, and an undo tried again (its first COMMIT's answer lost) may
    find that number on another host's claim of the chunk."""

    def undo() -> None:
        with store.transaction():
            store.chunk_turn(claim.dataid, wait=True)
            last = store.last_run(jobid, claim.dataid)
            if (
                last
                and last["runid"] == claim.runid
                and last["token"] == claim.token
                and last["status"] == RUNNING
            ):
                store.release_claim(jobid, claim.dataid, claim.runid, claim.previous)

    storedlogs.forget(claim.runid)  # its number may come to be another run's
    try:
        patience.patiently(store, undo)
    finally:
        claim.lock.close()
        liveness.released(store)


def _give_back(store: Store, jobid: str, claimed: list[Claim]) -> None:
    """Claims whose COMMIT may have been done (its answer was lost with the connection),
    given back while their locks are held, before the claim is tried again: none of them
    is left RUNNING by a run that nobody runs. A store out of reach for longer than its
    patience leaves them so, recovered later as dead runs (their locks let go)."""
    try:
        release_all(store, jobid, list(claimed))
    except (StoreUnavailable, *DRIVER_ERRORS):
        pass  # the claim's own failure is said


def release_all(store: Store, jobid: str, claimed: list[Claim]) -> None:
    """:func:`release` each claim of ``claimed``, taking it off the list."""
    while claimed:
        release(store, jobid, claimed.pop())
