"""``utility plan`` and ``utility apply``: a project's file (``dataflow.toml``) made the
store's datasets and jobs (docs/projects.md)."""

from __future__ import annotations

import argparse
import json

from .. import crypto
from ..errors import DataflowError
from ..ops import plans, project
from . import say, say_lines
from .commands import command, open_store

SIGNS = {"+": "add", "~": "change", "-": "remove", plans.KEPT: "keep"}


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folder", help="the project's folder (holding dataflow.toml)")
    parser.add_argument(
        "--prune",
        action="store_true",
        help="remove the store's jobs and datasets that the project does not declare",
    )


def _lines(changes: list[plans.Change]) -> list[str]:
    lines = []
    for change in changes:
        what = f"{change.kind} {change.name}"
        if change.sign == plans.KEPT:
            lines.append(f"  {what}: in the store, not in the project (kept; --prune removes it)")
        else:
            lines.append(f"{change.sign} {what}{': ' + change.detail if change.detail else ''}")
    return lines


@command(
    "plan",
    "what applying a project would change in the store; exit 0: nothing, 2: something",
    _arguments,
)
def plan(options: argparse.Namespace) -> int:
    try:
        found = project.read(options.folder)
        with open_store(options) as store:
            changes = plans.plan(store, found, crypto.read_passkey(), options.prune)
    except DataflowError as exc:
        exc.exit_code = 1  # 2 says "changes", as terraform plan -detailed-exitcode
        raise
    todo = [c for c in changes if plans.is_change(c)]
    if options.json:
        rows = [{"action": SIGNS[c.sign], **c._asdict()} for c in changes]
        say_lines(json.dumps({"changes": rows, "summary": plans.summary(changes)}, indent=2))
    else:
        for line in _lines(changes):
            say(line)
        say(
            f"plan: {plans.summary(changes)}"
            if todo
            else "no changes: the store matches the project"
        )
    return 2 if todo else 0


@command("apply", "make the store match a project, in one transaction", _arguments)
def apply(options: argparse.Namespace) -> int:
    found = project.read(options.folder)
    with open_store(options) as store:
        changes = plans.apply(store, found, crypto.read_passkey(), options.prune)
    for line in _lines(changes):
        say(line)
    todo = [c for c in changes if plans.is_change(c)]
    say(
        f"applied: {plans.summary(changes)}"
        if todo
        else "no changes: the store matches the project"
    )
    return 0
