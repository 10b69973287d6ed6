"""``utility``: the admin CLI over the store (also ``bin/utility.sh``)."""

from __future__ import annotations

import argparse
import os
import shlex
import sys

from .. import __version__, api, crypto
from ..errors import UsageError
from ..ops import copystore
from ..run.claim import lifecycle
from ..run.listeners import alerts
from ..run.process import logs, storedlogs
from ..run.spark import sparkconnect
from ..store import create_store, files_of, locate, now, refuse_if_moved, same_store, shown
from . import (  # noqa: F401  (they register commands)
    Parser,
    board,
    brief,
    chunks,
    exiting,
    guarded,
    operations,
    output,
    passwords,
    printable_lines,
    projects,
    registration,
    retirement,
    say,
    seed_passkey_given,
    serving,
    streaming,
    text_arguments,
    validate,
    warn,
)
from .commands import COMMANDS, command, count, open_store, positional


def forcible(*names: str):
    """Plain words, and ``--force`` to change a chunk whose run is live."""
    words = positional(*names)

    def add(parser: argparse.ArgumentParser) -> None:
        words(parser)
        parser.add_argument(
            "--force", action="store_true", help="even if a live run holds the chunk"
        )

    return add


def _print_listing(options: argparse.Namespace, columns, rows) -> int:
    say(output.listing(columns, rows, options.json))
    return 0


# -- the store --------------------------------------------------------------------------


@command("createtables", "create (or upgrade) the store and its tables; safe to repeat")
def createtables(options: argparse.Namespace) -> int:
    path = locate(options.db)
    store, applied = create_store(path)
    with store:
        refuse_if_moved(store)
    if applied == store.version:
        say(f"tables created in {shown(path)}")
    elif applied:
        say(f"store {shown(path)} upgraded to schema version {store.version}")
    else:
        say(f"store {shown(path)} is up to date")
    return 0


def _copy_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--to", required=True, metavar="STORE", help="a file path or a postgresql:// URL"
    )
    parser.add_argument("--force", action="store_true", help="replace what the target holds")
    parser.add_argument(
        "--retire", action="store_true", help="then refuse all work on this store (a move)"
    )


@command(
    "copy-store",
    "copy the whole store, history included, to another store (all or nothing)",
    _copy_arguments,
)
def copy_store(options: argparse.Namespace) -> int:
    target_address = locate(options.to)
    if same_store(target_address, locate(options.db)):  # a symlink to it, a hard link
        raise UsageError("--to names the store being copied")
    retire = now()[:16] if options.retire else None
    where = shown(target_address)
    with open_store(options, readonly=not retire) as source:
        copied = copystore.copy_to(source, target_address, where, options.force, retire)
    counts = ", ".join(f"{n} {table}" for table, n in copied.items())
    say(f"copied to {shown(target_address)}: {counts}")
    if retire:
        say(f"this store is retired: its commands now refuse work and name {where}")
    return 0


@command("where", "show the store in use, the folder of its run logs and its lock file")
def where(options: argparse.Namespace) -> int:
    path = locate(options.db)
    logs, locks = files_of(path)
    rows = [("store", shown(path)), ("logs", str(logs)), ("locks", str(locks))]
    return _print_listing(options, ["item", "path"], rows)


@command("sql", "run one read-only SQL statement and print its rows", positional("statement"))
def sql(options: argparse.Namespace) -> int:
    with open_store(options, readonly=True, retired_ok=True) as store:
        columns, rows = store.query(options.statement)
    return _print_listing(options, columns, rows)


def _change(options: argparse.Namespace) -> int:
    with open_store(options) as store:
        columns, rows, changed = store.execute(options.statement)
    if columns:
        return _print_listing(options, columns, rows)
    changed = max(changed, 0)
    say(f"{changed} {'row' if changed == 1 else 'rows'} affected")
    return 0


command(
    "dml", "run one insert/update/delete statement in its own transaction", positional("statement")
)(_change)
command(
    "ddl", "run one create/alter/drop statement in its own transaction", positional("statement")
)(_change)


# -- listings ---------------------------------------------------------------------------


@command("jobs", "list every registered job row")
def jobs(options: argparse.Namespace) -> int:
    with open_store(options, readonly=True) as store:
        rows = store.jobs()
    for row in rows:  # a Spark Connect address or an alert URL may hold a token
        row["itemvalue"] = _shown_value(row["itemtype"], row["itemvalue"])
    say(output.records(rows, options.json))
    return 0


def _shorten(token: object) -> str:
    text = "" if token is None else str(token)
    return text if len(text) <= 10 else text[:8] + "..."


@command("datasets", "list registered datasets (passwords shortened)")
def datasets(options: argparse.Namespace) -> int:
    with open_store(options, readonly=True) as store:
        rows = list(store.datasets().values())
    for row in rows:
        row["encryptedpass"] = _shorten(row["encryptedpass"])
    say(output.records(rows, options.json))
    return 0


@command("getjob", "show a job's datasets, their metadata and its other items", positional("jobid"))
def getjob(options: argparse.Namespace) -> int:
    with open_store(options, readonly=True) as store:
        job = lifecycle.load_job(store, options.jobid)
        metadata = store.datasets(job.inputs + job.outputs)
        items = store.job_items(options.jobid)
    rows = []
    for item in items:
        meta = metadata.get(item.datasetid or "", {})
        rows.append(
            {
                "itemtype": item.itemtype,
                "datasetid": item.datasetid,
                "itemvalue": _shown_value(item.itemtype, item.itemvalue),
                "hostname": meta.get("hostname"),
                "database": meta.get("database"),
                "schemaname": meta.get("schemaname"),
                "tablename": meta.get("tablename"),
                "username": meta.get("username"),
                "password": "set" if meta.get("encryptedpass") else "",
            }
        )
    say(output.records(rows, options.json))
    return 0


def _shown_value(itemtype: str, value: str | None) -> str | None:
    """A job item as shown: a Spark Connect address or alert URLs without their tokens."""
    if itemtype == sparkconnect.REMOTE_SETTING and value:
        return sparkconnect.masked(value)
    if itemtype == alerts.ALERTS and value:
        return " ".join(map(alerts.masked, alerts.split(value)))
    return value


# -- status changes ---------------------------------------------------------------------


@command(
    "endjob",
    "set a chunk's end status by hand: READY, FAILED, RESUBMIT or HOLD",
    forcible("jobid", "dataid", "status"),
)
def endjob(options: argparse.Namespace) -> int:
    status = options.status.upper()
    updated, released = api.endjob(
        options.jobid, options.dataid, status, db=options.db, force=options.force
    )
    rows = "row" if updated == 1 else "rows"
    # a chunk ended by hand has no consumer lock to release, as a rule: say so only if it had
    locks = f" {released} IN file-local locks released" if released else ""
    say(f"{updated} {rows} updated to {status} for {options.jobid} and {options.dataid}{locks}")
    return 0


@command(
    "forcejob",
    "mark a chunk RUNNING without checking its inputs (development only)",
    positional("jobid", optional=("dataid",)),
)
def forcejob(options: argparse.Namespace) -> int:
    dataid = options.dataid or now().replace(" ", "T")
    with open_store(options) as store:
        job = lifecycle.load_job(store, options.jobid)
        lifecycle.force(store, job, dataid)
    say(f"{options.jobid} forced to RUNNING at dataid {dataid}")
    end = shlex.join(["utility", "endjob", options.jobid, dataid])
    warn(
        f"this skips every check; end it with '{end} READY|FAILED' or remove it with 'utility deleterun'"
    )
    return 0


@command("deleterun", "delete every status row of a job at a dataid", forcible("jobid", "dataid"))
def deleterun(options: argparse.Namespace) -> int:
    with open_store(options) as store:
        deleted = lifecycle.delete_chunk(store, options.jobid, options.dataid, force=options.force)
    say(f"{output.plural(deleted, 'row')} deleted for {options.jobid} and {options.dataid}")
    return 0


@command(
    "recover",
    "mark FAILED every RUNNING chunk whose run has died (RunJob does it too)",
    positional(optional=("jobid",)),
)
def recover(options: argparse.Namespace) -> int:
    done = api.recover(options.jobid, db=options.db)
    for problem in done.problems:
        warn(problem)
    for change, place in zip(done.changes, done.places, strict=True):
        where = f" ({place})" if place else ""
        say(f"{change.jobid} {change.dataid}: its run{where} died; marked FAILED (abandoned)")
    say(f"{len(done.changes)} abandoned chunk{'' if len(done.changes) == 1 else 's'} recovered")
    return 0


# -- run history ------------------------------------------------------------------------


def _history_arguments(parser: argparse.ArgumentParser) -> None:
    positional(optional=("jobid", "dataid"))(parser)
    parser.add_argument("--limit", type=count, default=50, help="how many (default 50)")


def _log_arguments(parser: argparse.ArgumentParser) -> None:
    positional("jobid", "dataid")(parser)
    parser.add_argument("--attempt", type=count, help="which attempt (default: the last)")
    parser.add_argument(
        "--follow",
        "-f",
        action="store_true",
        help="print the log as it grows, until the run ends (from any host: the store's copy)",
    )


@command(
    "history",
    "list runs (one row per attempt), newest first; for a chunk, what was done to it by hand",
    _history_arguments,
)
def history(options: argparse.Namespace) -> int:
    with open_store(options, readonly=True, retired_ok=True) as store:
        if options.jobid:
            lifecycle.known(store, options.jobid)  # an unknown job is an error, not "no rows"
        rows = store.history(options.jobid, options.dataid, options.limit)
        acts = store.actions(options.jobid, options.dataid) if options.dataid else []
    if not options.json:
        for row in rows:
            del row["command"], row["logpath"]
        brief.cut(rows, "reason")
    say(output.records(rows, options.json))
    if acts and not options.json:  # a chunk's: what was done to it by hand, newest first
        say("")
        say(f"actions on {options.jobid} {options.dataid} (utility actions):")
        say(output.records(acts, False))
    return 0


@command(
    "log",
    "print the log of a chunk's last run (or of --attempt K), from any host",
    _log_arguments,
)
def log(options: argparse.Namespace) -> int:
    terminal = sys.stdout.isatty()  # piped, the bytes as written (for less -R, grep)

    def write(data: bytes) -> None:
        sys.stdout.buffer.write(printable_lines(data) if terminal else data)
        sys.stdout.buffer.flush()

    with open_store(options, readonly=True, retired_ok=True) as store:
        lifecycle.known(store, options.jobid)
        run = logs.run_of(store, options.jobid, options.dataid, options.attempt)
        if options.follow:
            storedlogs.follow(store, run, write)
        else:
            write(storedlogs.read(store, run))
    return 0


# -- parsing ----------------------------------------------------------------------------


def parser(command: str | None = None) -> argparse.ArgumentParser:
    """``utility``'s parser: every command's, or ``command``'s alone: a command line names
    one command, and building the parsers of all of them is ~10 ms of every start."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--db", default=argparse.SUPPRESS, help="the store (default: $DATAFLOW_DB or ./dataflow.db)"
    )
    common.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON, for scripts"
    )
    top = Parser(  # its subcommands' parsers are Parsers too
        prog="utility",
        parents=[common],
        description="Administer an OpenDataFlow store. 'utility COMMAND --help' for each command.",
    )
    top.add_argument("--version", action="version", version=f"utility {__version__}")
    sub = top.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for cmd in COMMANDS.values():
        if command not in (None, cmd.name):
            continue
        cmd_parser = sub.add_parser(
            cmd.name, parents=[common], help=cmd.summary, description=cmd.summary
        )
        if cmd.arguments:
            cmd.arguments(cmd_parser)
    return top


def _command(argv: list[str]) -> str | None:
    """The command a command line names after ``--db X``, ``--db=X`` or ``--json`` only;
    None for anything else (no known command; ``-h``, ``--version``, ``--``, an
    abbreviation such as ``--d``): the whole parser reads it, prints the help or says
    what is wrong."""
    words = iter(argv)
    for word in words:
        if word == "--db":
            next(words, None)  # its value, whatever it is
        elif word == "--json" or word.startswith("--db="):
            continue
        else:
            return word if word in COMMANDS else None
    return None


def _seed_passkey(argv: list[str]) -> list[str]:
    """The seed's ``utility.sh PASSKEY COMMAND ...`` form, when no passkey is configured."""
    seed_form = (
        len(argv) >= 2
        and not argv[0].startswith("-")  # an option such as --json is never a passkey
        and argv[0] not in COMMANDS
        and argv[1] in COMMANDS
    )
    if seed_form and crypto.read_passkey() is None:
        seed_passkey_given(argv[0])
        os.environ["PASSKEY"] = argv[0]
        return argv[1:]
    return argv


def _dispatch(argv: list[str]) -> int:
    argv = _seed_passkey(text_arguments(argv))
    options = parser(_command(argv)).parse_args(argv)
    options.db = getattr(options, "db", None)
    options.json = getattr(options, "json", False)
    return COMMANDS[options.command].run(options)


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # the process's own command line
        return exiting(guarded(lambda: _dispatch(sys.argv[1:])))
    return guarded(lambda: _dispatch(list(argv)))


if __name__ == "__main__":
    sys.exit(main())
