"""Chunks claimed together and run inside this process as one call (a Spark driver's
``run_batch(spark, batch)``): one query for many chunks, each chunk still its own.

A batch that fails is split in halves, and the halves are run again, down to single
chunks: in the end only a chunk that fails on its own ends FAILED, with its own reason,
and every other one READY. The chunks keep their claims throughout, so a chunk that
failed only as part of a batch has used no attempt and no retry. A chunk's outcome is
given as soon as it is known (:meth:`BatchRun.views`: one view per chunk, with the life
of a :class:`~.inprocess.ThreadRun`), so its finish does not wait for the rest.

Each chunk's log gets what every part it was in wrote, and why a part was split. A part
has ``timeout`` seconds per chunk in it: one that runs longer is cancelled and split
like a failed one; a single chunk that does is FAILED for its timeout. A part whose
thread does not end after a cancel is given up: its chunks are FAILED, and their locks
stay held (through duplicates) until the thread really ends.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence

from ..process.runner import Outcome
from .inprocess import (
    GIVE_UP_S,
    ThreadRun,
    _ChunkWriter,
    _job_traceback,
    _route,
    open_log,
    reason_of,
    route_output,
)

_POLL_S = 0.2


class BatchChunk:
    """One chunk of a batch: its variables, its lock's descriptor, its log."""

    def __init__(self, variables: Mapping[str, str], lock_fd: int | None, log_path: str | None):
        self.variables, self.lock_fd, self.log_path = variables, lock_fd, log_path


class _Tee:
    """What a part's thread writes: into the log of every chunk of the part."""

    def __init__(self, writers: Sequence[_ChunkWriter]):
        self.writers = writers

    def write(self, text: str) -> None:
        for writer in self.writers:
            writer.write(text)


class ChunkView:
    """One chunk's run within a batch, with a job process's life: ``start`` (the batch
    is started by the drain), ``signal``, ``wait`` -> Outcome."""

    def __init__(self, batch: BatchRun, index: int):
        self.batch, self.index = batch, index
        self.unit = id(batch)  # what counts against --parallel: the batch

    def start(self) -> None:
        pass  # the batch starts once, for all its chunks

    def signal(self, number: int) -> None:
        self.batch.signal(number)

    def pass_on(self, number: int) -> None:
        """In this process: it stops and goes on with it."""

    def wait(self) -> Outcome:
        return self.batch.outcome(self.index)


class BatchRun:
    """``work(variables of each chunk, group)`` for a batch of chunks, in a thread,
    split on failure; each chunk's end an :class:`~..process.runner.Outcome`. ``entry(n)``: the
    name of the function ``work`` calls for n chunks, as each chunk's log says it."""

    def __init__(
        self,
        work: Callable[[list[Mapping[str, str]], str], None],
        chunks: Sequence[BatchChunk],
        *,
        group: str,
        cancel: Callable[[str], None] = lambda group: None,
        secrets: list[str] | tuple[str, ...] = (),
        timeout: float | None = None,
        footer: str | None = None,
        entry: Callable[[int], str] = lambda count: "run_batch",
    ):
        self.work, self.chunks, self.group, self.cancel = work, list(chunks), group, cancel
        self.entry = entry  # the name of what ``work`` calls for so many chunks, for the log
        self.secrets, self.timeout, self.footer = secrets, timeout, footer
        self.interrupted: int | None = None
        self._outcomes: list[Outcome | None] = [None] * len(self.chunks)
        self._settled = [threading.Event() for _ in self.chunks]
        self._current: str | None = None  # the job group of the part running now
        self._parts = 0

    def views(self) -> list[ChunkView]:
        return [ChunkView(self, index) for index in range(len(self.chunks))]

    def start(self) -> None:
        route_output()
        self._started = time.monotonic()
        self._sinks = [open_log(chunk.log_path) for chunk in self.chunks]
        self._writers = [_ChunkWriter(sink, self.secrets) for sink in self._sinks]
        threading.Thread(target=self._main, daemon=True).start()

    def signal(self, number: int) -> None:
        """Stop the batch: a signal the drain received (no part is run again)."""
        self.interrupted = self.interrupted or number
        if self._current is not None:
            with contextlib.suppress(Exception):  # an engine that is gone has nothing to stop
                self.cancel(self._current)

    def outcome(self, index: int) -> Outcome:
        while not self._settled[index].wait(0.5):  # a timeout: signal handlers run promptly
            pass
        outcome = self._outcomes[index]
        assert outcome is not None
        return outcome

    def _main(self) -> None:
        try:
            parts = [list(range(len(self.chunks)))]
            while parts:
                part = parts.pop(0)
                if self.interrupted:
                    self._settle(part, Outcome(1, interrupted=self.interrupted))
                    continue
                outcome, ended = self._run_part(part)
                if outcome.ok or len(part) == 1 or not ended or outcome.interrupted:
                    self._settle(part, outcome)
                    continue
                half = (len(part) + 1) // 2
                why = outcome.error or (
                    f"timeout after {outcome.timeout:g} s" if outcome.timeout else "failed"
                )
                self._say(part, f"the batch of {len(part)} chunks failed ({why}): split in two")
                parts[:0] = [part[:half], part[half:]]
        finally:  # whatever went wrong here, every chunk gets an end
            for index, settled in enumerate(self._settled):
                if not settled.is_set():
                    self._settle([index], Outcome(1, error="the batch's thread failed"))

    def _run_part(self, part: list[int]) -> tuple[Outcome, bool]:
        """Run the chunks ``part`` as one call; its outcome, and whether its thread ended."""
        self._parts += 1
        group = f"{self.group}-{self._parts}"
        chunks = [self.chunks[index] for index in part]
        # what really runs: a part of one chunk may be the job's run(), not its run_batch()
        dataids = " ".join(c.variables.get("dataid", "") for c in chunks)
        called = self.entry(len(part))
        if len(part) == 1:
            self._say(part, f"running chunk {dataids} alone, in {called}()")
        else:
            self._say(part, f"running {len(part)} chunks as one batch, in {called}(): {dataids}")
        held = [os.dup(c.lock_fd) for c in chunks if c.lock_fd is not None]
        done = threading.Event()
        result: list[tuple[int, str | None]] = [(1, "the chunk's thread never ran")]

        def body() -> None:
            _route.writer = _Tee([self._writers[index] for index in part])
            try:
                self.work([c.variables for c in chunks], group)
                result[0] = (0, None)
            except SystemExit as exc:  # sys.exit() in the job's function
                result[0] = ThreadRun._exit(exc, _route.writer)
            except BaseException as exc:  # the job's own failure
                _route.writer.write(_job_traceback(exc))
                result[0] = (1, reason_of(exc))
            finally:
                _route.writer = None
                for fd in held:
                    os.close(fd)  # the chunks' locks are free once the drain let go too
                done.set()

        began = time.monotonic()
        self._current = group
        threading.Thread(target=body, daemon=True).start()
        budget = self.timeout * len(part) if self.timeout is not None else None
        timed_out, cancelled = None, None
        while not done.wait(_POLL_S):
            now = time.monotonic()
            if budget is not None and timed_out is None and now - began > budget:
                timed_out, cancelled = budget, now
                with contextlib.suppress(Exception):
                    self.cancel(group)
            if self.interrupted and cancelled is None:
                cancelled = now
            if cancelled is not None and now - cancelled > GIVE_UP_S:
                break
        self._current = None
        ended = done.is_set()
        code, error = result[0] if ended else (1, None)
        duration = round(time.monotonic() - began, 3)
        return Outcome(code, duration, timed_out, self.interrupted, error=error), ended

    def _say(self, part: list[int], text: str) -> None:
        for index in part:
            self._writers[index].write(f"dataflow: {text}\n")

    def _settle(self, part: list[int], outcome: Outcome) -> None:
        """Give the chunks ``part`` their end; their logs are complete."""
        for index in part:
            if self._settled[index].is_set():
                continue
            if not outcome.ok and self.footer:
                self._writers[index].write(f"{self.footer}\n")
            self._writers[index].close()
            sink = self._sinks[index]
            fd, sink.fd = sink.fd, None
            if fd is not None:
                os.close(fd)
            lost = (sink.lost,) if sink.lost else ()
            duration = round(time.monotonic() - self._started, 3)
            self._outcomes[index] = outcome._replace(duration=duration, lost=lost)
            self._settled[index].set()
