"""Where a request's items land, under which name, and whether they landed already.

A request's items land as ONE file in the landing folder of their dataset, written as
``utility drop`` writes an item (whole, flushed, linked, the folder flushed): when
:func:`land` returns, they survive ``kill -9`` of the server and a power cut.

A request with an ``Idempotency-Key`` lands under a name made from that key (its
SHA-256), so the landing folder itself remembers the key, exactly as durably as the
items: a retry finds the file there and lands nothing (a *duplicate*); two tries at
once race for one name and only one file is linked. A key used again for other items is
refused. Without a key, each request lands under a new name.

Only a landing dataset takes items: a local file dataset in ``json`` or ``csv`` that no
job produces (a stream's IN dataset, not a batch job's OUT), whose folder, symlinks and
``..`` resolved, is inside one of the landing roots the server was given: a row of the
store names the folder, and a writer of the store must not choose where this host
writes.
"""

from __future__ import annotations

import hashlib
import threading
import time
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from .. import landing
from ..errors import DataflowError, Refused
from ..store import locate, open_store
from .items import FORMATS, Item, encode

MAX_KEY = 255  # characters of an Idempotency-Key
NO_ROOT = (
    "this server takes no items: start it with --landing-root DIR (the folders items "
    "may land under)"
)


@dataclass(frozen=True)
class Target:
    """A landing dataset that takes items: its folder and the format items land in."""

    datasetid: str
    folder: Path
    format: str


@dataclass(frozen=True)
class Landed:
    """What a request landed: ``items`` in file ``name``; ``duplicate`` when that file
    was there already (a retry of a request that had landed), and nothing was written."""

    dataset: str
    items: int
    name: str
    duplicate: bool

    def as_json(self) -> dict[str, object]:
        return {
            "dataset": self.dataset,
            "items": self.items,
            "file": self.name,
            "duplicate": self.duplicate,
        }


class Tally:
    """The items landed per dataset since this process started (``/metrics`` tells them
    as ``dataflow_items_landed_total``): a count of the process, not of the store, since
    nothing of a landing is written there, and one ``utility serve`` is one process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # requests land in worker threads
        self._items: dict[str, int] = {}

    def add(self, datasetid: str, items: int) -> None:
        with self._lock:
            self._items[datasetid] = self._items.get(datasetid, 0) + items

    def counts(self) -> dict[str, int]:
        with self._lock:
            return dict(self._items)


LANDED = Tally()


def check_name(datasetid: str, allowed: Collection[str] = ()) -> None:
    """A dataset's name from a URL: never a path (the folder comes from its
    registration), and one of ``allowed`` if any."""
    if allowed and datasetid not in allowed:
        raise Refused(404, f"dataset '{datasetid}' takes no items on this server")
    if (
        not datasetid
        or datasetid.startswith(".")
        or any(c in datasetid for c in "/\\\0")
        or not datasetid.isprintable()
    ):
        raise Refused(400, "the URL does not name a dataset: /stream/<dataset>")


def target(
    db: str | None, datasetid: str, allowed: Collection[str] = (), roots: Sequence[Path] = ()
) -> Target:
    """The landing of ``datasetid``, checked; Refused (404, 409) if it takes no items,
    403 if its folder is not inside one of ``roots`` (resolved folders). ``allowed``:
    the datasets this server takes items for (empty: every landing dataset). The store
    is opened once, for the dataset's row and its producers; no password is read."""
    check_name(datasetid, allowed)
    if not roots:
        raise Refused(403, NO_ROOT)
    with open_store(locate(db), readonly=True) as store:
        row = store.datasets([datasetid]).get(datasetid)
        producers = store.jobs_using(datasetid, "OUT") if row is not None else []
    if row is None:
        raise Refused(404, f"unknown dataset '{datasetid}' (see 'utility datasets')")
    try:
        folder = landing.folder_of(datasetid, row)
    except DataflowError as exc:
        raise Refused(409, str(exc)) from None
    landing_format = landing.format_of(row)
    if landing_format not in FORMATS:
        raise Refused(
            409, f"dataset '{datasetid}' is {landing_format}: items land in json or csv datasets"
        )
    if producers:
        raise Refused(
            409,
            f"dataset '{datasetid}' is the OUT dataset of job {', '.join(producers)}: "
            "items land only in a landing dataset (a stream's IN)",
        )
    return Target(datasetid, confined(datasetid, folder, roots), landing_format)


def confined(datasetid: str, folder: Path, roots: Sequence[Path]) -> Path:
    """``folder`` resolved (symlinks, ``..``), if it is inside one of ``roots``; else
    Refused (403)."""
    try:
        inside = folder.resolve()
    except (OSError, RuntimeError):  # a symlink loop, a name too long
        inside = None
    if inside is None or not any(inside.is_relative_to(root) for root in roots):
        raise Refused(
            403, f"dataset '{datasetid}': its landing folder is outside every --landing-root "
            "of this server: nothing landed"
        )  # fmt: skip
    return inside


def check_key(key: str | None) -> str | None:
    """An ``Idempotency-Key`` header: 1 to 255 printable ASCII characters, or none."""
    if key is None:
        return None
    if not 0 < len(key) <= MAX_KEY or not (key.isascii() and key.isprintable()):
        raise Refused(400, f"Idempotency-Key: 1 to {MAX_KEY} printable ASCII characters, please")
    return key


def item_name(key: str | None, landing_format: str) -> str:
    """The file a request's items land in: from its key, else new (never hidden from
    Spark: no leading ``.`` or ``_``)."""
    if key is None:
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        return f"item-{stamp}-{uuid.uuid4().hex}.{landing_format}"
    return f"key-{hashlib.sha256(key.encode()).hexdigest()[:40]}.{landing_format}"


def land(where: Target, items: Sequence[Item], key: str | None) -> Landed:
    """Land ``items`` durably (see the module's docstring); Refused if they cannot
    (nothing landed then)."""
    data = encode(items, where.format)
    name = item_name(key, where.format)
    try:
        placed = landing.place(where.folder, name, data)
        before = data if placed else (where.folder / name).read_bytes()
    except OSError as exc:
        raise Refused(
            503, f"cannot write in the landing folder of '{where.datasetid}': {exc.strerror}"
        ) from None
    if before != data:
        raise Refused(422, "this Idempotency-Key was used before for other items: nothing landed")
    if placed:
        LANDED.add(where.datasetid, len(items))
    return Landed(where.datasetid, len(items), name, duplicate=not placed)
