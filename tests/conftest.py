"""Shared fixtures: a real store (an SQLite file in tmp_path, or a database on a real
PostgreSQL server started by pytest-postgresql), and the real CLIs in subprocesses.

A module or test marked ``both_stores`` runs once per backend: its ``cli`` (and
``address``) point at an SQLite file, then at a fresh PostgreSQL database.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from pytest_postgresql import factories

from dataflow.store import create_store
from support import ADDRESSES, BOUND, Cli, two_hosts

STORES = ("sqlite", "postgres")

# pg_ctl refuses to run as root: tests/postgres/pg_ctl runs it as user postgres then
pg_server = factories.postgresql_proc(
    executable=str(Path(__file__).parent / "postgres" / "pg_ctl"),
    postgres_options="-c fsync=off -c synchronous_commit=off -c max_connections=300",
)


def _names(argnames) -> list[str]:
    if isinstance(argnames, str):
        return [name.strip() for name in argnames.split(",")]
    return list(argnames)


def pytest_generate_tests(metafunc):
    chosen = any(  # a test that names its store itself, in a module marked both_stores
        "store_kind" in _names(mark.args[0])
        for mark in metafunc.definition.iter_markers("parametrize")
    )
    if (
        metafunc.definition.get_closest_marker("both_stores")
        and "store_kind" in metafunc.fixturenames
        and not chosen
    ):
        metafunc.parametrize("store_kind", STORES, indirect=True)


@pytest.fixture
def store_kind(request) -> str:
    return getattr(request, "param", "sqlite")


@pytest.fixture
def pg_database(request) -> str:
    """A fresh, empty database on the session's PostgreSQL server; its URL."""
    server = request.getfixturevalue("pg_server")
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    admin = f"postgresql://{server.user}@{server.host}:{server.port}/postgres"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    yield f"postgresql://{server.user}@{server.host}:{server.port}/{name}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def address(store_kind, tmp_path, request):
    """The store's address: a file in tmp_path, or a PostgreSQL database's URL."""
    if store_kind == "postgres":
        found = request.getfixturevalue("pg_database")
    else:
        found = tmp_path / "dataflow.db"
    ADDRESSES[tmp_path] = found
    yield found
    ADDRESSES.pop(tmp_path, None)


@pytest.fixture
def cli(tmp_path: Path, address) -> Cli:
    return Cli(tmp_path, address)


@pytest.fixture
def store(address):
    """A fresh store."""
    created, _ = create_store(address)
    yield created
    created.close()


@pytest.fixture
def chain(cli, tmp_path):
    """Job ``work`` (src -> dst), chunks 1..3 of src READY."""
    cli.ok("createtables")
    cli.ok("dml", "insert into dataset (datasetid) values ('src'), ('dst')")
    cli.ok(
        "dml",
        "insert into job (jobid,itemtype,datasetid) values ('work','IN','src'), ('work','OUT','dst')",
    )
    cli.ok(
        "dml",
        "insert into datastatus select 'src','fakejob',value,'OUT','READY',now() from (select '1' value union select '2' union select '3') AS chunks",
    )
    return cli


@pytest.fixture
def hosts(tmp_path, pg_database):
    """Two hosts sharing a PostgreSQL store: their own folders and names, the same cwd
    (jobs), the liveness bound BOUND."""
    a, b = two_hosts(tmp_path, pg_database, BOUND)
    ADDRESSES[tmp_path] = pg_database
    yield a, b
    ADDRESSES.pop(tmp_path, None)
