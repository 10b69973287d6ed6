"""The operations of :class:`dataflow.store.base.Store` by topic, and how a backend's SQL
is kept.

A backend keeps its SQL as named queries in the ``queries/*.sql`` files of its package:
each query is a block that starts with a line ``-- name: NAME``, and its comment lines
say what it does. The text goes to the driver as it is, with the driver's own
placeholders (SQLite's ``?`` and ``:name``, psycopg's ``%s`` and ``%(name)s``). A field in
braces (``{marks}``, ``{columns}``, ``{table}``) is filled with :meth:`str.format` by the
caller, with placeholders or names of :data:`dataflow.store.base.TABLES`: never a value.

The classes of this package (:mod:`.chunks`, :mod:`.registration`, :mod:`.holds`,
:mod:`.tables`, :mod:`.history`, :mod:`.views`, :mod:`.deploys`, :mod:`.operator`,
:mod:`.metrics`) are what ``Store`` is made of: each operation once, the same on every
backend (which query, which parameters, the shape of the result), with its contract in
its docstring. They run ``self.q.<name>``, the backend's own text, on ``self.conn``
through the seam a backend writes (:mod:`dataflow.store.connector`).
"""

from __future__ import annotations

import os
import sys


def _name(line: str) -> str | None:
    """The name a line gives the query after it (``-- name: claim_next``), if it does."""
    if not line.startswith("--"):
        return None
    tag, found, name = line[2:].strip().partition(":")
    name = name.strip()
    if tag != "name" or not found or not name:
        return None
    return name if all(c.isalnum() or c == "_" for c in name) else None


class NamedQueries:
    """The named queries of a backend package (its ``queries/*.sql``), as attributes."""

    def __init__(self, package: str):
        self._sql: dict[str, str] = {}  # name: its block as written, comments and all
        # the files beside the package's own (which is imported: it asks): not through
        # importlib.resources, whose import (zipfile, tempfile, shutil) costs every
        # RunJob's start ~5 ms, as in dataflow.store.migrations
        folder = os.path.join(os.path.dirname(sys.modules[package].__file__), "queries")
        for name in sorted(os.listdir(folder)):
            if name.endswith(".sql"):
                with open(os.path.join(folder, name), encoding="utf-8") as file:
                    self._add(file.read(), f"{package} {name}")

    def _add(self, text: str, where: str) -> None:
        blocks: list[tuple[str, list[str]]] = []  # (a file's own comment first: no block's)
        for line in text.split("\n"):  # (as a pattern's ^ and $ read lines: \n only)
            name = _name(line)
            if name is not None:
                blocks.append((name, []))
            elif blocks:
                blocks[-1][1].append(line)
        for name, lines in blocks:
            if name in self._sql or hasattr(type(self), name):
                taken = "a second query" if name in self._sql else "a query may not be"
                raise ValueError(f"{where}: {taken} named {name}")
            self._sql[name] = "\n".join(lines)

    def __getattr__(self, name: str) -> str:
        """A query's text without its comment lines, made at its first use and kept as a
        plain attribute (a run uses a tenth of them: ~1 ms of its start)."""
        try:
            body = self.__dict__["_sql"][name]
        except KeyError:
            raise AttributeError(f"no query named {name}") from None
        lines = [line for line in body.splitlines() if not line.lstrip().startswith("--")]
        text = self.__dict__[name] = "\n".join(lines).strip().rstrip(";").strip()
        return text

    def names(self) -> frozenset[str]:
        return frozenset(self._sql)
