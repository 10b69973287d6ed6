"""``utility plan`` and ``utility apply``: a project's file (``dataflow.toml``) made the
store's datasets and jobs (docs/projects.md)."""

from __future__ import annotations

import argparse
import json

from .. import api, crypto
from ..errors import DataflowError, UsageError
from ..ops import deploy, plans
from . import say, say_lines
from .commands import command, open_store

SIGNS = {"+": "add", "~": "change", "-": "remove", plans.KEPT: "keep"}


def _init_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folder", help="the new project's folder (new, or empty)")
    parser.add_argument("--job", default="clean", help="the example job's name (default: clean)")


@command(
    "init", "a new project: an example Spark job, its unit test, dataflow.toml, CI", _init_arguments
)
def init(options: argparse.Namespace) -> int:
    import shlex

    from ..ops import scaffold

    for path in scaffold.init(options.folder, options.job):
        say(f"wrote {path}")
    say(f"next: cd {shlex.quote(options.folder)} && git init && {scaffold.TEST} && utility plan .")
    return 0


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("folder", help="the project's folder (holding dataflow.toml)")
    parser.add_argument(
        "--prune",
        action="store_true",
        help="remove the store's jobs and datasets that the project does not declare",
    )


def _report(changes: list[plans.Change], done: str | None = None) -> bool:
    """Say each change; then ``done: <summary>``, or that nothing changes (no ``done``:
    no last line). Whether anything changes."""
    for change in changes:
        what = f"{change.kind} {change.name}"
        if change.sign == plans.KEPT:
            say(f"  {what}: in the store, not in the project (kept; --prune removes it)")
        else:
            say(f"{change.sign} {what}{': ' + change.detail if change.detail else ''}")
    todo = any(plans.is_change(c) for c in changes)
    if done:
        say(
            f"{done}: {plans.summary(changes)}"
            if todo
            else "no changes: the store matches the project"
        )
    return todo


@command(
    "plan",
    "what applying a project would change in the store; exit 0: nothing, 2: something",
    _arguments,
)
def plan(options: argparse.Namespace) -> int:
    try:
        changes = api.plan(options.folder, db=options.db, prune=options.prune)
    except DataflowError as exc:
        exc.exit_code = 1  # 2 says "changes", as terraform plan -detailed-exitcode
        raise
    if options.json:
        rows = [{"action": SIGNS[c.sign], **c._asdict()} for c in changes]
        say_lines(json.dumps({"changes": rows, "summary": plans.summary(changes)}, indent=2))
        return 2 if any(plans.is_change(c) for c in changes) else 0
    return 2 if _report(changes, "plan") else 0


@command("apply", "make the store match a project, in one transaction", _arguments)
def apply(options: argparse.Namespace) -> int:
    changes = api.apply(options.folder, db=options.db, prune=options.prune)
    _report(changes, "applied")
    return 0


def _deploy_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("repo", nargs="?", help="the project's git repository (any URL git takes)")
    parser.add_argument("--ref", default="HEAD", help="the branch, tag or commit (default HEAD)")
    parser.add_argument(
        "--into", required=True, metavar="DIR",
        help="the deploy folder: DIR/releases/<commit>, DIR/current (what cron runs)",
    )  # fmt: skip
    parser.add_argument(
        "--rollback", action="store_true", help="go back to the release before the current one"
    )


@command(
    "deploy",
    "fetch a project's git ref, check it, apply it and make it DIR/current (or --rollback)",
    _deploy_arguments,
)
def deploy_(options: argparse.Namespace) -> int:
    if options.rollback == bool(options.repo):
        raise UsageError("name the repository to deploy, or --rollback (not both)")
    with open_store(options) as store:
        if options.rollback:
            done = deploy.rollback(store, options.into, crypto.read_passkey())
        else:
            done = deploy.deploy(
                store, options.repo, options.ref, options.into, crypto.read_passkey()
            )
    _report(done.changes)
    revision = (done.revision or done.release.name)[:12]
    say(f"{'rolled back to' if options.rollback else 'deployed'} {revision}: "
        f"{plans.summary(done.changes)}; current -> {done.release}")  # fmt: skip
    return 0
