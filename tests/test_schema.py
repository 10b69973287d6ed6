"""Schema migrations: an older store is upgraded in place, its data and claims intact."""

from __future__ import annotations

import sqlite3

from dataflow import schema
from dataflow.dataids import natural_key
from dataflow.store import _statements, now
from support import script


def test_a_version_1_store_upgrades_with_its_data(cli, tmp_path):
    conn = sqlite3.connect(tmp_path / "dataflow.db", isolation_level=None)
    conn.create_function("now", 0, now)
    conn.create_function("dataflow_natkey", 1, natural_key)
    for statement in _statements(schema.MIGRATIONS[0]):
        conn.execute(statement)
    conn.execute("PRAGMA user_version = 1")
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
