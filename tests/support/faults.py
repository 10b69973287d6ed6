"""Faults of the machine a test makes for real: a child's open-files limit, a mount (a full
or read-only disk), a disk filled to its last block."""

from __future__ import annotations

import errno
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest


def open_files(soft: int, hard: int | None = None):
    """A ``preexec_fn`` that sets a child's limit of open files (the hard one: ``soft``)."""
    import resource

    return lambda: resource.setrlimit(
        resource.RLIMIT_NOFILE, (soft, soft if hard is None else hard)
    )


def mount(*argv: str) -> None:
    try:
        done = subprocess.run(["mount", *argv], capture_output=True, text=True)
    except OSError as exc:
        pytest.skip(f"cannot run mount: {exc}")
    if done.returncode:
        pytest.skip(f"cannot mount ({' '.join(argv)}): {done.stderr.strip() or 'not permitted'}")


@contextmanager
def mounted(*argv: str):
    """``mount *argv`` (the last one is the mount point) for the block; skips if refused."""
    mount(*argv)
    try:
        yield Path(argv[-1])
    finally:
        subprocess.run(["umount", "-l", argv[-1]], capture_output=True)


def fill_disk(folder: Path) -> Path:
    """Fill the disk of ``folder`` to its last block."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as handle:
        for block in (65536, 4096, 512, 1):
            try:
                while True:
                    handle.write(b"\0" * block)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
    return filler
