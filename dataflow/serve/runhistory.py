"""What ``/metrics`` has counted of the run history: a server reads each ended run once.

A run that has ended changes no more (but by hand), so a scrape adds the runs below the
oldest run still RUNNING to totals this process keeps, and reads again only the runs
from there on: at a million runs a scrape reads the runs since the oldest live one, not
the history, and the write path does next to nothing for it (below). The first
scrape of a server reads every run (seconds at a million runs): the server does it when
it starts (:func:`dataflow.serve.metrics.warm`).

Where the runs are settled is the store's mark (:meth:`.Store.settle_runs`): raised by a
scrape in a moment when no writer of run is under way (so that no claim numbered below it
commits later), by this server or another, it makes the store's triggers count every run
deleted below it (and, on SQLite, which numbers a run again once the newest are deleted,
every run inserted below it). The totals are read again from every run when one was
(``utility purge``, ``utility deleterun``, a ``DELETE`` by hand: Prometheus takes the
lower counters for a reset), and when the store at the address is another (an SQLite file
replaced). A server that may not raise the mark (a role that may only read), and a scrape
after one that could not, settle what the scrape before found ended and check that the
history holds as many runs as they counted (a ``COUNT`` of every run). On PostgreSQL a
run inserted by hand below the mark, and on both a run below it changed by hand (its
status, its duration) or an input of a first run set READY again later, is not counted
again until the server restarts.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..store import Row, Store
from ..store.queries.metrics import LOWEST

COUNTS = ("started", "failed", "abandoned")
SUMS = (*COUNTS, "runids")  # runids: their sum modulo a prime, which run_total checks


@dataclass
class Tally:
    """Sums of the store's rows: run counts by job, histogram buckets by (job, le)."""

    counts: dict[str, dict[str, int]] = field(default_factory=dict)
    durations: dict[tuple[str, object], list[float]] = field(default_factory=dict)
    latencies: dict[tuple[str, object], list[float]] = field(default_factory=dict)

    def add(self, counts: list[Row], durations: list[Row], latencies: list[Row]) -> None:
        for row in counts:
            mine = self.counts.setdefault(str(row["jobid"]), dict.fromkeys(SUMS, 0))
            for name in SUMS:
                mine[name] += int(row[name] or 0)  # type: ignore[call-overload]
        for rows, into in ((durations, self.durations), (latencies, self.latencies)):
            for row in rows:
                le = None if row["le"] is None else float(row["le"])  # type: ignore[arg-type]
                bucket = into.setdefault((str(row["jobid"]), le), [0, 0.0])
                bucket[0] += int(row["runs"])  # type: ignore[call-overload]
                bucket[1] += float(row["seconds"] or 0)  # type: ignore[arg-type]

    def total(self) -> tuple[int, int]:
        """Runs counted, and their runids' sum modulo a prime (as ``run_total``)."""
        mine = self.counts.values()
        return sum(m["started"] for m in mine), sum(m["runids"] for m in mine)

    def rows(self) -> tuple[list[Row], list[Row], list[Row]]:
        """The sums in the shape of the store's rows (``MetricQueries``)."""
        counts: list[Row] = [{"jobid": job, **mine} for job, mine in self.counts.items()]
        durations: list[Row] = [
            {"jobid": job, "le": le, "runs": runs, "seconds": seconds}
            for (job, le), (runs, seconds) in self.durations.items()
        ]
        latencies: list[Row] = [
            {"jobid": job, "le": le, "runs": runs, "seconds": seconds}
            for (job, le), (runs, seconds) in self.latencies.items()
        ]
        return counts, durations, latencies


class RunHistory:
    """The runs of one store this server has counted: every run below ``settled`` had
    ended, and ``done`` holds their sums."""

    def __init__(self, abandoned: str, durations: Sequence[float], latencies: Sequence[float]):
        self.abandoned, self.bounds = abandoned, (tuple(durations), tuple(latencies))
        self.settled, self.done = LOWEST, Tally()
        # the store's identity and its mark's deletions when last counted
        self.changes: tuple[str, int | None] | None = None
        self.marked = False  # every run below settled settled through the store's mark
        self.seen = LOWEST  # where the last scrape found the oldest live run (unmarked)
        self.lock = threading.Lock()  # one scrape at a time reads and moves the totals

    def read(self, store: Store) -> tuple[list[Row], list[Row], list[Row]]:
        """Every run's counts and buckets (rows as :meth:`Tally.rows`), reading only the
        runs from the oldest one not ended on, once the ended ones are counted."""
        with self.lock:
            point = store.settle_runs(self.settled)  # before the snapshot: it sees them
            with store.snapshot():  # the runs below and above counted alike
                found = self._read(store, point)
                if found is None:  # runs below are gone, or came late: count them all again
                    self.settled, self.seen, self.done = LOWEST, LOWEST, Tally()
                    self.marked = False
                    found = self._read(store, point, recount=True)
                return found.rows()  # type: ignore[union-attr]

    def _read(self, store: Store, point: int | None, recount: bool = False) -> Tally | None:
        """As :meth:`read`; None if the runs below ``settled`` are not those counted
        (never on a ``recount``: what it read is the answer). ``point``: where this scrape
        settled the runs and raised the store's mark (None: it could not now)."""
        mark = store.run_mark()
        state = (store.identity, None if mark is None else mark[1])
        if not recount and state != self.changes:  # a run below the mark was deleted,
            return None  # or this is another store at the same address (a file replaced)
        self.changes = state
        # the mark counts the deletions below the runs this server settled through it
        # (raised now, or at the scrapes before since the last count of every run)
        through_mark = point is not None or self.marked
        checked = (
            through_mark and mark is not None and mark[0] >= max(self.settled, point or LOWEST)
        )
        if not checked:  # a store whose mark this server may not raise (it may only read)
            point = self._unmarked(store)
        elif recount and point is not None:  # settled from the runs counted before: a run
            # below those may be live (SQLite numbers a claim's run again once the newest
            # is deleted), and is settled only once it ends
            first_live = store.first_running_run(LOWEST)
            point = point if first_live is None else min(point, first_live)
        # runs settled without the mark (the scrapes before): a deletion below them that
        # the mark did not count is found by the history's count, this once
        unchecked_before = not self.marked
        self.marked = checked
        if point is not None and point > self.settled:
            self.done.add(*self._sums(store, self.settled, point))
            self.settled = point
        recent = Tally()
        recent.add(*self._sums(store, self.settled))
        (done, done_ids), (new, new_ids) = self.done.total(), recent.total()
        if (
            not recount
            and (not checked or unchecked_before)
            and store.run_total() != (done + new, done_ids + new_ids)
        ):
            return None
        recent.add(*self.done.rows())
        return recent

    def _unmarked(self, store: Store) -> int:
        """The runs to settle without the store's mark: PostgreSQL numbers a run before
        its claim commits, so a run below the oldest live one may not be seen yet. Only
        what the scrape before found ended too is settled (a claim commits in
        milliseconds); a run committed later than that is found missing below by the
        history's count (``run_total``), and every run is counted again."""
        first_live = store.first_running_run(self.settled)
        live = store.next_runid() if first_live is None else first_live
        point = live if self.settled == LOWEST else min(live, self.seen)
        self.seen = live
        return point

    def _sums(self, store: Store, low: int, *high: int) -> tuple[list[Row], list[Row], list[Row]]:
        durations, latencies = self.bounds
        return (
            store.run_counts(self.abandoned, low, *high),
            store.run_durations(durations, low, *high),
            store.claim_latencies(latencies, low, *high),
        )


_HISTORIES: dict[str, RunHistory] = {}  # by the store's address: one per store served
_GUARD = threading.Lock()


def of(address: str, **how) -> RunHistory:
    """This process's count of the store at ``address`` (made on first use; ``how``:
    :class:`RunHistory`'s arguments)."""
    with _GUARD:
        if address not in _HISTORIES:
            _HISTORIES[address] = RunHistory(**how)
        return _HISTORIES[address]
