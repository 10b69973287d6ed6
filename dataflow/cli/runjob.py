"""``RunJob ./loadbob.sh [args...]``: claim the job's next chunk, run the script on it,
record READY or FAILED. ``--all`` drains every claimable chunk, ``--parallel N`` at once."""

from __future__ import annotations

import os
import sys
from types import SimpleNamespace

from .. import __version__, api, crypto
from ..errors import DriverFailed, WorkerFailed
from . import exiting, guarded, launching, say, seed_passkey_given, stamp, text_arguments, warn
from .report import Report, live

TYPE_CHECKING = False  # typing's flag, without importing typing (a run's start)
if TYPE_CHECKING:
    import argparse

USAGE = """RunJob [--db PATH] [--all] [--parallel N] [--workers W] [--batch K] [--validate CHECK]
              [--dry-run] SCRIPT [ARGS...]
       RunJob [--db PATH] --all [--parallel N] [--workers W] [--batch K] FOLDER"""
DESCRIPTION = """\
Infers the job from SCRIPT's name (./loadbob.sh -> loadbob), claims the smallest
chunk whose inputs are all READY and that the job has not produced, runs SCRIPT
with the chunk's environment, and records READY (exit 0) or FAILED.
A .py SCRIPT runs through spark-submit, or as a Spark Connect client of $SPARK_REMOTE
(else the job's spark_remote setting); one that defines run(spark, job) is drained
by one Spark driver or client (--all), which calls it per chunk; one that defines
run_batch(spark, batch) gets up to K chunks per call (--batch K), each still its own
chunk, a failed batch split until only the chunks that fail alone fail. Passwords are decrypted with the passkey
from PASSKEY or PASSKEY_FILE (or, as in the seed, a passkey as first argument).
With --all, a FOLDER runs every job script in it (named after a registered job),
producers before consumers, round after round until nothing is left to claim;
--parallel, --workers and --batch apply to each of its jobs.
"""
EXIT_CODES = """exit codes:
  0        the chunk is READY, or there was nothing to do (cron calls again later)
  N        a failed job's own exit code (1 when its validation failed)
  1        with --all: some chunk FAILED
  2        a usage or configuration error (nothing claimed)
  3        the store failed (disk full, I/O error)
  124      the job was killed by its timeout
  128+n    RunJob, or the job, was stopped by signal n
"""


def _formatter(prog: str) -> argparse.HelpFormatter:
    """argparse's help formatter at the terminal's width, minus the ``shutil`` import
    argparse makes to find it (~2 ms of every RunJob's start)."""
    import argparse

    try:
        width = os.get_terminal_size().columns
    except OSError:  # not a terminal
        width = 80
    return argparse.RawDescriptionHelpFormatter(prog, width=width - 2)


def _parser() -> argparse.ArgumentParser:
    import argparse

    from . import Parser  # a usage mistake is one line, as in utility

    parser = Parser(
        prog="RunJob",
        usage=USAGE,
        description=DESCRIPTION,
        epilog=EXIT_CODES,
        formatter_class=_formatter,
    )
    parser.add_argument("--version", action="version", version=f"RunJob {__version__}")
    parser.add_argument("--db", help="the store (default: $DATAFLOW_DB, else ./dataflow.db)")
    _drain_arguments(parser)
    parser.add_argument(
        "--validate",
        metavar="CHECK",
        help="run CHECK (same environment) after a successful job; READY only if it passes",
    )
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="show the chunk that would be claimed and its environment; change nothing",
    )
    parser.add_argument("script", nargs="?", help=argparse.SUPPRESS)  # checked in main
    parser.add_argument("args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    return parser


def _drain_arguments(parser: argparse.ArgumentParser) -> None:
    """--all and the numbers of a drain: --parallel, --workers, --batch."""
    parser.add_argument(
        "--all", action="store_true", help="keep claiming until no chunk is claimable"
    )
    parser.add_argument(
        "--parallel",
        type=int,
        default=None,
        metavar="N",
        help="run up to N chunks at once (implies --all)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        metavar="W",
        help="spread the N slots of --parallel over W processes (default: one a core on "
        "PostgreSQL, 1 on SQLite; not for a .py job, run through Spark: a folder passes it "
        "to its other jobs)",
    )
    parser.add_argument(
        "--batch",
        type=int,
        default=None,
        metavar="K",
        help="a .py job with def run_batch(spark, batch): run up to K chunks per call "
        "(implies --all; default: the job's batch setting, else 20)",
    )


def _seed_passkey(options: argparse.Namespace) -> str | None:
    """The seed's ``RunJob PASSKEY ./job.sh`` form, recognised only when no passkey is
    configured and the first word is not a script while the second one is."""
    if crypto.read_passkey() is not None or not options.args:
        return None
    if os.path.exists(options.script) or not os.path.exists(options.args[0]):
        return None
    passkey = options.script
    options.script, options.args = options.args[0], options.args[1:]
    return passkey


def _dry_run(preview: api.Preview) -> int:
    if preview.cap_full:
        say(f"{live(preview.live, preview.jobid)} (max_parallel {preview.cap}): would not start")
        return 0
    if preview.dataid is None:
        say(f"{stamp()}: no suitable data available for job. Not running it")
        return 0
    say(f"would claim dataid {preview.dataid} for {preview.jobid} and run: {preview.command}")
    if preview.remote:
        say(preview.remote)
    import shlex

    for name, value in preview.environment.items():
        say(f"{name}={shlex.quote(value)}")
    return 0


def _hold_standard_descriptors() -> None:
    """Put /dev/null on a closed stdin, stdout or stderr (``RunJob ... >&-``), so that no
    file opened later (the store, a log) becomes descriptor 1 and takes output."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            os.open(os.devnull, os.O_RDWR)  # the lowest free descriptor: this one


def _passkey(options: argparse.Namespace) -> str | None:
    """The seed's passkey argument (hidden from ps, the keeper's and every child's
    argv), else None: the API reads PASSKEY or PASSKEY_FILE."""
    passkey = _seed_passkey(options)
    if passkey:
        seed_passkey_given(passkey)
    return passkey or None


def run(options: argparse.Namespace) -> int:
    _hold_standard_descriptors()
    every = options.all or options.parallel is not None or options.batch is not None
    api.check_options(options.parallel, options.workers, options.batch)
    if every and os.path.isdir(options.script):
        from . import folder

        return folder.drain(options)
    passkey = _passkey(options)  # (the seed's passkey word is no longer options.script)
    api.check_options(options.parallel, options.workers, options.batch, options.script)
    with api.JobRun(options.script, options.args, db=options.db, passkey=passkey, warn=warn) as job:
        if options.dry_run:
            return _dry_run(job.preview())
        report = Report(options.script, job.jobid, every)
        try:
            done = job.drain(
                every=every, parallel=options.parallel or 1, workers=options.workers,
                batch=options.batch or 0, validate=options.validate, echo=not every, notify=report,
                started=report.start,
            )  # fmt: skip
        except (DriverFailed, WorkerFailed):
            if report.summary is not None and report.summary.started:  # what it did before it died
                report.finish(report.summary, report.left)
            raise
        report.finish(report.summary, lambda: done.waiting)
    return done.exit_code


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # the process's own command line
        launching("RunJob")
        return exiting(guarded(lambda: _start(sys.argv[1:])))
    return guarded(lambda: _start(argv))


def _start(argv: list[str]) -> int:
    argv = text_arguments(argv)
    if argv and argv[0] and not argv[0].startswith("-") and "--" not in argv:  # a cron tick
        return run(_plain(argv[0], argv[1:]))
    parser = _parser()
    options = parser.parse_args(argv)
    if not options.script:
        parser.error("name the job's script, as in: RunJob ./loadbob.sh")
    return run(options)


def _plain(script: str, args: list[str]) -> argparse.Namespace:
    """What the parser makes of ``RunJob SCRIPT ARGS...`` (every word after the script
    is the script's), without importing argparse: ~2 ms of every cron tick's start."""
    options = {"db": None, "all": False, "parallel": None, "workers": None, "batch": None}
    options |= {"validate": None, "dry_run": False, "script": script, "args": args}
    return SimpleNamespace(**options)  # type: ignore[return-value]


if __name__ == "__main__":
    sys.exit(main())
