"""``utility deploy``: a git ref of a project, checked, applied and made current.

A deploy folder holds every release the host ran, and two links::

    DIR/releases/<commit>/    a checkout of the project at that commit (never removed here)
    DIR/current  -> releases/<commit>   what cron runs: RunJob --all DIR/current/jobs
    DIR/previous -> releases/<commit>   what --rollback goes back to

A deploy fetches the ref (any URL git takes, a local path included) into its release
folder, runs the project's checks (its plan, then its ``test`` command), applies it to
the store in one transaction, and only then switches ``current`` (a rename of a link:
atomic). A failed check or apply leaves ``current`` and the store as they were. A run
under way keeps the release it started from: its script's folder stays where it is.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections import namedtuple
from pathlib import Path

from ..errors import DeployError
from ..store import Store
from . import plans, project

CURRENT, PREVIOUS, RELEASES = "current", "previous", "releases"
TEST_TIMEOUT_S = 3600.0  # a project's test command: an hour at most

Deployed = namedtuple("Deployed", "release revision changes")  # what a deploy made current


def deploy(
    store: Store, repo: str, ref: str, into: str | os.PathLike, passkey: str | None
) -> Deployed:
    """Fetch ``ref`` of ``repo``, check it, apply it, make it ``current``."""
    root = Path(into)
    (root / RELEASES).mkdir(parents=True, exist_ok=True)
    release = _fetch(repo, ref, root / RELEASES)
    return _release(store, root, release, passkey)


def rollback(store: Store, into: str | os.PathLike, passkey: str | None) -> Deployed:
    """Apply the previous release again and make it current (current becomes previous)."""
    root = Path(into)
    before = _target(root / PREVIOUS)
    if before is None:
        raise DeployError(f"{root}: no previous release to go back to")
    return _release(store, root, before, passkey)


def current(into: str | os.PathLike) -> Path | None:
    """The release ``current`` names, if any."""
    return _target(Path(into) / CURRENT)


def _release(store: Store, root: Path, release: Path, passkey: str | None) -> Deployed:
    release = release.resolve()
    found = project.read(release)
    plans.plan(store, found, passkey)  # every mistake before anything runs
    if found.test:
        _test(found)
    changes = plans.apply(store, found, passkey)
    was = _target(root / CURRENT)
    _link(root / CURRENT, release)
    if was is not None and was != release:
        _link(root / PREVIOUS, was)
    return Deployed(release, found.revision, changes)


def _fetch(repo: str, ref: str, releases: Path) -> Path:
    """The release folder of ``ref``: ``releases/<commit>``, fetched once."""
    work = Path(tempfile.mkdtemp(prefix=".fetch-", dir=releases))
    try:
        _git(work, "init", "-q")
        _git(work, "fetch", "-q", "--depth", "1", "--", repo, ref, what=f"fetch {ref} of {repo}")
        _git(work, "checkout", "-q", "--detach", "FETCH_HEAD")
        commit = _git(work, "rev-parse", "HEAD")
        release = releases / commit
        if release.is_dir():  # fetched before: the same commit is the same release
            return release
        os.rename(work, release)
        return release
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _git(folder: Path, *args: str, what: str = "") -> str:
    try:
        done = subprocess.run(
            ["git", "-C", str(folder), *args],
            capture_output=True, text=True, timeout=600, check=False,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DeployError(f"git {what or args[0]}: {exc}") from None
    if done.returncode != 0:
        said = " ".join((done.stderr.strip().splitlines() or ["failed"])[-1:])
        raise DeployError(f"cannot {what or 'git ' + args[0]}: {said}")
    return done.stdout.strip()


def _test(found: project.Project) -> None:
    """The project's own checks, in its release folder; their output goes to a file."""
    log = found.folder / ".dataflow-test.log"
    try:
        with open(log, "wb") as out:
            done = subprocess.run(
                ["bash", "-c", found.test], cwd=found.folder, stdout=out, stderr=out,
                stdin=subprocess.DEVNULL, timeout=TEST_TIMEOUT_S, check=False,
            )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DeployError(f"the project's test command did not run: {exc}") from None
    if done.returncode != 0:
        raise DeployError(
            f"the project's test command failed (exit code {done.returncode}; its output: "
            f"{log}): nothing deployed"
        )


def _target(link: Path) -> Path | None:
    try:
        return (link.parent / os.readlink(link)).resolve()
    except OSError:
        return None


def _link(link: Path, release: Path) -> None:
    """Point ``link`` at ``release`` by a rename: a reader sees the old or the new one."""
    temporary = link.with_name(f".{link.name}.{os.getpid()}")
    temporary.unlink(missing_ok=True)
    os.symlink(os.path.relpath(release, link.parent), temporary)
    os.replace(temporary, link)
