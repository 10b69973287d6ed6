"""``RunJob --all FOLDER``: one cron line for a whole pipeline (:func:`dataflow.api.drain_folder`:
every script of the folder that names a registered job, drained by a RunJob of its own,
producers before consumers, round after round until a round starts nothing)."""

from __future__ import annotations

import argparse

from .. import api
from ..errors import UsageError
from . import warn


def drain(options: argparse.Namespace) -> int:
    if options.dry_run or options.validate or options.args:
        raise UsageError(
            "a folder takes --all [--parallel N] [--workers W] [--batch K] only: "
            "name a script for the rest"
        )
    done = api.drain_folder(
        options.script, db=options.db, parallel=options.parallel, workers=options.workers,
        batch=options.batch, output=None, warn=warn,
    )  # fmt: skip
    return done.exit_code
