"""Schema migrations: an older store is upgraded in place, its data and claims intact."""

from __future__ import annotations

import sqlite3

import pytest

from dataflow.store.sqlite import schema
from support import old_store, script


def test_a_version_1_store_upgrades_with_its_data(cli, tmp_path):
    conn = old_store(tmp_path / "dataflow.db", 1)
    conn.execute("insert into dataset (datasetid) values ('bobin'), ('bobout')")
    conn.execute(
        "insert into job (datasetid,itemtype,jobid) values ('bobout','OUT','loadbob'), ('bobin','IN','loadbob')"
    )
    conn.execute(
        "insert into datastatus values ('bobin','fakejob','1.0','OUT','READY',now()), ('bobin','fakejob','2.0','OUT','READY',now())"
    )
    conn.execute("insert into datastatus values ('bobout','loadbob','1.0','OUT','READY',now())")
    conn.close()

    stale = cli.utility("runs")
    assert stale.code == 2 and stale.err.endswith(
        f"expected {schema.VERSION}: run 'utility createtables' to upgrade it\n"
    )
    assert (
        cli.ok("createtables").out
        == f"store {tmp_path / 'dataflow.db'} upgraded to schema version {schema.VERSION}\n"
    )
    script(tmp_path, "loadbob.sh", "echo ran $dataid")
    ran = cli.runjob("./loadbob.sh")
    assert "ran 2.0" in ran.out and ran.lines[-1].startswith(
        "1 rows updated to READY for loadbob and 2.0"
    )
    with sqlite3.connect(tmp_path / "dataflow.db") as check:
        assert check.execute("select count(*) from candidate").fetchone() == (0,)
        assert check.execute("pragma user_version").fetchone() == (schema.VERSION,)


def test_rebuilding_datastatus_keeps_rows_claims_and_what_users_added(cli, tmp_path):
    """v5 rebuilds datastatus: every row, a live claim, and a user's own index, trigger
    and view survive it."""
    db = tmp_path / "dataflow.db"
    conn = old_store(db, 4)
    conn.execute("insert into dataset (datasetid) values ('bobin'), ('bobout')")
    conn.execute(
        "insert into job (datasetid,itemtype,jobid) values ('bobout','OUT','loadbob'), "
        "('bobin','IN','loadbob')"
    )
    for dataid in ("1.0", "2.0", "3.0", "10.0"):
        conn.execute(
            f"insert into datastatus values ('bobin','fakejob','{dataid}','OUT','READY',now())"
        )
    conn.execute("insert into datastatus values ('bobout','loadbob','1.0','OUT','READY',now())")
    conn.execute("insert into datastatus values ('bobout','loadbob','2.0','OUT','RUNNING',now())")
    conn.execute("insert into datastatus values ('bobin','loadbob','2.0','IN','RUNNING',now())")
    conn.execute("create index mine on datastatus(status, dataid)")
    conn.execute("create table audit(dataid text, status text)")
    conn.execute(
        "create trigger audited after update on datastatus "
        "begin insert into audit values (new.dataid, new.status); end"
    )
    conn.execute("create view ready_rows as select * from datastatus where status = 'READY'")
    rows = sorted(conn.execute("select * from datastatus"))
    candidates = sorted(conn.execute("select * from candidate"))
    conn.close()

    cli.ok("createtables")
    with sqlite3.connect(db) as check:
        assert sorted(check.execute("select * from datastatus")) == rows
        assert sorted(check.execute("select * from candidate")) == candidates
        assert check.execute("select count(*) from ready_rows").fetchone() == (5,)
        plan = check.execute(
            "explain query plan select dataid from datastatus where status = 'READY'"
        ).fetchall()
        assert "USING COVERING INDEX mine" in plan[-1][-1], plan
        kinds = dict(check.execute("select name, type from sqlite_master"))
        assert kinds["audited"] == "trigger" and "datastatus_by_job" not in kinds
        assert "datastatus_v5" not in kinds

    # the RUNNING chunk has no live run: recovered as FAILED, then 3.0 runs
    script(tmp_path, "loadbob.sh", "echo ran $dataid")
    ran = cli.runjob("./loadbob.sh")
    assert "ran 3.0" in ran.out, ran
    with sqlite3.connect(db) as check:
        audit = check.execute("select dataid, status from audit").fetchall()
        assert ("2.0", "FAILED") in audit and ("3.0", "READY") in audit, audit
        assert check.execute(
            "select count(*) from datastatus where locktype = 'IN'"
        ).fetchone() == (0,)


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
@pytest.mark.empty_store  # it makes a version 1 store there itself
def test_a_version_1_postgresql_store_upgrades_with_its_data_and_offers(cli, tmp_path, address):
    """v2 replaces the per-row trigger on datastatus: the offers it made stay, and the
    new trigger makes the next ones."""
    import psycopg

    from dataflow.store.postgres import schema as pg_schema

    with psycopg.connect(address, autocommit=True) as conn:
        conn.execute(pg_schema.migration(1))
        conn.execute("INSERT INTO dataflow_schema VALUES (1)")
        conn.execute("insert into dataset (datasetid) values ('bobin'), ('bobout')")
        conn.execute(
            "insert into job (datasetid,itemtype,jobid) values ('bobout','OUT','loadbob'), "
            "('bobin','IN','loadbob')"
        )
        conn.execute("insert into datastatus values ('bobin','fakejob','2.0','OUT','READY',now())")
    stale = cli.utility("runs")
    assert stale.code == 2 and "run 'utility createtables' to upgrade it" in stale.err
    assert cli.ok("createtables").out.endswith(f"upgraded to schema version {pg_schema.VERSION}\n")
    cli.ok("dml", "insert into datastatus values ('bobin','fakejob','1.0','OUT','READY',now())")
    script(tmp_path, "loadbob.sh", "echo ran $dataid")
    assert "ran 1.0" in cli.runjob("./loadbob.sh").out  # offered by the new trigger
    assert "ran 2.0" in cli.runjob("./loadbob.sh").out  # offered by the old one
    assert "no suitable data" in cli.runjob("./loadbob.sh").out
