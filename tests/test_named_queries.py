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
from hypothesis import assume, given, settings
from hypothesis import strategies as st

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


def _empty() -> NamedQueries:
    """Named queries of no package: filled by ``_add``."""
    queries = NamedQueries.__new__(NamedQueries)
    queries._sql = {}
    return queries


def test_a_file_of_named_queries_reads_as_written():
    queries = _empty()
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
    queries._add("-- name: three\n-- name:\nSELECT 3;\n", "here")  # a name-less line: a comment
    assert queries.three == "SELECT 3"


# the pattern the files were split at before a run's start did without re (7a19d0c)
_FORMER = r"(?m)^--\s*name:\s*(\w+)\s*$"
_NAME_LINES = st.builds(
    "{}name{}:{}{}{}".format,
    st.sampled_from(["--", "-- ", "--\t", " --", "-"]),
    st.sampled_from(["", " "]),
    st.sampled_from(["", " ", "  "]),
    st.sampled_from(["one", "two", "q_1", "names", "bad-name", "", "é"]),
    st.sampled_from(["", " ", "\r", ";"]),
)
_LINES = st.one_of(
    _NAME_LINES,
    # a line break of str.splitlines' that is not one of the pattern's, before a name
    st.builds(str.__add__, st.sampled_from(["x\r", "\x0c", "\x85", "\u2028"]), _NAME_LINES),
    st.sampled_from(["", "-- what it does", "SELECT 1", "FROM t;", "  -- indented", "--"]),
    st.text(st.characters(codec="utf-8", exclude_characters="\n"), max_size=12),
)


def _former(text: str) -> dict[str, str] | str:
    """What the pattern split ``text`` into (each query's text as __getattr__ makes it),
    or the ValueError's message."""
    queries = _empty()
    parts = re.split(_FORMER, text)
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        if name in queries._sql or hasattr(NamedQueries, name):
            return "a second query" if name in queries._sql else "a query may not be"
        queries._sql[name] = body
    return {name: getattr(queries, name) for name in queries._sql}


@settings(max_examples=400, deadline=None)
@given(st.lists(_LINES, max_size=12))
def test_a_file_splits_into_the_queries_its_former_pattern_found(lines):
    """The named queries are read line by line, without re: for files where no match of
    the pattern runs over a line break (its \\s ran on into the next line: a name-less
    ``-- name:`` took the next line's word), a file gives the same queries, the same
    texts and the same refusals."""
    text = "\n".join(lines)
    assume(all("\n" not in match.group(0) for match in re.finditer(_FORMER, text)))
    queries = _empty()
    try:
        queries._add(text, "here")
        found: dict[str, str] | str = {name: getattr(queries, name) for name in queries.names()}
    except ValueError as exc:
        found = str(exc).removeprefix("here: ").rsplit(" named ", 1)[0]
    assert found == _former(text)


def test_the_files_are_package_data():
    config = configparser.ConfigParser()
    config.read(STORE.parents[1] / "setup.cfg")
    for backend in BACKENDS:
        patterns = config["options.package_data"][f"dataflow.store.{backend}"].split()
        for path in (STORE / backend / "queries").iterdir():
            assert any(fnmatch(f"queries/{path.name}", p) for p in patterns), path
