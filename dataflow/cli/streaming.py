"""``utility stream`` (start a job's stream: micro-batches as chunks) and ``utility drop``
(items into a landing folder)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .. import crypto, landing
from ..errors import StreamError, UsageError
from ..run import jobenv, lifecycle, runner, scripts, sparksubmit
from ..store import locate
from . import say, warn
from .commands import command, open_store

STORE_ENV = "DATAFLOW_DB"  # where the stream's driver finds the store


def _stream_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("script", help="the stream's .py script (its name is the job's id)")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")


@command(
    "stream",
    "run a job's stream in the foreground: each micro-batch becomes a READY chunk",
    _stream_arguments,
)
def stream(options: argparse.Namespace) -> int:
    script = options.script
    jobid = scripts.job_name(script)
    if not sparksubmit.is_spark_job(script):
        raise UsageError(f"{script}: a stream is a PySpark script (.py) that calls stream()")
    path = scripts.resolve(script)
    address = locate(options.db)
    with open_store(options, readonly=True) as store:
        job = lifecycle.load_job(store, jobid)
        if job.clock:
            raise StreamError(
                jobid, f"its IN dataset is '{job.clock}': a stream reads a landing dataset"
            )
        if len(job.outputs) != 1:
            raise StreamError(jobid, f"it has {len(job.outputs)} OUT datasets; a stream has one")
        env = jobenv.build(job, store.datasets(job.inputs + job.outputs), crypto.read_passkey())
        for ignored in env.ignored:  # rows this host does not allow
            warn(ignored)
    settings = {"spark_args": job.settings.spark_args}
    argv = sparksubmit.job_argv(path, options.args, settings)
    # secrets travel in the environment only; spark-submit takes this process's place
    withheld = (*runner.WITHHELD, "dataid")  # no passkey; no chunk: a stream makes its own
    inherited = {k: v for k, v in os.environ.items() if k not in withheld}
    environ = {**inherited, **env.variables, STORE_ENV: str(address)}
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(argv[0], argv, environ)  # noqa: S606 (an argv, no shell)
    return 0  # not reached


def _drop_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("datasetid", help="a file dataset: its folder is a stream's landing")
    parser.add_argument("files", nargs="+", metavar="FILE", help="the items, one file each")
    parser.add_argument(
        "--landing-root", action="append", default=[], metavar="DIR",
        help="a folder the dataset's landing folder must be inside (repeatable; default: "
        "the folder drop runs in)",
    )  # fmt: skip


@command(
    "drop",
    "copy items into a file dataset's landing folder, each appearing whole (for a stream)",
    _drop_arguments,
)
def drop(options: argparse.Namespace) -> int:
    # the dataset's row names its folder: items land only under a root of this host's
    roots = [Path(root).absolute() for root in options.landing_root] or [Path.cwd()]
    with open_store(options, readonly=True) as store:
        row = store.datasets([options.datasetid]).get(options.datasetid)
    folder, items = landing.drop(options.datasetid, row, options.files, roots)
    noun = "item" if len(items) == 1 else "items"
    say(f"{len(items)} {noun} dropped into {options.datasetid} ({folder})")
    return 0
