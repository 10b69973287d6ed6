"""Each backend's SQL is its own named queries (``queries/*.sql`` of its package): every
query the code runs is there, in that backend's dialect and placeholders."""

from __future__ import annotations

import ast
import configparser
import re
from fnmatch import fnmatch
from inspect import getsource
from pathlib import Path

import pytest

import dataflow.store as store_package
from dataflow.store.base import TABLES
from dataflow.store.postgres import schema as pg_schema
from dataflow.store.postgres.store import QUERIES as PG
from dataflow.store.postgres.store import PostgresStore
from dataflow.store.queries import NamedQueries
from dataflow.store.sqlite.store import QUERIES as LITE
from dataflow.store.sqlite.store import SqliteStore

STORE = Path(store_package.__file__).parent
BACKENDS = {"sqlite": LITE, "postgres": PG}
STORES = {"sqlite": SqliteStore, "postgres": PostgresStore}


def _named(tree: ast.AST) -> set[str]:
    """The named queries some code runs (``<x>.q.<name>``)."""
    return {
        node.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Attribute)
        and node.value.attr == "q"
    }


def _names_run(backend: str) -> set[str]:
    """The named queries a backend's store runs: those of its own modules, and those of
    the backend-neutral methods (dataflow.store.queries) it does not replace."""
    found = set()
    for path in (STORE / backend).glob("*.py"):
        found |= _named(ast.parse(path.read_text()))
    store = STORES[backend]
    for path in (STORE / "queries").glob("*.py"):
        for cls in ast.walk(ast.parse(path.read_text())):
            if not isinstance(cls, ast.ClassDef):
                continue
            for method in cls.body:
                if isinstance(method, ast.FunctionDef) and hasattr(store, method.name):
                    run = getattr(store, method.name)  # this one, or one that calls it
                    kept = run.__qualname__.startswith(f"{cls.name}.")
                    found |= _named(method) if kept or "super()" in getsource(run) else set()
    return found | {f"rows_of_{table}" for table in TABLES}  # table_rows: one by its table


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_query_the_code_runs_is_named_in_the_backends_own_files(backend):
    assert _names_run(backend) - BACKENDS[backend].names() == set()


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_query_is_left_unused(backend):
    assert BACKENDS[backend].names() - _names_run(backend) == set()


def test_each_backend_writes_its_drivers_own_placeholders():
    strings = re.compile(r"'(?:[^']|'')*'")
    for name in PG.names():
        text = strings.sub("", getattr(PG, name))
        assert "?" not in text and not re.search(r"(?<!:):[a-z]", text), name
    for name in LITE.names():
        assert "%s" not in getattr(LITE, name) and "%(" not in getattr(LITE, name), name


def test_a_claim_takes_the_offer_lock_the_triggers_take():
    keys = pg_schema.offer_lock("dataid")
    assert f"pg_try_advisory_xact_lock({keys})" in PG.candidates
    assert f"pg_try_advisory_xact_lock({keys})" in PG.candidates_after
    keys = pg_schema.offer_lock("%s")
    assert f"pg_advisory_xact_lock({keys})" in PG.chunk_turn
    assert f"pg_try_advisory_xact_lock({keys})" in PG.try_chunk_turn


def test_a_file_of_named_queries_reads_as_written():
    queries = NamedQueries.__new__(NamedQueries)
    queries._sql = {}
    queries._add(
        "-- what the file holds\n\n-- name: one\n-- what it does\nSELECT 1\nFROM t;\n\n"
        "-- name: two\nDELETE FROM t WHERE a = ?;\n",
        "here",
    )
    assert (queries.one, queries.two) == ("SELECT 1\nFROM t", "DELETE FROM t WHERE a = ?")
    assert queries.names() == {"one", "two"}
    with pytest.raises(AttributeError, match="no query named three"):
        queries.three  # noqa: B018
    with pytest.raises(ValueError, match="here: a second query named one"):
        queries._add("-- name: one\nSELECT 2;\n", "here")
    with pytest.raises(ValueError, match="here: a query may not be named names"):
        queries._add("-- name: names\nSELECT 2;\n", "here")


def test_the_files_are_package_data():
    config = configparser.ConfigParser()
    config.read(STORE.parents[1] / "setup.cfg")
    for backend in BACKENDS:
        patterns = config["options.package_data"][f"dataflow.store.{backend}"].split()
        for path in (STORE / backend / "queries").iterdir():
            assert any(fnmatch(f"queries/{path.name}", p) for p in patterns), path
