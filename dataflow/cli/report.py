"""What RunJob prints of a run's events: the seed's lines for one chunk; a line (or, on
a terminal, a progress bar) per chunk for a drain. Each event kind has its handler."""

from __future__ import annotations

import sys
from collections.abc import Callable

from ..run.claim import lifecycle
from ..run.drain.events import Event, Summary
from . import printable, say, stamp, warn
from .output import plural


def live(count: int, jobid: str) -> str:
    return f"{count} run of {jobid} is live" if count == 1 else f"{count} runs of {jobid} are live"


class Report:
    """Told every event of a drain (``report(event)``), then its end (``finish``)."""

    def __init__(self, script: str, jobid: str, drain: bool):
        self.script, self.jobid, self.drain = script, jobid, drain
        self.bar = drain and sys.stdout.isatty()
        self.left = lambda: 0
        self.summary: Summary | None = None
        self.lost_said: set[str] = set()  # output destinations already reported as failed
        # chunks ended in this drain, and those whose last end was not READY (a retry
        # follows a failure: only those are remembered, not every chunk of a long drain)
        self.chunks, self.unready = 0, set()
        self.handlers = {
            "abandoned": self._abandoned,
            "fenced": self._warn_status,
            "store": self._warn_status,
            "cramped": self._warn_status,
            "unusable": self._unusable,
            "cap_full": self._cap_full,
            "launch": self._launch,
            "ending": self._ending,
            "ended": self._ended,
        }

    def start(self, summary: Summary, left: Callable[[], int]) -> None:
        """The drain's live summary and its count of chunks left, for the progress bar
        (the API calls it before the first claim)."""
        self.summary, self.left = summary, left

    def __call__(self, event: Event) -> None:
        self.handlers.get(event.kind, self._progress)(event)

    def _abandoned(self, event: Event) -> None:
        self._line(
            f"{stamp()}: chunk {event.dataid} of {self.jobid} belonged to a dead run; "
            "marked FAILED (abandoned)"
        )

    def _warn_status(self, event: Event) -> None:
        warn(event.status)

    def _unusable(self, event: Event) -> None:
        warn(
            f"dataid '{printable(event.dataid)}' of {self.jobid} {event.status}: skipped; "
            "correct or delete its rows"
        )

    def _cap_full(self, event: Event) -> None:
        self._line(
            f"{stamp()}: {live(event.live, self.jobid)} (max_parallel {event.cap}). "
            "Not starting another"
        )

    def _progress(self, event: Event) -> None:
        if self.bar:
            self._draw_bar()

    def _launch(self, event: Event) -> None:
        if self.drain:
            self._progress(event)
        else:
            say(f"{stamp()}: Launching {self.script} with dataid {event.dataid}")

    def _ending(self, event: Event) -> None:
        if self.drain:
            self._progress(event)
            return
        verb = "is complete" if event.status == lifecycle.READY else "has failed"
        if event.outcome.validation == "failed" and event.outcome.returncode == 0:
            verb = "has failed validation"
        say(f"{stamp()}: Job {self.script} {verb}. Updating status")

    def _ended(self, event: Event) -> None:
        if lost := set(event.outcome.lost) - self.lost_said:
            self.lost_said.update(lost)
            warn(
                f"{self.jobid} {event.dataid}: output not written to "
                f"{', '.join(event.outcome.lost)} (recorded in its history)"
            )
        if self.drain:
            retried = event.dataid in self.unready
            self.chunks += not retried
            if event.status == lifecycle.READY:
                self.unready.discard(event.dataid)
            else:
                self.unready.add(event.dataid)
            self._drain_line(event)
        else:
            updated, released = event.counts
            say(
                f"{updated} rows updated to {event.status} for {self.jobid} and {event.dataid} "
                f"{released} IN file-local locks released"
            )

    def _line(self, text: str) -> None:
        if self.bar:
            sys.stdout.write("\r\033[K")
        say(text)

    def _drain_line(self, event: Event) -> None:
        if self.bar:
            self._draw_bar()
            return
        outcome, claim = event.outcome, event.claim
        text = (
            f"{stamp()}: {self.jobid} {event.dataid} {event.status} "
            f"(attempt {claim.attempt}, {outcome.duration:.1f} s)"
        )
        if not outcome.ok:
            text += f" {outcome.reason}; log: {claim.logpath}"
        say(text)

    def _draw_bar(self) -> None:
        s = self.summary
        left = self.left()
        done = s.ready + s.failed
        total = max(done + s.running + left, 1)
        filled = int(30 * done / total)
        rate = done / s.elapsed if s.elapsed > 0 else 0.0
        eta = f"{int((left + s.running) / rate)} s" if rate else "?"
        sys.stdout.write(
            f"\r\033[K{printable(self.jobid)} [{'#' * filled}{'.' * (30 - filled)}] done {s.ready} "
            f"failed {s.failed} running {s.running} left {left} {rate:.1f}/s ETA {eta}"
        )
        sys.stdout.flush()

    def finish(self, summary: Summary, left: Callable[[], int]) -> None:
        """The drain's last line; ``left()`` (a query) is asked only when it is printed."""
        if self.bar:
            sys.stdout.write("\n")
        if summary.started == 0 and not summary.cap_full and not summary.interrupted:
            # the seed's line; a drain names its job (a folder's drains print one each)
            job = f"{self.jobid}: " if self.drain else ""
            say(f"{stamp()}: {job}no suitable data available for job. Not running it")
        elif self.drain:
            say(f"{stamp()}: {self.jobid}: {self.counted(summary, left())}")

    def counted(self, summary: Summary, waiting: int) -> str:
        """A drain's chunks by their last status, then its attempts apart (a chunk
        retried in the drain is one chunk, run twice). Only the chunks whose last end was
        not READY are remembered, so a long drain's memory does not grow with its chunks:
        a chunk that ended READY, was resubmitted meanwhile and ran again in the same
        drain counts as two."""
        failed = len(self.unready)
        ready = self.chunks - failed
        attempts = summary.ready + summary.failed
        rate = attempts / summary.elapsed if summary.elapsed else 0
        return (
            f"{ready} READY, {failed} FAILED in {summary.elapsed:.1f} s "
            f"({plural(self.chunks, 'chunk')}, {plural(attempts, 'attempt')}, {rate:.1f}/s); "
            f"{waiting} waiting"
        )
