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
from ..run.process.runner import WITHHELD
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
    _check_links(root)
    (root / RELEASES).mkdir(parents=True, exist_ok=True)
    release = _fetch(repo, ref, root / RELEASES)
    return _release(store, root, release, passkey)


def rollback(store: Store, into: str | os.PathLike, passkey: str | None) -> Deployed:
    """Apply the previous release again and make it current (current becomes previous)."""
    root = Path(into)
    _check_links(root)
    before = _target(root / PREVIOUS)
    if before is None:
        raise DeployError(f"{root}: no previous release to go back to")
    return _release(store, root, before, passkey)


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
    """The release folder of ``ref``: ``releases/<commit>``, fetched once (refused if
    what is there is not that commit, untouched)."""
    if os.path.isdir(repo):  # a local path: git runs in another folder
        repo = os.path.abspath(repo)
    work = Path(tempfile.mkdtemp(prefix=".fetch-", dir=releases))
    try:
        os.chmod(work, 0o755)  # noqa: S103 (a release is code cron runs, maybe as another user)
        _git(work, "init", "-q")
        _git(work, "fetch", "-q", "--depth", "1", "--", repo, ref, what=f"fetch {ref} of {repo}")
        _git(work, "checkout", "-q", "--detach", "FETCH_HEAD")
        commit = _git(work, "rev-parse", "HEAD")
        release = releases / commit
        if release.is_dir() and not _untouched(release, commit):
            raise DeployError(f"{release} is not what commit {commit[:12]} holds: remove it")
        if not release.is_dir():
            os.rename(work, release)
        return release
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _untouched(release: Path, commit: str) -> bool:
    try:
        status = _git(release, "status", "--porcelain", "--untracked-files=all")
        return _git(release, "rev-parse", "HEAD") == commit and not status
    except DeployError:
        return False


def _git(folder: Path, *args: str, what: str = "") -> str:
    # the caller's own GIT_DIR, GIT_WORK_TREE... (a hook's) never reach the release
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    try:
        done = subprocess.run(
            ["git", "-c", "protocol.ext.allow=never", "-C", str(folder), *args],
            capture_output=True, text=True, timeout=600, check=False,
            env={**env, "GIT_TERMINAL_PROMPT": "0"},
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DeployError(f"git {what or args[0]}: {exc}") from None
    if done.returncode != 0:
        said = " ".join(done.stderr.split())[:300] or "failed"
        raise DeployError(f"cannot {what or 'git ' + args[0]}: {said}")
    return done.stdout.strip()


def _test(found: project.Project) -> None:
    """The project's own checks, in a throwaway copy of its release (the release stays
    what its commit is), without the passkey or the store (a ref under review is not
    trusted with them); their output goes to a file beside the releases."""
    log = found.folder.parent / f".{found.folder.name}.test.log"
    copy = Path(tempfile.mkdtemp(prefix=".test-", dir=found.folder.parent))
    withheld = (*WITHHELD, "DATAFLOW_DB", "DATAFLOW_POLICY")
    env = {k: v for k, v in os.environ.items() if k not in withheld}
    try:
        shutil.copytree(found.folder, copy, symlinks=True, dirs_exist_ok=True)
        with open(log, "wb") as out:
            done = subprocess.run(
                ["bash", "-c", found.test], cwd=copy, stdout=out, stderr=out, env=env,
                stdin=subprocess.DEVNULL, timeout=TEST_TIMEOUT_S, check=False,
            )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired, shutil.Error) as exc:
        raise DeployError(f"the project's test command did not run: {exc}") from None
    finally:
        shutil.rmtree(copy, ignore_errors=True)
    if done.returncode != 0:
        raise DeployError(
            f"the project's test command failed (exit code {done.returncode}; its output: "
            f"{log}): nothing deployed"
        )


def _check_links(root: Path) -> None:
    """``current`` and ``previous`` are links (or not there yet): nothing else is
    replaced by a deploy, and a deploy that cannot switch changes nothing."""
    for name in (CURRENT, PREVIOUS):
        if os.path.lexists(root / name) and not os.path.islink(root / name):
            raise DeployError(f"{root / name} is not a link: move it away, then deploy")


def _target(link: Path) -> Path | None:
    try:
        return (link.parent / os.readlink(link)).resolve()
    except OSError:
        return None


def _link(link: Path, release: Path) -> None:
    """Point ``link`` at ``release`` by a rename: a reader sees the old or the new one."""
    temporary = link.with_name(f".{link.name}.{os.getpid()}")
    temporary.unlink(missing_ok=True)
    os.symlink(os.path.relpath(release, link.parent.resolve()), temporary)
    try:
        os.replace(temporary, link)
    except OSError:
        temporary.unlink(missing_ok=True)
        raise
