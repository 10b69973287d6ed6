"""``utility`` commands that register datasets and jobs, move the configuration between
stores, rekey passwords, and ``crypt`` a text. A dataset's password never comes from
the command line; a passkey only in the seed's forms (then hidden from ``ps``)."""

from __future__ import annotations

import argparse
import getpass
import sys
from pathlib import Path

from .. import crypto
from ..errors import UsageError
from ..ops import project, registry
from ..run.claim import lifecycle
from ..run.listeners import alerts
from ..store import DATASET_COLUMNS, shown
from . import say, say_lines
from .commands import command, open_store, positional, write_whole
from .output import plural


def _secret(prompt: str, from_stdin: bool) -> str:
    """A secret from standard input (one line) or from a prompt on the terminal."""
    if from_stdin:
        try:
            line = sys.stdin.readline()
        except UnicodeDecodeError:
            raise UsageError(f"{prompt.rstrip(': ')} on standard input is not UTF-8 text") from None
        if not line:
            raise UsageError(f"expected {prompt.rstrip(': ').lower()} on standard input")
        return line.rstrip("\r\n")
    if not sys.stdin.isatty():
        raise UsageError(f"{prompt.rstrip(': ')} needs a terminal, or --password-stdin")
    return getpass.getpass(prompt)


def _dataset_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("datasetid")
    for column in DATASET_COLUMNS[1:-1]:
        parser.add_argument(f"--{column}")
    secret = parser.add_mutually_exclusive_group()
    secret.add_argument("--password", action="store_true", help="prompt for the password")
    secret.add_argument(
        "--password-stdin", action="store_true", help="read the password from stdin"
    )


@command(
    "register-dataset",
    "add or update a dataset (password from a prompt or stdin)",
    _dataset_arguments,
)
def register_dataset(options: argparse.Namespace) -> int:
    row = {c: getattr(options, c) for c in DATASET_COLUMNS[:-1]}
    password = None
    if options.password or options.password_stdin:
        password = _secret("Password: ", options.password_stdin)
    with open_store(options) as store:
        new = registry.register_dataset(store, row, password, crypto.read_passkey())
    say(f"dataset {options.datasetid} {'registered' if new else 'updated'}")
    return 0


def _job_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("jobid")
    for flag, dest in (("--in", "inputs"), ("--out", "outputs")):  # (--in a --in b: both)
        parser.add_argument(
            flag,
            dest=dest,
            nargs="+",
            action="extend",
            default=[],
            metavar="DATASET",
            required=True,
        )
    parser.add_argument(
        "--set",
        nargs="+",
        action="extend",
        default=[],
        metavar="NAME=VALUE",
        help="settings: retries, max_parallel, timeout, spark_args, spark_remote, batch",
    )
    parser.add_argument(
        "--env",
        nargs="+",
        action="extend",
        default=[],
        metavar="NAME=VALUE",
        help="extra environment items (repeat it, or name several)",
    )


@command(
    "register-job",
    "add or replace a job: its IN and OUT datasets, settings, environment",
    _job_arguments,
)
def register_job(options: argparse.Namespace) -> int:
    settings = registry.parse_pairs(options.set, "--set")
    env = registry.parse_pairs(options.env, "--env")
    with open_store(options) as store:
        new = registry.register_job(
            store, options.jobid, options.inputs, options.outputs, settings, env
        )
    say(f"job {options.jobid} {'registered' if new else 'replaced'}")
    return 0


def _set_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("jobid")
    parser.add_argument("pairs", nargs="+", metavar="NAME=VALUE")


@command("set", "change settings or environment of a registered job", _set_arguments)
def set_(options: argparse.Namespace) -> int:
    assign = registry.parse_pairs(options.pairs, "set")
    with open_store(options) as store:
        registry.change_job(store, options.jobid, assign, [])
    say(f"job {options.jobid}: {', '.join(assign)} set")
    return 0


def _unset_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("jobid")
    parser.add_argument("names", nargs="+", metavar="NAME")


@command("unset", "remove settings or environment names of a registered job", _unset_arguments)
def unset(options: argparse.Namespace) -> int:
    with open_store(options) as store:
        registry.change_job(store, options.jobid, {}, options.names)
    say(f"job {options.jobid}: {', '.join(options.names)} removed")
    return 0


@command(
    "notify-test",
    "send a test alert where JOB's alerts go (no JOB or '*': the store-wide default)",
    positional(optional=("jobid",)),
)
def notify_test(options: argparse.Namespace) -> int:
    with open_store(options, readonly=True) as store:
        jobid = options.jobid if options.jobid != alerts.STORE_WIDE else None
        setting = lifecycle.load_job(store, jobid).settings.alerts if jobid else ""
        urls = alerts.urls_for(store, setting)
        where = f"store {shown(store.path)}" + (f", job {jobid}" if jobid else "")
    if not urls:
        raise UsageError(
            f"no alerts configured{f' for job {jobid}' if jobid else ''}: "
            "utility set JOB alerts=URL, or utility set '*' alerts=URL for every job"
        )
    deliveries = alerts.test(urls, where)
    if any(d.result == "missing" for d in deliveries):
        raise UsageError(alerts.MISSING)
    for d in deliveries:
        say(
            f"sent to {d.url}"
            if d.result == "sent"
            else f"not sent to {d.url}: {d.why or d.result}"
        )
    return 0 if all(d.result == "sent" for d in deliveries) else 1


@command("unregister-dataset", "remove a dataset no job uses", positional("datasetid"))
def unregister_dataset(options: argparse.Namespace) -> int:
    with open_store(options) as store:
        registry.unregister_dataset(store, options.datasetid)
    say(f"dataset {options.datasetid} removed")
    return 0


@command(
    "unregister-job", "remove a job's registration (its chunks' history stays)", positional("jobid")
)
def unregister_job(options: argparse.Namespace) -> int:
    with open_store(options) as store:
        registry.unregister_job(store, options.jobid)
    say(f"job {options.jobid} removed")
    return 0


def _export_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", help="the file to write ('-': standard output)")
    parser.add_argument(
        "--project",
        action="store_true",
        help="a project file (dataflow.toml: utility plan/apply) instead of JSON",
    )


@command("export", "write every dataset and job to one JSON file", _export_arguments)
def export(options: argparse.Namespace) -> int:
    with open_store(options, readonly=True) as store:
        if options.project:
            text = project.dump(store.datasets(), store.job_rows()).rstrip("\n")
        else:
            text = registry.export(store)
    if options.file == "-":
        say_lines(text)
    else:
        write_whole(Path(options.file), text + "\n")
        say(f"configuration written to {options.file}")
    return 0


MAX_IMPORT = 64 << 20  # bytes: an export of thousands of jobs is a few MiB


@command("import", "add or replace the datasets and jobs of an exported file", positional("file"))
def import_(options: argparse.Namespace) -> int:
    try:
        if options.file == "-":
            data = sys.stdin.buffer.read(MAX_IMPORT + 1)
        else:
            with open(options.file, "rb") as handle:
                data = handle.read(MAX_IMPORT + 1)
        if len(data) > MAX_IMPORT:
            raise UsageError(f"{options.file} is larger than {MAX_IMPORT >> 20} MiB: not an export")
        text = data.decode("utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {options.file}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        source = "standard input" if options.file == "-" else options.file
        raise UsageError(f"{source} is not UTF-8 text (byte {exc.start + 1})") from None
    with open_store(options) as store:
        datasets, jobs = registry.import_(store, text)
    say(f"{plural(datasets, 'dataset')} and {plural(jobs, 'job')} imported")
    return 0


def _rekey_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--old-file", help="file holding the old passkey (default: prompt, or PASSKEY/PASSKEY_FILE)"
    )
    parser.add_argument("--new-file", help="file holding the new passkey (default: prompt)")


@command("rekey", "re-encrypt every stored password under a new passkey", _rekey_arguments)
def rekey(options: argparse.Namespace) -> int:
    if options.old_file:
        old = crypto.passkey_file(options.old_file)
    else:
        old = crypto.read_passkey() or _secret("Old passkey: ", False)
    new = (
        crypto.passkey_file(options.new_file)
        if options.new_file
        else _secret("New passkey: ", False)
    )
    with open_store(options) as store:
        count = registry.rekey(store, old, new)
    say(f"{plural(count, 'password')} re-encrypted")
    return 0
