"""``utility stream`` (start a job's stream: micro-batches as chunks) and ``utility drop``
(items into a landing folder)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .. import api, landing
from . import say, warn
from .commands import command, open_store


def _stream_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("script", help="the stream's .py script (its name is the job's id)")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the script's own arguments")


@command(
    "stream",
    "run a job's stream in the foreground: each micro-batch becomes a READY chunk",
    _stream_arguments,
)
def stream(options: argparse.Namespace) -> int:
    launch = api.stream_launch(options.script, options.args, db=options.db, warn=warn)
    # secrets travel in the environment only; spark-submit takes this process's place
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(launch.argv[0], launch.argv, launch.environ)  # noqa: S606 (an argv, no shell)
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
