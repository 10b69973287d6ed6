"""A backend's frozen migrations: the literal files ``migrations/0001.sql``,
``0002.sql``, ... shipped in its package (package data), applied in order.

A released file never changes: a fresh store and an upgraded one run the same text, so
they end with the same schema (tests/test_migrations.py checks both, and the files'
digests). A schema change is the next file, and the backend's ``schema.VERSION`` one more.
The files are read only when a store is created or upgraded: opening one reads none.
"""

from __future__ import annotations


def _folder(package: str):
    from importlib import resources  # ~8 ms to import: only when a migration is read

    return resources.files(package).joinpath("migrations")


def read(package: str, version: int) -> str:
    """The text of migration ``version`` of ``package``."""
    return _folder(package).joinpath(f"{version:04d}.sql").read_text(encoding="utf-8")


def read_all(package: str) -> tuple[str, ...]:
    """The text of every migration of ``package``, in order (version ``n`` is item
    ``n - 1``); their numbers must run 1, 2, ... without a gap."""
    import re

    folder = _folder(package)
    found = sorted(
        entry.name for entry in folder.iterdir() if re.fullmatch(r"\d{4}\.sql", entry.name)
    )
    expected = [f"{version:04d}.sql" for version in range(1, len(found) + 1)]
    if found != expected:
        raise RuntimeError(f"the migrations of {package} are not numbered 1..n: {found}")
    return tuple(folder.joinpath(name).read_text(encoding="utf-8") for name in found)
