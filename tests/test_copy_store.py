"""``utility copy-store``: a laptop's store moves to a shared PostgreSQL store and back,
history included, all or nothing."""

from __future__ import annotations

import sqlite3

from support import Cli, script


def _tables(address) -> dict[str, list[tuple]]:
    from dataflow.store import open_store
    from dataflow.store.base import TABLES

    with open_store(address) as store:
        return {table: store.table_rows(table) for table in TABLES}


def test_round_trip_sqlite_postgres_sqlite_is_the_same_data(tmp_path, pg_database):
    laptop = Cli(tmp_path)
    laptop.ok("createtables")
    laptop.ok("register-dataset", "src")
    laptop.ok("register-dataset", "dst", "--hostname", "db1", "--database", "sales")
    laptop.ok("register-job", "work", "--in", "src", "--out", "dst", "--set", "retries=1")
    laptop.ok("ready", "src", "--from", "1", "--to", "12")
    script(tmp_path, "work.sh", '[ "$dataid" != 2 ]')  # chunk 2 fails
    assert laptop.runjob("./work.sh").code == 0
    assert laptop.runjob("./work.sh").code == 1
    laptop.ok("hold", "work", "12")
    before = _tables(tmp_path / "dataflow.db")

    copied = laptop.ok("copy-store", "--to", pg_database)
    assert copied.out.endswith(": 2 dataset, 3 job, 15 datastatus, 2 run, 1 hold\n")
    back = tmp_path / "back.db"
    Cli(tmp_path, pg_database).ok("copy-store", "--to", str(back))
    assert _tables(back) == before
    exported = [
        Cli(tmp_path, a).ok("export", str(tmp_path / f"{n}.json"))
        for n, a in (("one", tmp_path / "dataflow.db"), ("two", back))
    ]
    assert all(e.code == 0 for e in exported)
    assert (tmp_path / "one.json").read_bytes() == (tmp_path / "two.json").read_bytes()

    # the shared store carries on where the laptop stopped: chunk 2's retry, 3 to 11 (12
    # is held), nothing twice
    shared = Cli(tmp_path, pg_database)
    (tmp_path / "work.sh").write_text("true\n")
    done = shared.runjob("--all", "./work.sh")
    assert done.code == 0, done
    ran = [line.split()[8:10] for line in done.lines if "READY (attempt" in line]
    assert ran == [["2", "READY"]] + [[str(i), "READY"] for i in range(3, 12)], done.out
    assert " 2 READY (attempt 2," in done.out


def test_a_target_that_holds_chunks_is_refused_without_force_and_left_alone(tmp_path, pg_database):
    laptop = Cli(tmp_path)
    laptop.ok("createtables")
    laptop.ok("register-dataset", "src")
    laptop.ok("ready", "src", "1")
    laptop.ok("copy-store", "--to", pg_database)
    laptop.ok("ready", "src", "2")
    refused = laptop.utility("copy-store", "--to", pg_database)
    assert refused.code != 0 and refused.err.startswith("error: ") and "--force" in refused.err
    assert len(_tables(pg_database)["datastatus"]) == 1
    laptop.ok("copy-store", "--to", pg_database, "--force")
    assert len(_tables(pg_database)["datastatus"]) == 2


def test_a_copy_that_fails_half_way_leaves_the_target_as_it_was(tmp_path, pg_database):
    laptop = Cli(tmp_path)
    laptop.ok("createtables")
    laptop.ok("register-dataset", "src")
    laptop.ok("ready", "src", "1", "2")
    with sqlite3.connect(tmp_path / "dataflow.db") as conn:  # a time PostgreSQL cannot read
        conn.execute("update datastatus set modified = 'the day before' where dataid = '2'")
    failed = laptop.utility("copy-store", "--to", pg_database)
    assert failed.code != 0 and failed.err.count("\n") == 1 and "Traceback" not in failed.err
    assert _tables(pg_database)["dataset"] == []
