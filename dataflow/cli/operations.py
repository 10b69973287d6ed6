"""``utility`` commands for operations and forensics: explain, status, lineage, resubmit,
hold, release, actions (the audit of those), purge, check (freshness), deploys."""

from __future__ import annotations

import argparse
import json
from datetime import datetime

from .. import api
from ..errors import UsageError
from ..ops import drops, reruns, status
from ..ops import explain as explaining
from ..run.claim import lifecycle
from . import brief, output, say, say_lines, warn
from .commands import command, count, open_store, positional, show


@command(
    "explain",
    "answer the five questions for a job's next (or given) chunk: will it run, and why not",
    positional("jobid", optional=("dataid",)),
)
def explain(options: argparse.Namespace) -> int:
    result = api.explain(options.jobid, options.dataid, db=options.db)
    if options.json:
        say_lines(json.dumps(result.__dict__, indent=2))
        return 0
    say(result.summary)
    if " waiting)" in result.summary:
        say(f"(waiting: {status.WAITING_MEANS})")
    for question in (*explaining.QUESTIONS, explaining.WAITING):
        if question in result.answers:
            say("")
            say(f"{question.upper()}{':' if question == explaining.WAITING else '?'}")
            for line in result.answers[question]:
                say(f"  {line}")
    say("")
    say(result.verdict)
    return 0


@command(
    "status",
    "per job (or the one named): chunks by status, waiting, next, live runs, last failure",
    positional(optional=("jobid",)),
)
def status_view(options: argparse.Namespace) -> int:
    rows = api.status(options.jobid, db=options.db)
    if options.json:
        return show(options, rows)
    show(options, brief.cut(rows, "last_failure"))
    say("")
    say(f"waiting: {status.WAITING_MEANS}")
    return 0


@command(
    "lineage",
    "who produced a dataset's chunk, who consumed it, and the chain downstream",
    positional("datasetid", "dataid"),
)
def lineage_view(options: argparse.Namespace) -> int:
    found = api.lineage(options.datasetid, options.dataid, db=options.db)
    chains = found.downstream
    if options.json:
        say_lines(
            json.dumps(
                {
                    "producers": found.producers,
                    "consumers_now": found.consumers,
                    "downstream": {j: c.steps for j, c in chains.items()},
                    "cycles": {j: c.cycles for j, c in chains.items() if c.cycles},
                },
                indent=2,
                default=str,
            )
        )
        return 0
    say(f"{options.datasetid} {options.dataid}")
    for row in found.producers:
        run = found.runs[row["jobid"]]
        detail = f", attempt {run['attempt']} ended {run['ended']}" if run else " (no run history)"
        say(f"  produced by {row['jobid']}: {row['status']} at {row['modified']}{detail}")
    for row in found.consumers:
        say(f"  being consumed by {row['jobid']} since {row['modified']}")
    for chain in chains.values():
        for depth, jobid, outs in chain.steps:
            state = ", ".join(f"{d} {s}" for d, s in outs) or "not produced yet"
            say(f"  {'  ' * depth}-> {jobid}: {state}")
        for cycle in chain.cycles:
            say(f"  warning: cycle in lineage {' -> '.join(cycle)} (not followed)")
    return 0


def _resubmit_arguments(parser: argparse.ArgumentParser) -> None:
    positional("jobid", optional=("dataid",))(parser)
    parser.add_argument(
        "--cascade", action="store_true", help="also every downstream chunk built from it"
    )
    parser.add_argument(
        "--dry-run", action="store_true", help="show what would change; change nothing"
    )
    parser.add_argument("--failed", action="store_true", help="every FAILED chunk of the job")
    parser.add_argument(
        "--match", metavar="GLOB", help="dataids matching a pattern, e.g. '2025-11-*'"
    )
    parser.add_argument(
        "--from", dest="first", metavar="DATAID", help="dataids from this one (natural order)"
    )
    parser.add_argument("--to", dest="last", metavar="DATAID", help="dataids up to this one")
    # a clock's job's --from/--to is a backfill: periods it never ran are created RESUBMIT


def _print_changes(changes: list[reruns.Change], dry_run: bool = False) -> None:
    for change in changes:
        note = f" ({change.note})" if change.note else ""
        say(f"{change.jobid} {change.dataid}: {change.before} -> {change.after}{note}")
    changed = sum(1 for c in changes if c.after != "unchanged")
    noun = "chunk" if changed == 1 else "chunks"
    say(f"{changed} {noun} {'would be ' if dry_run else ''}changed")


@command(
    "resubmit", "set chunks to RESUBMIT (with --cascade: their downstream too)", _resubmit_arguments
)
def resubmit(options: argparse.Namespace) -> int:
    changes = api.resubmit(
        options.jobid, options.dataid, db=options.db, cascade=options.cascade,
        dry_run=options.dry_run, failed=options.failed, match=options.match,
        first=options.first, last=options.last,
    )  # fmt: skip
    _print_changes(changes, options.dry_run)
    return 0


def _ready_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("datasetid")
    parser.add_argument("dataids", nargs="*", metavar="DATAID", help="one or more chunks")
    parser.add_argument("--from", dest="first", metavar="DATAID", help="a range: from this one")
    parser.add_argument("--to", dest="last", metavar="DATAID", help="a range: up to this one")
    parser.add_argument(
        "--by",
        metavar="PRODUCER",
        help="the producer's name (default: the job registered as its producer, else external)",
    )


@command(
    "ready",
    "record that a producer outside our jobs made chunks of a dataset READY (a drop)",
    _ready_arguments,
)
def ready(options: argparse.Namespace) -> int:
    chunks = list(options.dataids)
    if (options.first is None) != (options.last is None):
        raise UsageError("give both --from and --to for a range")
    if options.first is not None:
        chunks += drops.dataid_range(options.first, options.last)
    if not chunks:
        raise UsageError("name the chunks: DATAID..., or --from and --to")
    marked, already = api.mark_ready(options.datasetid, chunks, db=options.db, producer=options.by)
    noun = "chunk" if marked == 1 else "chunks"
    say(f"{marked} {noun} of {options.datasetid} marked READY ({already} already READY)")
    return 0


@command(
    "hold",
    "freeze a chunk: nobody runs or consumes it until released",
    positional("jobid", "dataid"),
)
def hold(options: argparse.Namespace) -> int:
    _print_changes([api.hold(options.jobid, options.dataid, db=options.db)])
    return 0


@command("release", "unfreeze a held chunk, restoring its statuses", positional("jobid", "dataid"))
def release(options: argparse.Namespace) -> int:
    _print_changes([api.release(options.jobid, options.dataid, db=options.db)])
    return 0


def _actions_arguments(parser: argparse.ArgumentParser) -> None:
    positional(optional=("jobid", "dataid"))(parser)
    parser.add_argument("--limit", type=count, default=50, help="how many (default 50)")


@command(
    "actions",
    "list what was done to chunks by hand (resubmit, hold, release, recover, endjob; the CLI's"
    " and the live board's), newest first",
    _actions_arguments,
)
def actions(options: argparse.Namespace) -> int:
    with open_store(options, readonly=True, retired_ok=True) as store:
        if options.jobid:
            lifecycle.known(store, options.jobid)  # an unknown job is an error, not "no rows"
        rows = store.actions(options.jobid, options.dataid, options.limit)
    say(output.records(rows, options.json) if rows or options.json else "no actions recorded")
    return 0


def _purge_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--job", dest="jobid", help="only this job's history")
    parser.add_argument("--days-old", type=float, help="only runs started at least N days ago")
    parser.add_argument("--dry-run", action="store_true", help="list what would go; delete nothing")


@command(
    "purge", "delete run history and logs (never the statuses that gate work)", _purge_arguments
)
def purge(options: argparse.Namespace) -> int:
    runs = api.purge(
        options.jobid, db=options.db, days_old=options.days_old, dry_run=options.dry_run
    )
    verb = "would be purged" if options.dry_run else "purged"
    if options.dry_run:
        for run in runs:
            say(f"{run['jobid']} {run['dataid']} attempt {run['attempt']}")
    say(f"{output.plural(len(runs), 'run')} {verb}")
    return 0


def _check_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--at",
        metavar="TIME",
        help="judge at TIME ('YYYY-MM-DD HH:MM', the host's zone) instead of the store's now; "
        "a what-if: no alert is sent unless --alert",
    )
    parser.add_argument(
        "--alert", action="store_true", help="with --at: alert the late chunks all the same"
    )


@command(
    "check",
    "list chunks late on their job's ready_by promise and what blocks them; alert each "
    "once; exit 1 if any is late (for cron)",
    _check_arguments,
)
def check(options: argparse.Namespace) -> int:
    at = None
    if options.at is not None:  # given, even empty: a time is needed
        try:
            at = datetime.fromisoformat(options.at)
        except ValueError:
            raise UsageError(f"--at takes 'YYYY-MM-DD HH:MM', not '{options.at}'") from None
    # a what-if (--at) tells no one, and leaves the record of chunks alerted as it is
    late, problems = api.check(at, db=options.db, alert=True if options.alert else None)
    for problem in problems:
        warn(problem)
    if late or options.json:
        say(output.records([chunk._asdict() for chunk in late], options.json))
    else:
        say("nothing is late")
    return 1 if late else 0


@command(
    "deploys",
    "list the deploys of a project recorded in the store (utility apply), newest first",
    lambda p: p.add_argument("--limit", type=count, default=20, help="how many (default 20)"),
)
def deploys(options: argparse.Namespace) -> int:
    with open_store(options, readonly=True, retired_ok=True) as store:
        rows = store.deploys(options.limit)
    say(output.records(rows, options.json) if rows or options.json else "no deploys recorded")
    return 0
