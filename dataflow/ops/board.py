"""The status board: one self-contained HTML page, a jobs x dataids grid coloured by status.

The page loads nothing from anywhere (its Content-Security-Policy forbids it), so it can be
mailed, attached to a ticket or opened from a laptop at 3 a.m. Every dataid, job name and
reason is user data and goes through ``html.escape``; the script reads them back from
``data-`` attributes, never from text pasted into JavaScript.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from html import escape

from ..dataids import natural_key
from ..errors import UsageError
from ..run.claim import lifecycle
from ..store import Store
from . import boardactions, boardlog, boardnotes, freshness, lineage
from .status import first_line

# Okabe-Ito colours: told apart by people with the common colour-vision deficiencies.
# FAILED (vermilion) and RESUBMIT (yellow, not Okabe-Ito's orange) differ in lightness
# too, so that a 14 px cell of one is never taken for the other.
COLOURS = {
    "READY": "#009e73",
    "RUNNING": "#0072b2",
    "FAILED": "#d55e00",
    "RESUBMIT": "#f0e442",
    "HOLD": "#cc79a7",
}
EMPTY = "#e8e8e8"  # the job has no chunk at that dataid (yet)
DEFAULT_LAST = 200
MAX_FAILURES = 100  # failures listed in words under the grid


@dataclass
class Board:
    """What the page shows: jobs (rows), the newest dataids (columns) and their cells."""

    jobs: list[str]
    dataids: list[str]
    total_dataids: int | None  # None: more than shown, how many not read (see collect)
    cells: dict[tuple[str, str], dict] = field(default_factory=dict)
    late: dict[tuple[str, str], str] = field(default_factory=dict)  # chunk: why, in words
    blocked: dict[tuple[str, str], str] = field(default_factory=dict)  # no chunk: why
    advice: dict[tuple[str, str], str] = field(default_factory=dict)  # a failure: what to do

    @property
    def truncated(self) -> bool:
        return self.total_dataids is None or len(self.dataids) < self.total_dataids


def column_order(dataid: str) -> tuple[str, str]:
    """The natural order, and the text where it ties ("007" and "7"): the same columns
    however the dataids were found."""
    return natural_key(dataid), dataid


def build(
    rows: Iterable[dict], last: int = DEFAULT_LAST, jobs: Sequence[str] = (), late: Sequence = ()
) -> Board:
    """Arrange ``Store.board()`` rows; keep the newest ``last`` dataids in natural order.
    ``jobs``: the rows of the grid in their order (registered jobs, in pipeline order),
    chunks or not; a job of ``rows`` not among them follows, by name. ``late``: the late
    chunks (``freshness.Late``), marked, with a column even where no chunk is yet."""
    rows = list(rows)
    due = {
        (c.jobid, c.dataid): f"LATE: due {c.due}, {c.status}; blocked by {c.blocked}" for c in late
    }
    others = {row["jobid"] for row in rows}.difference(jobs)
    jobs = [*dict.fromkeys(jobs), *sorted(others, key=natural_key)]
    dataids = sorted({row["dataid"] for row in rows} | {d for _, d in due}, key=column_order)
    shown = dataids[-last:] if last > 0 else []
    keep = set(shown)
    cells = {(r["jobid"], r["dataid"]): r for r in rows if r["dataid"] in keep}
    return Board(jobs, shown, len(dataids), cells, {k: v for k, v in due.items() if k[1] in keep})


def collect(store: Store, job: str | None = None, last: int = DEFAULT_LAST) -> Board:
    """The board of a store: every registered job (pipeline order) or only ``job``."""
    if last < 1:
        raise UsageError(f"--last must be at least 1, not {last}")
    job_rows = store.job_rows()
    if job:
        lifecycle.load_job(store, job)  # an unknown job is an error, not an empty page
        jobs = [job]
    else:
        jobs = lineage.pipeline_order(job_rows)  # with or without chunks
    late = [c for c in freshness.late(store) if not job or c.jobid == job]
    shown, total = newest(store, jobs, job_rows, last, {c.dataid for c in late})
    rows = store.board_at(shown)  # every job's: a failure upstream of --job blocks it
    board = build([r for r in rows if not job or r["jobid"] == job], last, jobs, late)
    board.total_dataids = total
    order = lineage.pipeline_order(job_rows)
    every = boardnotes.blocked(rows, job_rows, order, board.dataids)
    board.blocked = {k: why for k, why in every.items() if k[0] in board.jobs}
    board.advice = {
        (c["jobid"], c["dataid"]): boardnotes.advice(store, c)
        for c in failures(board)[:MAX_FAILURES]
    }
    return board


def newest(
    store: Store, jobs: Sequence[str], job_rows: list[dict], last: int, due: set[str]
) -> tuple[list[str], int | None]:
    """The newest ``last`` dataids (natural order) of ``jobs``' OUT rows and ``due``, read
    from the end of each job's index, never every row: each of them is among the newest
    ``last`` of some job. And how many dataids there are in all, or None when a job had
    more than were read (counting them would read them all)."""
    outs = Counter(r["jobid"] for r in job_rows if r["itemtype"] == "OUT")
    found, complete = set(due), True
    for job in jobs:
        limit = last * max(outs[job], 1) + 1  # a row per OUT dataset at each dataid
        while True:
            ordered, unordered = store.newest_dataids(job, limit)
            cut = len(ordered) == limit  # rows left unread
            if not cut or len(set(ordered)) > last:
                break
            limit *= 2  # more rows a dataid than the job has OUT datasets (a user's SQL)
        found.update(ordered, unordered)
        complete = complete and not cut
    ordered = sorted(found, key=column_order)
    return ordered[-last:], len(ordered) if complete else None


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}" + ("" if number == 1 else "s")


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min"


def hover_text(cell: dict) -> str:
    """The lines shown when the pointer rests on a cell (unescaped)."""
    lines = [f"{cell['jobid']} at {cell['dataid']}: {cell['status']}"]
    facts = []
    if cell.get("attempt") is not None:
        facts.append(f"attempt {cell['attempt']}")
    if cell.get("duration") is not None:
        facts.append(_duration(cell["duration"]))
    ending = None
    if cell.get("signal"):
        ending = f"signal {cell['signal']}"
    elif cell.get("exitcode") is not None:
        ending = f"exit code {cell['exitcode']}"
    if ending:
        facts.append(ending)
    if facts:
        lines.append(", ".join(facts))
    if cell.get("reason") and cell["reason"] != ending:
        lines.append(f"reason: {cell['reason']}")
    if cell.get("started"):
        lines.append(
            f"started {cell['started']}" + (f", ended {cell['ended']}" if cell.get("ended") else "")
        )
    if cell.get("host"):
        lines.append(f"on host {cell['host']}, pid {cell['pid']}")
    return "\n".join(lines)


def failures(board: Board) -> list[dict]:
    """The FAILED cells, job by job (pipeline order), newest dataid first."""
    return [
        cell
        for job in board.jobs
        for dataid in reversed(board.dataids)
        if (cell := board.cells.get((job, dataid))) and cell["status"] == "FAILED"
    ]


def failure_line(cell: dict, advice: str = "") -> str:
    """A failed cell in one line: where, which attempt, how it ended and why (its first
    line), then ``advice``: what to do, where the log is."""
    short = dict(cell, reason=first_line(cell.get("reason")) or None)
    lines = hover_text(short).splitlines()[1:]
    told = "; ".join(line for line in lines if not line.startswith(("started ", "on host ")))
    return f"{cell['jobid']} at {cell['dataid']}: {told or 'FAILED'}" + (
        f" \u2014 {advice}" if advice else ""
    )


def as_json(board: Board) -> dict:
    """The board for scripts: jobs in order, the dataids shown, and every cell."""
    return {
        "jobs": board.jobs,
        "dataids": board.dataids,
        "total_dataids": board.total_dataids,
        "late": [{"jobid": j, "dataid": d, "why": why} for (j, d), why in board.late.items()],
        "blocked": [{"jobid": j, "dataid": d, "why": w} for (j, d), w in board.blocked.items()],
        "advice": [{"jobid": j, "dataid": d, "advice": a} for (j, d), a in board.advice.items()],
        "cells": [
            board.cells[job, dataid]
            for job in board.jobs
            for dataid in board.dataids
            if (job, dataid) in board.cells
        ],
    }


def _failure_list(board: Board) -> str:
    failed = failures(board)
    if not failed:
        return ""
    items = "".join(
        f"<li>{escape(failure_line(cell, board.advice.get((cell['jobid'], cell['dataid']), '')))}</li>"
        for cell in failed[:MAX_FAILURES]
    )
    more = len(failed) - MAX_FAILURES
    if more > 0:
        items += f"<li>and {more:,} more (utility status, utility history)</li>"
    return f'<h2>Failures ({len(failed):,})</h2>\n<ul id="failures">{items}</ul>\n'


_STYLE = """
body { font: 13px/1.4 system-ui, sans-serif; margin: 16px; color: #222; }
h1 { font-size: 18px; margin: 0 0 4px; }
h2 { font-size: 15px; margin: 12px 0 4px; }
#failures { margin: 0; padding-left: 20px; }
.note { color: #555; margin: 0 0 8px; }
.bar { display: flex; gap: 16px; align-items: center; flex-wrap: wrap; margin-bottom: 8px; }
.legend span { display: inline-flex; align-items: center; gap: 4px; margin-right: 10px; }
.legend i { width: 12px; height: 12px; display: inline-block; border: 1px solid #0002; }
.grid { overflow: auto; max-height: 85vh; border: 1px solid #ddd; }
table { border-collapse: separate; border-spacing: 2px; }
th { font-weight: normal; background: #fff; }
thead th { position: sticky; top: 0; writing-mode: vertical-rl; transform: rotate(180deg);
  text-align: left; padding: 4px 0; max-height: 120px; overflow: hidden; white-space: nowrap; }
thead th:first-child { writing-mode: horizontal-tb; transform: none; left: 0; z-index: 2;
  vertical-align: bottom; text-align: right; padding-right: 6px; }
tbody th { position: sticky; left: 0; text-align: right; padding-right: 6px; white-space: nowrap; }
td.cell { width: 14px; min-width: 14px; height: 14px; padding: 0; background: %(empty)s; }
td.cell:hover { outline: 2px solid #222; }
td.late, .legend i.late { box-shadow: inset 0 0 0 2px #000; }
td.blocked, .legend i.blocked { background-color: %(empty)s;
  background-image: repeating-linear-gradient(45deg, transparent 0 3px, #d55e00 3px 5px); }
td.late::after { content: "!"; display: block; font: bold 11px/14px sans-serif; text-align: center; }
%(colours)s
"""

_SCRIPT = """
(function () {
  var input = document.getElementById('filter');
  function apply() {
    var want = input.value.trim().toLowerCase();
    document.querySelectorAll('tbody tr').forEach(function (row) {
      row.hidden = want !== '' && row.dataset.job.toLowerCase().indexOf(want) < 0;
    });
  }
  var m = /[#&]filter=([^&]*)/.exec(location.hash);
  if (m) { input.value = decodeURIComponent(m[1]); }
  input.addEventListener('input', function () {
    history.replaceState(null, '', input.value ? '#filter=' + encodeURIComponent(input.value) : '#');
    apply();
  });
  apply();
  document.addEventListener('board-updated', apply);
  var grid = document.querySelector('.grid');
  grid.scrollLeft = grid.scrollWidth;  // the newest dataids are on the right
})();
"""

# A live page (served by ``utility serve``) fetches itself again every few seconds and
# swaps in the parts that change: no reload, so the filter, the scroll and the place a
# person is reading stay where they are. The fetched page is parsed, never run.
_LIVE = """
(function () {
  var every = Number(document.body.dataset.live) * 1000;
  var state = document.getElementById('live');
  function refresh() {
    fetch(location.pathname + location.search, {cache: 'no-store', credentials: 'same-origin'})
      .then(function (r) { if (!r.ok) { throw new Error('HTTP ' + r.status); } return r.text(); })
      .then(function (text) {
        var fresh = new DOMParser().parseFromString(text, 'text/html');
        var grid = document.querySelector('.grid');
        var atEnd = grid && grid.scrollLeft + grid.clientWidth >= grid.scrollWidth - 2;
        var left = grid ? grid.scrollLeft : 0, top = grid ? grid.scrollTop : 0;
        ['scope', 'made', 'legend', 'content'].forEach(function (id) {
          var now = document.getElementById(id), then = fresh.getElementById(id);
          if (now && then) { now.innerHTML = then.innerHTML; }
        });
        grid = document.querySelector('.grid');
        if (grid) { grid.scrollLeft = atEnd ? grid.scrollWidth : left; grid.scrollTop = top; }
        state.textContent = 'live: updated ' + new Date().toLocaleTimeString();
        document.dispatchEvent(new Event('board-updated'));
      })
      .catch(function (e) { state.textContent = 'live: not updated (' + e.message + ')'; })
      .then(function () { setTimeout(refresh, every); });
  }
  setTimeout(refresh, every);
})();
"""


def render(
    board: Board, generated: str = "", source: str = "", live: float = 0, acts: bool = False
) -> str:
    """The whole page as one HTML string: inline CSS and JS, nothing fetched. ``live``:
    the page refreshes itself from where it was served every ``live`` seconds (the one
    fetch its Content-Security-Policy then allows: its own origin); ``acts`` (a live
    page only): with the panel of its actions (``boardactions``); a live page shows a
    chunk's log (``boardlog``)."""
    counts = Counter(cell["status"] for cell in board.cells.values())
    colours = "\n".join(f"td.s-{s} {{ background: {c}; }}" for s, c in COLOURS.items())
    legend = "".join(
        f'<span><i style="background:{c}"></i>{s} {counts.get(s, 0):,}</span>'
        for s, c in COLOURS.items()
    )
    legend += f'<span><i style="background:{EMPTY}"></i>no chunk</span>'
    if board.blocked:
        legend += (
            f'<span><i class="blocked"></i>blocked by a failure upstream {len(board.blocked):,}'
            "</span>"
        )
    if board.late:
        legend += (
            f'<span><i class="late" style="background:{EMPTY}"></i>late {len(board.late):,}</span>'
        )
    scope = f"{_count(len(board.jobs), 'job')} \u00d7 {_count(len(board.dataids), 'dataid')}"
    if board.truncated:
        total = "" if board.total_dataids is None else f" of {board.total_dataids:,}"
        scope += (
            f" \u2014 showing only the newest {len(board.dataids):,}{total}"
            " dataids (utility board --last N)"
        )
    header = "".join(f'<th scope="col">{escape(d)}</th>' for d in board.dataids)
    body = []
    for job in board.jobs:
        cells = []
        for dataid in board.dataids:
            cell = board.cells.get((job, dataid))
            why = board.late.get((job, dataid))
            late = " late" if why else ""
            if cell is None:
                stop = board.blocked.get((job, dataid))
                title = f"{job} at {dataid}: " + (stop or "no chunk") + (f"\n{why}" if why else "")
                kind = " blocked" if stop else ""
                cells.append(f'<td class="cell{kind}{late}" title="{escape(title)}"></td>')
                continue
            status = escape(cell["status"])
            title = hover_text(cell) + (f"\n{why}" if why else "")
            cells.append(
                f'<td class="cell s-{status}{late}" data-status="{status}" '
                f'title="{escape(title)}"></td>'
            )
        job_attr = escape(job)
        body.append(
            f'<tr data-job="{job_attr}"><th scope="row">{job_attr}</th>{"".join(cells)}</tr>'
        )
    made = " ".join(p for p in (f"store {source}" if source else "", generated) if p)
    empty = "" if board.dataids else '<p class="note">No chunks in the store yet.</p>'
    connect, live_attr, live_note, live_script = "", "", "", ""
    if live > 0:
        connect = "; connect-src 'self'"
        live_attr = f' data-live="{live:g}"'
        live_note = f'<p class="note" id="live">live: refreshed every {live:g} s</p>\n'
        live_script = f"<script>{_LIVE}</script>"
        live_note += boardlog.panel() + (boardactions.panel() if acts else "")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'{connect}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>OpenDataFlow status board</title>
<style>{_STYLE % {"empty": EMPTY, "colours": colours}}</style></head>
<body{live_attr}>
<h1>OpenDataFlow status board</h1>
<p class="note" id="scope">{escape(scope)}</p>
<p class="note" id="made">{escape(made)}</p>
{live_note}<div class="bar"><label>Filter jobs <input id="filter" type="search" placeholder="job name"></label>
<div class="legend" id="legend">{legend}</div></div>
<div id="content">{empty}<div class="grid"><table>
<thead><tr><th scope="col">job</th>{header}</tr></thead>
<tbody>
{chr(10).join(body)}
</tbody></table></div>
{_failure_list(board)}</div><script>{_SCRIPT}</script>{live_script}
</body></html>
"""
