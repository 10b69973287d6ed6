"""Per-chunk OS locks: how a live run is told from a dead one.

A run holds an exclusive lock on its chunk from before its claim is committed
until every process of the run has exited: the descriptor is handed to the job,
so the job's own children hold it too. A RUNNING chunk whose lock is free
therefore belongs to a dead run (or to a helper that closed its descriptors and
left: :mod:`.processes` finds those).

A store has one lock file (the store backend names it: for SQLite it sits beside
the database file, resolved through symlinks, apart from the run logs). A chunk is
one byte of it, at an offset derived from its job and dataid, locked with an
open-file-description lock (``F_OFD_SETLK``). Like ``flock``, such a lock belongs
to the open file (so a child that inherits the descriptor holds it, and it is
released when the last copy closes), but it covers a byte range: no file is created
per chunk, which costs ~0.4 ms on a typical disk inside the claim's transaction.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import resource
import struct

from ...dataids import chunk_hash

_SAFE = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
_MAX_NAME = 200  # bytes; file systems allow 255
_FLOCK = "hhqqi4x"  # struct flock: type, whence, start, len, pid (and padding)
_BUSY = (errno.EAGAIN, errno.EACCES)

# descriptors RunJob holds for a running job (its pipes, log and lock, the locks of chunks
# claimed ahead for its slot), with room to spare; and for all else
FILES_A_SLOT, FILES_SPARE = 12, 64


def make_room(slots: int) -> None:
    """Raise this process's soft limit of open files, within its hard limit, to what
    ``slots`` jobs at once need (``RunJob --parallel 500`` with a soft limit of 1,024).
    A job that cannot start for want of them all the same makes a drain go on with the
    jobs it runs. Made before a drain's first claim, whose chunks hold a lock
    descriptor each (a claim of 200 chunks under a soft limit of 128 would fail)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = FILES_SPARE + slots * FILES_A_SLOT
    if soft != resource.RLIM_INFINITY and soft < wanted:
        top = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, top), hard))


def safe_name(text: str) -> str:
    """A file name for any text, one-to-one: bytes outside ``[A-Za-z0-9_-]`` become
    ``%XX`` (so never ``.``, ``..`` or a ``/``); a long name keeps a prefix and a hash."""
    data = text.encode("utf-8", "surrogatepass")
    name = "".join(chr(b) if b in _SAFE else f"%{b:02X}" for b in data)
    if not name:
        return "%"  # the empty text; "%" alone never results from encoding
    if len(name) > _MAX_NAME:  # "%~" never results from encoding either
        import hashlib

        name = name[:120] + "%~" + hashlib.sha256(data).hexdigest()
    return name


def _offset(jobid: str, dataid: str) -> int:
    """The chunk's byte in the store's lock file: 63 bits of its hash (two chunks share a
    byte with odds of about n²/2⁶⁴)."""
    return chunk_hash(jobid, dataid) >> 1


def _request(kind: int, offset: int) -> bytes:
    return struct.pack(_FLOCK, kind, os.SEEK_SET, offset, 1, 0)


def _open(path: str | os.PathLike) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)


def prepare(path: str | os.PathLike) -> None:
    """Create the lock file (and its folder) if needed, before a claim, so that a claim
    never fails on it."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.close(_open(path))


class ChunkLock:
    """One exclusive lock on a chunk, through an open file description of our own."""

    def __init__(self, path: str | os.PathLike, jobid: str, dataid: str):
        self.path = path
        self.offset = _offset(jobid, dataid)
        self.fd: int | None = None

    def try_acquire(self) -> bool:
        """Take the lock if nobody holds it; never waits."""
        fd = _open(self.path)
        try:
            fcntl.fcntl(fd, fcntl.F_OFD_SETLK, _request(fcntl.F_WRLCK, self.offset))
        except OSError as exc:
            os.close(fd)
            if exc.errno in _BUSY:
                return False
            raise
        self.fd = fd
        return True

    def close(self) -> None:
        """Close our descriptor. The lock is released once no child holds it either."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def is_held(path: str | os.PathLike, jobid: str, dataid: str) -> bool:
    """Does a live process hold this chunk's lock (in lock file ``path``)?"""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    try:
        # F_GETLK needs no write access: a probe never creates or changes the file
        answer = fcntl.fcntl(fd, fcntl.F_OFD_GETLK, _request(fcntl.F_WRLCK, _offset(jobid, dataid)))
    finally:
        os.close(fd)
    return struct.unpack(_FLOCK, answer)[0] != fcntl.F_UNLCK
