"""``drop``: items into a stream's landing folder from Python, as ``utility drop`` drops
them. Where they land and how they land whole is :mod:`dataflow.landing`'s, which the
command line and ``utility serve`` share without this package; this adds the store."""

from __future__ import annotations

from pathlib import Path

from .. import landing
from ..store import locate, open_store


def drop(
    datasetid: str, files: list[str], db: str | None = None, roots: list[Path] | None = None
) -> tuple[Path, list[Path]]:
    """Copy ``files`` into the landing folder of ``datasetid`` (registered in the store
    ``db``, else $DATAFLOW_DB) under their own names: :func:`dataflow.landing.drop`."""
    with open_store(locate(db), readonly=True) as store:
        row = store.datasets([datasetid]).get(datasetid)
    return landing.drop(datasetid, row, files, roots)
