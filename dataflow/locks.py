"""Per-chunk OS locks: how a live run is told from a dead one.

A run holds an exclusive ``flock`` on its chunk's lock file from before its claim
is committed until every process of the run has exited: the descriptor is handed
to the job, so the job's own children hold it too. A RUNNING chunk whose lock is
free therefore belongs to a dead run. Lock files live beside the store and are
never deleted (unlinking a locked file would let two runs lock two inodes).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from filelock import lock_descriptor

_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
_MAX_NAME = 200  # bytes; file systems allow 255


def safe_name(text: str) -> str:
    """A file name for any text, one-to-one: bytes outside ``[A-Za-z0-9_-]`` become
    ``%XX`` (so never ``.``, ``..`` or a ``/``); a long name keeps a prefix and a hash."""
    data = text.encode("utf-8", "surrogatepass")
    name = "".join(chr(b) if b in _SAFE else f"%{b:02X}" for b in data)
    if not name:
        return "%"  # the empty text; "%" alone never results from encoding
    if len(name) > _MAX_NAME:  # "%~" never results from encoding either
        name = name[:120] + "%~" + hashlib.sha256(data).hexdigest()
    return name


def chunk_lock_path(folder: Path, jobid: str, dataid: str) -> Path:
    return folder / "locks" / safe_name(jobid) / f"{safe_name(dataid)}.lock"


class ChunkLock:
    """One exclusive lock on a chunk's lock file, through a descriptor we own."""

    def __init__(self, path: Path):
        self.path = path
        self.fd: int | None = None

    def try_acquire(self) -> bool:
        """Take the lock if nobody holds it; never waits."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        if lock_descriptor(fd, blocking=False):
            self.fd = fd
            return True
        os.close(fd)
        return False

    def close(self) -> None:
        """Close our descriptor. The lock is released once no child holds it either."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def is_held(path: Path) -> bool:
    """Does a live process hold this chunk lock?"""
    if not path.exists():
        return False
    probe = ChunkLock(path)
    free = probe.try_acquire()
    probe.close()
    return not free
