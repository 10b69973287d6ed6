"""Deploys of a project (table ``deploy``): recorded with the store's ``add_deploy`` inside
the caller's transaction, listed newest first by ``utility deploys``, kept when an older
store is upgraded by ``utility createtables``, and copied by ``utility copy-store``."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timedelta

import pytest

from dataflow.dataids import natural_key
from dataflow.store import create_store, now, open_store
from dataflow.store.postgres import schema as pg_schema
from dataflow.store.sqlite import schema as lite_schema
from dataflow.store.sqlite.connection import statements
from support import Cli as Process
from support import InProcessCli as Cli

pytestmark = pytest.mark.both_stores

DEPLOYS = [  # host, project, digest, revision, changes: oldest first
    ("etl1", "/srv/etl/sales", "a" * 64, None, "2 added, 0 changed, 0 removed"),
    ("etl2", "/srv/etl/sales", "b" * 64, "3f2c1e0", "0 added, 1 changed, 0 removed"),
    ("ci", "/builds/sales", "c" * 64, "9d8e7f6", "1 added, 1 changed, 1 removed"),
]
COLUMNS = ["deployid", "deployed", "host", "project", "digest", "revision", "changes"]


def record(address, deploys=DEPLOYS) -> list[int]:
    """Each deploy recorded in its own transaction, as utility apply records one."""
    ids = []
    with open_store(address) as store:
        for deploy in deploys:
            with store.transaction():
                ids.append(store.add_deploy(*deploy))
    return ids


def listed(cli, *args: str) -> list[dict]:
    return json.loads(cli.ok("deploys", "--json", *args).out)


def test_deploys_come_back_newest_first(cli, address, tmp_path):
    cli.ok("createtables")
    assert cli.ok("deploys").out == "no deploys recorded\n"
    assert listed(cli) == []

    before = datetime.now().astimezone() - timedelta(minutes=1)
    ids = record(address)
    assert ids == sorted(ids) and len(set(ids)) == 3

    rows = listed(cli)
    assert [row["deployid"] for row in rows] == ids[::-1]
    assert [list(row) for row in rows] == [COLUMNS] * 3
    assert [(r["host"], r["project"], r["digest"], r["revision"], r["changes"]) for r in rows] == [
        *reversed(DEPLOYS)
    ]
    for row in rows:  # the store's clock when recorded, with its zone
        deployed = datetime.fromisoformat(row["deployed"])
        assert deployed.tzinfo is not None
        assert before <= deployed <= datetime.now().astimezone() + timedelta(minutes=1)
    newest, oldest = (datetime.fromisoformat(rows[i]["deployed"]) for i in (0, -1))
    assert newest >= oldest

    table = cli.ok("deploys").lines
    assert table[0].split() == [c.upper() for c in COLUMNS]
    assert [line.split()[0] for line in table[2:]] == [str(i) for i in ids[::-1]]
    assert table[2].split()[3:] == [*DEPLOYS[2][:4], *DEPLOYS[2][4].split()]
    assert table[-1].split()[3:8] == [*DEPLOYS[0][:3], "2", "added,"]  # no revision

    assert [row["deployid"] for row in listed(cli, "--limit", "2")] == ids[:0:-1]
    assert [line.split()[0] for line in cli.ok("deploys", "--limit", "1").lines[2:]] == [
        str(ids[-1])
    ]
    as_process = Process(tmp_path, address).ok("deploys", "--json", "--limit", "1")
    assert json.loads(as_process.out) == rows[:1]
    refused = cli.utility("deploys", "--limit", "0")
    assert refused.code != 0 and "--limit" in refused.err


def test_a_deploy_is_part_of_the_callers_transaction(cli, address):
    cli.ok("createtables")
    with open_store(address) as store:
        with pytest.raises(RuntimeError), store.transaction():
            store.add_deploy(*DEPLOYS[0])
            raise RuntimeError("the apply failed")
        with store.transaction():
            kept = store.add_deploy(*DEPLOYS[1])
            assert [row["deployid"] for row in store.deploys(10)] == [kept]
    assert [(row["deployid"], row["host"]) for row in listed(cli)] == [(kept, "etl2")]


@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)
def test_a_sqlite_store_of_the_previous_version_is_upgraded_and_keeps_its_rows(cli, address):
    conn = sqlite3.connect(address, isolation_level=None)
    conn.create_function("now", 0, now)
    conn.create_function("dataflow_natkey", 1, natural_key)
    for migration in lite_schema.migrations()[: lite_schema.VERSION - 1]:
        for statement in statements(migration):
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {lite_schema.VERSION - 1}")
    conn.execute("insert into dataset (datasetid) values ('src'), ('dst')")
    conn.execute("insert into job (jobid, itemtype, datasetid) values ('work', 'OUT', 'dst')")
    conn.execute("insert into datastatus values ('src', 'fakejob', '1', 'OUT', 'READY', now())")
    conn.close()

    _upgraded_keeps_its_rows(cli, address, lite_schema.VERSION)


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
@pytest.mark.empty_store  # it makes a store of the previous version there itself
def test_a_postgresql_store_of_the_previous_version_is_upgraded_and_keeps_its_rows(cli, address):
    import psycopg

    with psycopg.connect(address, autocommit=True) as conn:
        for version in range(1, pg_schema.VERSION):
            conn.execute(pg_schema.migration(version))
        conn.execute("INSERT INTO dataflow_schema VALUES (%s)", (pg_schema.VERSION - 1,))
        conn.execute("insert into dataset (datasetid) values ('src'), ('dst')")
        conn.execute("insert into job (jobid, itemtype, datasetid) values ('work', 'OUT', 'dst')")
        conn.execute("insert into datastatus values ('src', 'fakejob', '1', 'OUT', 'READY', now())")

    _upgraded_keeps_its_rows(cli, address, pg_schema.VERSION)


def _upgraded_keeps_its_rows(cli, address, version: int) -> None:
    """A store of the version before: refused until createtables upgrades it to
    ``version``; then it records deploys and keeps the rows it had."""
    stale = cli.utility("deploys")
    assert stale.code == 2 and "run 'utility createtables' to upgrade it" in stale.err
    assert cli.ok("createtables").out.endswith(f"schema version {version}\n")
    ids = record(address)
    assert [row["deployid"] for row in listed(cli)] == ids[::-1]
    with open_store(address) as store:
        assert sorted(store.datasets()) == ["dst", "src"]
        assert [row["jobid"] for row in store.jobs()] == ["work"]
        assert store.table_rows("datastatus")[0][:5] == ("src", "fakejob", "1", "OUT", "READY")


@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)
def test_copy_store_copies_the_deploys_both_ways(cli, address, tmp_path, pg_database):
    cli.ok("createtables")
    ids = record(address)
    laptop = listed(cli)

    copied = cli.ok("copy-store", "--to", pg_database)
    assert copied.out.endswith(", 0 hold, 3 deploy, 0 runlog, 0 action\n")
    shared = Cli(tmp_path, pg_database)
    assert same_deploys(listed(shared), laptop)
    # new deploys number on from the copied ones
    assert record(pg_database, DEPLOYS[:1]) == [ids[-1] + 1]

    back = tmp_path / "back.db"
    shared.ok("copy-store", "--to", str(back))
    home = Cli(tmp_path, back)
    assert same_deploys(listed(home)[1:], laptop)
    assert listed(home)[0]["deployid"] == ids[-1] + 1
    assert record(back, DEPLOYS[1:2]) == [ids[-1] + 2]


def same_deploys(found: list[dict], expected: list[dict]) -> bool:
    """The same rows; ``deployed`` the same instant (a server may show another zone)."""

    def instant(rows):
        return [{**row, "deployed": datetime.fromisoformat(row["deployed"])} for row in rows]

    return instant(found) == instant(expected)


def test_a_fresh_store_has_the_table(address):
    created, _ = create_store(address)
    with created:
        assert created.deploys(5) == []
        assert created.table_rows("deploy") == []
