"""``utility``: the admin CLI over the store (also ``bin/utility.sh``)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable

from .. import crypto, lifecycle, output
from ..errors import PasskeyMissing, UsageError
from ..store import Store, files_dir, locate, now
from . import guarded, say
from . import validate as _validate

COMMANDS: dict[str, tuple[str, Callable[[argparse.Namespace], int]]] = {}


def command(name: str, summary: str):
    def register(func: Callable[[argparse.Namespace], int]):
        COMMANDS[name] = (summary, func)
        return func

    return register


def _open(options: argparse.Namespace) -> Store:
    return Store.open(locate(options.db))


def _print_listing(options: argparse.Namespace, columns, rows) -> int:
    say(output.listing(columns, rows, options.json))
    return 0


# -- the store --------------------------------------------------------------------------


@command("createtables", "create (or upgrade) the store and its tables; safe to repeat")
def createtables(options: argparse.Namespace) -> int:
    path = locate(options.db)
    store, applied = Store.create(path)
    store.close()
    say(f"tables created in {path}" if applied else f"store {path} is up to date")
    return 0


@command("where", "show the store in use and the folder of its locks and logs")
def where(options: argparse.Namespace) -> int:
    path = locate(options.db)
    rows = [("store", str(path)), ("files", str(files_dir(path)))]
    return _print_listing(options, ["item", "path"], rows)


@command("sql", "run one read-only SQL statement and print its rows")
def sql(options: argparse.Namespace) -> int:
    with _open(options) as store:
        columns, rows = store.query(options.statement)
    return _print_listing(options, columns, rows)


def _change(options: argparse.Namespace) -> int:
    with _open(options) as store:
        columns, rows, changed = store.execute(options.statement)
    if columns:
        return _print_listing(options, columns, rows)
    say(f"{max(changed, 0)} rows affected")
    return 0


command("dml", "run one insert/update/delete statement in its own transaction")(_change)
command("ddl", "run one create/alter/drop statement in its own transaction")(_change)


# -- listings ---------------------------------------------------------------------------


@command("runs", "list the newest job runs (OUT rows), newest first")
def runs(options: argparse.Namespace) -> int:
    with _open(options) as store:
        rows = store.runs(options.limit)
    say(output.records(rows, options.json))
    return 0


@command("jobs", "list every registered job row")
def jobs(options: argparse.Namespace) -> int:
    with _open(options) as store:
        rows = store.jobs()
    say(output.records(rows, options.json))
    return 0


def _shorten(token: object) -> str:
    text = "" if token is None else str(token)
    return text if len(text) <= 10 else text[:8] + "..."


@command("datasets", "list registered datasets (passwords shortened)")
def datasets(options: argparse.Namespace) -> int:
    with _open(options) as store:
        rows = list(store.datasets().values())
    for row in rows:
        row["encryptedpass"] = _shorten(row["encryptedpass"])
    say(output.records(rows, options.json))
    return 0


@command("getjob", "show a job's datasets, their metadata and its other items")
def getjob(options: argparse.Namespace) -> int:
    with _open(options) as store:
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
                "itemvalue": item.itemvalue,
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


# -- status changes ---------------------------------------------------------------------


@command("endjob", "set a chunk's end status by hand: READY, FAILED, RESUBMIT or HOLD")
def endjob(options: argparse.Namespace) -> int:
    status = options.status.upper()
    with _open(options) as store:
        updated, released = lifecycle.end_chunk(store, options.jobid, options.dataid, status)
    say(
        f"{updated} rows updated to {status} for {options.jobid} and {options.dataid} "
        f"{released} IN file-local locks released"
    )
    return 0


@command("forcejob", "mark a chunk RUNNING without checking its inputs (development only)")
def forcejob(options: argparse.Namespace) -> int:
    dataid = options.dataid or now().replace(" ", "T")
    with _open(options) as store:
        job = lifecycle.load_job(store, options.jobid)
        lifecycle.force(store, job, dataid)
    say(f"{options.jobid} forced to RUNNING at dataid {dataid}")
    print(
        f"warning: this skips every check; end it with 'utility endjob {options.jobid} "
        f"{dataid} READY|FAILED' or remove it with 'utility deleterun'",
        file=sys.stderr,
    )
    return 0


@command("deleterun", "delete every status row of a job at a dataid")
def deleterun(options: argparse.Namespace) -> int:
    with _open(options) as store:
        deleted = lifecycle.delete_chunk(store, options.jobid, options.dataid)
    say(f"{deleted} rows deleted for {options.jobid} and {options.dataid}")
    return 0


# -- passwords --------------------------------------------------------------------------


@command("crypt", "encrypt (-e) or decrypt (-d) a text with the passkey")
def crypt(options: argparse.Namespace) -> int:
    words = options.words
    passkey = crypto.read_passkey()
    if len(words) == 2:  # the seed's form: crypt -e PASSKEY TEXT
        passkey, words = words[0], words[1:]
    if len(words) != 1:
        raise UsageError("usage: utility crypt -e|-d TEXT")
    if passkey is None:
        raise PasskeyMissing("crypt")
    if options.encrypt:
        say(crypto.encrypt(words[0], passkey, seed_format=options.seed_format))
    else:
        say(crypto.decrypt(words[0], passkey))
    return 0


command("validate", _validate.SUMMARY)(_validate.run)


# -- parsing ----------------------------------------------------------------------------


def _arguments(name: str, parser: argparse.ArgumentParser) -> None:
    if name in ("sql", "dml", "ddl"):
        parser.add_argument("statement", help="one SQL statement (quote it)")
    elif name in ("endjob",):
        parser.add_argument("jobid")
        parser.add_argument("dataid")
        parser.add_argument("status", help="READY, FAILED, RESUBMIT or HOLD")
    elif name in ("deleterun",):
        parser.add_argument("jobid")
        parser.add_argument("dataid")
    elif name == "forcejob":
        parser.add_argument("jobid")
        parser.add_argument("dataid", nargs="?", help="default: the current time")
    elif name == "getjob":
        parser.add_argument("jobid")
    elif name == "runs":
        parser.add_argument("--limit", type=int, default=20, help="how many (default 20)")
    elif name == "validate":
        _validate.arguments(parser)
    elif name == "crypt":
        mode = parser.add_mutually_exclusive_group(required=True)
        mode.add_argument("-e", dest="encrypt", action="store_true", help="encrypt TEXT")
        mode.add_argument("-d", dest="decrypt", action="store_true", help="decrypt TEXT")
        parser.add_argument(
            "--seed-format", action="store_true", help="encrypt in the seed's (Java) format"
        )
        parser.add_argument("words", nargs="+", metavar="TEXT")


def parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--db", default=argparse.SUPPRESS, help="the store (default: $DATAFLOW_DB or ./dataflow.db)"
    )
    common.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print JSON, for scripts"
    )
    top = argparse.ArgumentParser(
        prog="utility",
        parents=[common],
        description="Administer an OpenDataFlow store. 'utility COMMAND --help' for each command.",
    )
    sub = top.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name, (summary, _) in COMMANDS.items():
        _arguments(name, sub.add_parser(name, parents=[common], help=summary, description=summary))
    return top


def _seed_passkey(argv: list[str]) -> list[str]:
    """The seed's ``utility.sh PASSKEY COMMAND ...`` form, when no passkey is configured."""
    seed_form = len(argv) >= 2 and argv[0] not in COMMANDS and argv[1] in COMMANDS
    if seed_form and crypto.read_passkey() is None:
        os.environ["PASSKEY"] = argv[0]
        return argv[1:]
    return argv


def _dispatch(argv: list[str]) -> int:
    options = parser().parse_args(_seed_passkey(argv))
    options.db = getattr(options, "db", None)
    options.json = getattr(options, "json", False)
    return COMMANDS[options.command][1](options)


def main(argv: list[str] | None = None) -> int:
    return guarded(lambda: _dispatch(list(sys.argv[1:] if argv is None else argv)))


if __name__ == "__main__":
    sys.exit(main())
