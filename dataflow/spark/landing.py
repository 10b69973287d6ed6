"""Items dropped into a stream's landing folder (``utility drop DATASET FILE...``).

Spark's file source reads every new file of the folder of a file dataset
(``<base>/<table>``) and ignores names starting with ``.`` or ``_``. A drop copies
each file under such a hidden name, flushes it to disk, then links it under its own
name in one step: the stream never sees half an item, and an item already there is
never replaced (the file source would not read it again). Everything is checked
before the first copy, so a mistake drops nothing.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from ..errors import DropError
from .context import registered


def landing_folder(datasetid: str, db: str | None = None) -> Path:
    """The local folder of a file dataset, where its items land."""
    dataset = registered(datasetid, db=db)
    if dataset.kind != "file":
        raise DropError(datasetid, "it is not a file dataset (database: a file format)")
    where = dataset.table_path
    if "://" in where and not where.startswith("file:"):
        raise DropError(datasetid, f"its folder {where} is not on this machine's file system")
    return Path(where.removeprefix("file://").removeprefix("file:"))


def drop(datasetid: str, files: list[str], db: str | None = None) -> tuple[Path, list[Path]]:
    """Copy ``files`` into the landing folder of ``datasetid`` under their own names;
    returns the folder and the items as they landed."""
    if not files:
        raise DropError(datasetid, "name one or more files")
    folder = landing_folder(datasetid, db)
    sources = [Path(name) for name in files]
    seen: set[str] = set()
    for source in sources:
        name = source.name
        if not source.is_file():
            raise DropError(datasetid, f"{source} is not a file")
        if not os.access(source, os.R_OK):
            raise DropError(datasetid, f"{source} cannot be read")
        if name.startswith((".", "_")):
            raise DropError(datasetid, f"{name}: Spark ignores names starting with . or _")
        if name in seen:
            raise DropError(datasetid, f"{name} is named twice")
        if (folder / name).exists():
            raise DropError(datasetid, f"{folder / name} is there already: give it a new name")
        seen.add(name)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DropError(datasetid, f"cannot create {folder}: {exc.strerror}") from None
    placed: list[Path] = []
    for source in sources:
        try:
            placed.append(_place(datasetid, source, folder))
        except DropError as exc:
            if placed:  # a disk that filled up half-way: say what did land
                done = ", ".join(p.name for p in placed)
                raise DropError(
                    datasetid, f"{exc.args[0].split(': ', 1)[1]} (dropped before it: {done})"
                ) from None
            raise
    return folder, placed


def _place(datasetid: str, source: Path, folder: Path) -> Path:
    target = folder / source.name
    try:
        handle, hidden = tempfile.mkstemp(dir=folder, prefix=f".{source.name}.")
    except OSError as exc:
        raise DropError(datasetid, f"cannot write in {folder}: {exc.strerror}") from None
    try:
        with os.fdopen(handle, "wb") as out, open(source, "rb") as into:
            shutil.copyfileobj(into, out)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(hidden, 0o644)
        os.link(hidden, target)  # fails rather than replace an item that landed meanwhile
    except FileExistsError:
        raise DropError(datasetid, f"{target} is there already: give it a new name") from None
    except OSError as exc:
        raise DropError(datasetid, f"cannot write {target}: {exc.strerror}") from None
    finally:
        Path(hidden).unlink(missing_ok=True)
    return target
