"""Per-run log files, and the filter that keeps passwords out of them."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from functools import lru_cache

from ...errors import UsageError
from ...store import Store
from .locks import safe_name

MASK = b"***"


def log_path(folder: str | os.PathLike, jobid: str, dataid: str, attempt: int) -> str:
    """Where attempt ``attempt`` of a chunk writes its output."""
    return os.path.join(_job_logs(folder, jobid), f"{safe_name(dataid)}.{attempt}.log")


def driver_log_path(folder: str | os.PathLike, jobid: str, stamp: str, pid: int) -> str:
    """Where a drain's Spark driver writes (Spark's own log), beside the job's chunk logs
    (a chunk's log name never has a ``.`` before its attempt: dots are escaped)."""
    return os.path.join(_job_logs(folder, jobid), f"driver.{stamp}.{pid}.log")


@lru_cache(maxsize=256)  # a drain needs it at every claim
def _job_logs(folder: str | os.PathLike, jobid: str) -> str:
    return os.path.join(folder, "logs", safe_name(jobid))


def own(folder: str | os.PathLike, run: Mapping[str, object]) -> str | None:
    """The log file of ``run`` (a history row): where its row says, if that is inside the
    store's log folder ``folder/logs`` (symlinks resolved), else where this store puts
    that attempt's log (a store reached by another path, or moved); None if neither is
    inside the folder. Any client may write a history row: a file it names elsewhere is
    never read nor deleted."""
    try:
        inside = os.path.realpath(os.path.join(folder, "logs")) + "/"
        named = str(run.get("logpath") or "")
        found = [os.path.realpath(named)] if named else []
        attempt = int(str(run["attempt"]))
        found.append(
            os.path.realpath(log_path(folder, str(run["jobid"]), str(run["dataid"]), attempt))
        )
    except (OSError, ValueError, KeyError):
        return None
    return next((path for path in found if path.startswith(inside)), None)


def run_of(store: Store, jobid: str, dataid: str, attempt: int | None = None) -> dict:
    """The history row of a chunk's last run (or of ``attempt``); UsageError if none."""
    run = store.run_log(jobid, dataid, attempt)
    if run is None:
        which = f"attempt {attempt} of " if attempt else ""
        raise UsageError(f"no run history for {which}job '{jobid}' at '{dataid}'")
    return run


def find(store: Store, jobid: str, dataid: str, attempt: int | None = None) -> str:
    """The log of a chunk's last run (or of ``attempt``), never a file outside the
    store's log folder; UsageError if there is none."""
    run = run_of(store, jobid, dataid, attempt)
    path = own(store.files, run)  # never a file a history row names elsewhere
    if path is None:
        raise UsageError(f"that run's log is not in the store's log folder ({store.files}/logs)")
    return path


def prepare(folder: str | os.PathLike, jobid: str) -> str:
    """Create the job's log folder (before a claim: a run must never fail for want of it)."""
    path = _job_logs(folder, jobid)
    os.makedirs(path, exist_ok=True)
    if not os.access(path, os.W_OK):
        raise PermissionError(13, "Permission denied", str(path))
    return path


class Redactor:
    """Replaces every secret with ``***`` in a byte stream read in pieces.

    A secret split across two reads is still caught: the tail of a piece that
    could be the start of a secret is held back until the next piece (or the end).
    """

    def __init__(self, secrets: Iterable[str]):
        encoded = {s.encode("utf-8") for s in secrets if s}
        self.secrets = sorted(encoded, key=len, reverse=True)
        self.carry = b""

    def feed(self, data: bytes) -> bytes:
        if not self.secrets:
            return data
        data = self.carry + data
        for secret in self.secrets:
            data = data.replace(secret, MASK)
        keep = self._partial_tail(data)
        self.carry = data[len(data) - keep :]
        return data[: len(data) - keep]

    def flush(self) -> bytes:
        rest, self.carry = self.carry, b""
        return rest

    def _partial_tail(self, data: bytes) -> int:
        """Length of the longest end of ``data`` that begins some secret."""
        longest = 0
        for secret in self.secrets:
            for size in range(min(len(secret) - 1, len(data)), longest, -1):
                if data.endswith(secret[:size]):
                    longest = size
                    break
        return longest
