"""A run's log kept in the store, so that any host reads it: the last
``DATAFLOW_LOG_KEEP_KB`` of the log file (masked as the file is), compressed.

The host that runs a job sends it in pieces: a thread of the claiming process sends the
logs of its live runs every ``DATAFLOW_LOG_EVERY`` seconds (those that grew), over a
connection of its own opened only while it has a run to send (a session of a shared
store is not held by an idle process); its end sends it once more (:func:`ended`), in
the transaction that records the run's end, so a finished run's log is whole in the
store as soon as its status is. Sending never fails nor holds up a run: a piece the
store refuses (busy, gone) is sent again at the next look, or not at all.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import zlib
from collections.abc import Callable

from ...errors import DataflowError, UsageError
from ...store import DRIVER_ERRORS, Store, address
from . import logs

Piece = tuple[int, int, bytes]  # size of the log, bytes kept (its last), those compressed


def piece(path: str | os.PathLike | None, keep: int | None = None) -> Piece | None:
    """The end of the log at ``path`` as the store keeps it; None if it is empty, not
    there, or the store keeps none."""
    keep = address.log_keep_bytes() if keep is None else keep
    if path is None or keep <= 0:
        return None
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            if not size:
                return None
            handle.seek(max(0, size - keep))
            data = handle.read(keep)
    except OSError:
        return None
    return size, len(data), zlib.compress(data, 6)


READ_MAX = 256 << 20  # bytes of a stored log a reader inflates, whatever its row says


def inflate(row: dict) -> tuple[int, int, bytes]:
    """The size of a stored log, what its row says it keeps, and the bytes it keeps: at
    most that many (and READ_MAX). A row is any store writer's: a small body may inflate
    to gigabytes, and an SQLite column may hold text; a row that is not one is damaged."""
    try:
        size, kept, body = int(row["size"]), int(row["kept"]), bytes(row["body"])
        if kept <= 0:  # (a max_length of 0 is no limit to zlib)
            return size, kept, b""
        return size, kept, zlib.decompressobj().decompress(body, min(kept, READ_MAX))
    except (zlib.error, TypeError, ValueError):
        raise UsageError("the store's copy of that log is damaged") from None


def text(row: dict) -> bytes:
    """The bytes a stored log holds (its last ones when it was longer than the store
    keeps, after a line that says so)."""
    size, kept, data = inflate(row)
    if kept < size:
        cut = size - kept
        note = f"[dataflow: the first {cut} bytes of this log are not kept in the store]\n"
        return note.encode() + data
    return data


class Sender:
    """Sends the logs of this process's live runs to the store, every ``every`` seconds,
    from a daemon thread started at the first run it is given."""

    def __init__(self, opener: Callable[[], Store], every: float, keep: int):
        self.opener, self.every, self.keep = opener, every, keep
        self.runs: dict[int, tuple[str, int]] = {}  # runid: (log, its size when last sent)
        self.lock = threading.Lock()
        self.thread: threading.Thread | None = None

    def watch(self, runid: int, path: str) -> None:
        with self.lock:
            self.runs[runid] = (path, 0)
            if self.thread is None:
                self.thread = threading.Thread(target=self._serve, daemon=True)
                with contextlib.suppress(RuntimeError):  # no thread left: ends send it
                    self.thread.start()

    def forget(self, runid: int) -> None:
        with self.lock:
            self.runs.pop(runid, None)

    def _serve(self) -> None:
        store: Store | None = None
        while True:
            time.sleep(self.every)
            with self.lock:
                due = list(self.runs.items())
            if not due:
                if store is not None:  # an idle process holds no session
                    store = _closed(store)
                continue
            try:
                store = store or self.opener()
                self._send(store, due)
            except (DataflowError, OSError, *DRIVER_ERRORS):
                store = _closed(store)  # the next look opens it again

    def _send(self, store: Store, due: list[tuple[int, tuple[str, int]]]) -> None:
        grown = []
        for runid, (path, sent) in due:
            with contextlib.suppress(OSError):
                if os.stat(path).st_size != sent:
                    grown.append((runid, path))
        for runid, path in grown:
            found = piece(path, self.keep)
            if found is None:
                continue
            with store.transaction():
                written = store.put_log(runid, *found, False)
            with self.lock:
                if not written:  # ended (or deleted): its end sends the rest
                    self.runs.pop(runid, None)
                elif runid in self.runs:
                    self.runs[runid] = (path, found[0])


def _closed(store: Store | None) -> None:
    if store is not None:
        with contextlib.suppress(Exception):
            store.close()
    return None


_sender: Sender | None = None
_made = threading.Lock()


def watch(store: Store, runid: int | None, path: str | None) -> None:
    """Send the log of run ``runid`` while it runs (a dry run's claim has no run)."""
    global _sender
    if runid is None or path is None:
        return
    keep = address.log_keep_bytes()
    if keep <= 0:
        return
    with _made:
        if _sender is None:
            kind, where = type(store), store.path
            _sender = Sender(lambda: kind.open(where), address.log_every(), keep)
    _sender.watch(runid, path)


def forget(runid: int | None) -> None:
    """The log of run ``runid`` is no more sent meanwhile (it ended, or was given back)."""
    if _sender is not None and runid is not None:
        _sender.forget(runid)


def ended(runid: int | None, path: str | None) -> Piece | None:
    """Run ``runid`` has ended: it is no more sent meanwhile; the last piece of its log,
    which the transaction that records its end writes."""
    forget(runid)
    return piece(path)


# -- reading, on any host --------------------------------------------------------------


def read(store: Store, run: dict) -> bytes:
    """A run's log: its file when the run was this host's (whole, however long), else the
    store's copy, else a file of this store's log folder (a folder shared by hosts).
    UsageError, naming the host that has it, if none of them is there."""
    path = _local(store, run)
    if path is not None and _mine(run):
        return _file(path)
    stored = store.run_output(run["runid"])
    if stored is not None:
        return text(stored)
    if path is not None:
        return _file(path)
    raise UsageError(_elsewhere(store, run))


def follow(store: Store, run: dict, write: Callable[[bytes], object], every: float = 1.0) -> None:
    """Write a run's log as it grows, from this host's file or else the store's copy,
    until the run has ended (and its last piece is written)."""
    path = _local(store, run)
    if path is not None and _mine(run):
        with open(path, "rb") as handle:
            while True:
                ended = _ended(store, run)
                while data := handle.read(1 << 20):
                    write(data)
                if ended:
                    return
                time.sleep(every)
    shown = 0
    while True:
        ended = _ended(store, run)
        stored = store.run_output(run["runid"])
        size, _, data = inflate(stored) if stored else (0, 0, b"")
        if size > shown:
            new = size - shown
            if new > len(data):  # (more came than the store keeps)
                write(f"[dataflow: {new - len(data)} bytes not kept in the store]\n".encode())
            write(data[-new:] if new <= len(data) else data)
            shown = size
        if ended:
            return
        time.sleep(every)


def _local(store: Store, run: dict) -> str | None:
    """The run's log file in this store's log folder, if it is there."""
    path = logs.own(store.files, run)
    return path if path is not None and os.path.isfile(path) else None


def _mine(run: dict) -> bool:
    """Was the run this host's (its file then is whole, the store's copy its end only)?"""
    return run.get("host") == address.host_name()


def _ended(store: Store, run: dict) -> bool:
    now = store.run_log(run["jobid"], run["dataid"], run["attempt"])
    return now is None or now["status"] != "RUNNING"


def _file(path: str) -> bytes:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise UsageError(f"cannot read log {path}: {exc.strerror}") from None


def _elsewhere(store: Store, run: dict) -> str:
    which = f"the log of attempt {run['attempt']} of job '{run['jobid']}' at '{run['dataid']}'"
    if _mine(run):  # (a row naming a file elsewhere: not read)
        where = f"is not in the store's log folder ({store.files}/logs)"
        return f"{which} {where}, and the store holds none of it"
    return (
        f"{which} is on host {run.get('host') or '(unknown)'} ({run.get('logpath')}), and "
        "the store holds none of it (that host keeps none there: DATAFLOW_LOG_KEEP_KB=0, "
        "or its run sent none yet)"
    )
