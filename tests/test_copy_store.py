"""``utility copy-store``: a laptop's store moves to a shared PostgreSQL store and back,
history included, all or nothing."""

from __future__ import annotations

import os
import sqlite3
import uuid
from contextlib import closing

import psycopg
import pytest

from dataflow.dataids import natural_key
from support import InProcessCli as Cli  # utility in this process; RunJob a process
from support import _chunks, refused, script, state, write_many
from support.faults import mounted


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
    assert laptop.run_job("./work.sh").exit_code == 0
    assert laptop.run_job("./work.sh").exit_code == 1
    laptop.ok("hold", "work", "12")
    before = _tables(tmp_path / "dataflow.db")

    copied = laptop.ok("copy-store", "--to", pg_database)
    assert copied.out.endswith(
        ": 2 dataset, 3 job, 15 datastatus, 2 run, 1 hold, 0 deploy, 0 runlog, 1 action\n"
    )
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


def _candidates(address: str) -> list[tuple]:
    with psycopg.connect(address) as conn:
        return conn.execute(
            "SELECT jobid, sortkey, dataid FROM candidate ORDER BY 1, 2, 3"
        ).fetchall()


def _pipeline(cli: Cli) -> None:
    """Chunks in every state a candidate depends on: inputs READY or missing, outputs
    READY, FAILED with a retry left, FAILED without, RESUBMIT, held; a two-input job; a
    daily job (never a candidate)."""
    cli.ok("createtables")
    for name in ("src", "side", "mid", "out", "both"):
        cli.ok("register-dataset", name)
    cli.ok("register-job", "first", "--in", "src", "--out", "mid", "--set", "retries=1")
    cli.ok("register-job", "second", "--in", "mid", "--out", "out")
    cli.ok("register-job", "join", "--in", "src", "--in", "side", "--out", "both")
    cli.ok("register-job", "daily", "--in", "today", "--out", "side")
    cli.ok("ready", "src", "--from", "1", "--to", "12")
    cli.ok("ready", "side", "2", "4", "10")
    script(cli.cwd, "first.sh", '[ "$dataid" != 3 ] && [ "$dataid" != 5 ]')
    for _ in range(2):
        cli.drain("./first.sh")  # 3 and 5 fail twice: their retry is used up
    cli.ok("resubmit", "first", "7")
    cli.ok("hold", "second", "8")
    script(cli.cwd, "second.sh", '[ "$dataid" != 9 ]')
    assert cli.run_job("./second.sh").exit_code == 0  # second's chunk 1 READY
    cli.ok("endjob", "first", "3", "RESUBMIT")


@pytest.mark.long
def test_a_copy_to_postgresql_offers_the_chunks_its_triggers_would(
    tmp_path, pg_server, pg_database
):
    """copy-store's rows go through the target's trigger in one statement per table: the
    same work as the same history built on PostgreSQL directly."""
    direct = tmp_path / "direct"
    direct.mkdir()
    _pipeline(Cli(direct, pg_database))
    laptop = tmp_path / "laptop"
    laptop.mkdir()
    _pipeline(Cli(laptop))
    admin = f"postgresql://{pg_server.user}@{pg_server.host}:{pg_server.port}/postgres"
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    copied = admin.rsplit("/", 1)[0] + f"/{name}"
    try:
        Cli(laptop, copied).ok("createtables")
        Cli(laptop).ok("copy-store", "--to", copied)
        # the same work offered: the tables may differ by stale candidates (the claim
        # drops those), so each job drains both and must run the same chunks
        assert len(_candidates(copied)) > 10  # work left for every kind of job
        for job in ("first", "second", "join"):
            ran = []
            for where, address in ((direct, pg_database), (laptop, copied)):
                script(where, f"{job}.sh", "true")
                done = Cli(where, address).runjob("--all", f"./{job}.sh")
                ran.append(sorted(line.split()[8] for line in done.lines if " READY (" in line))
            assert ran[0] == ran[1] and ran[0], (job, ran)
        with psycopg.connect(copied) as conn:  # and what comes next is offered as ever
            conn.execute("INSERT INTO datastatus VALUES ('mid','x','99','OUT','READY',now())")
            assert ("second", "99") in [(j, d) for j, _, d in _candidates_of(conn)]
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.mark.long
def test_a_large_laptop_store_moves_in_one_command(tmp_path, pg_database):
    """60,000 chunks in one copy: more than PostgreSQL's lock table held when the trigger
    took one lock per chunk (the copy failed, out of shared memory)."""
    laptop = Cli(tmp_path)
    laptop.ok("createtables")
    laptop.ok("register-dataset", "src")
    laptop.ok("register-dataset", "dst")
    laptop.ok("register-job", "work", "--in", "src", "--out", "dst")
    laptop.ok("ready", "src", "--from", "1", "--to", "60000")
    script(tmp_path, "work.sh", "echo ran $dataid")
    assert "ran 1" in laptop.runjob("./work.sh").out
    assert laptop.ok("copy-store", "--to", pg_database).out.endswith(
        ": 2 dataset, 2 job, 60001 datastatus, 1 run, 0 hold, 0 deploy, 1 runlog, 0 action\n"
    )
    with psycopg.connect(pg_database) as conn:
        first = "SELECT jobid, sortkey, dataid FROM candidate ORDER BY sortkey, dataid LIMIT 1"
        assert conn.execute(first).fetchall() == [("work", natural_key("2"), "2")]
        assert conn.execute("SELECT count(*) FROM candidate").fetchone() == (59_999,)
    assert "ran 2" in Cli(tmp_path, pg_database).runjob("./work.sh").out


def _candidates_of(conn) -> list[tuple]:
    return conn.execute("SELECT jobid, sortkey, dataid FROM candidate").fetchall()


@pytest.mark.long  # waits out the idle-in-transaction bound
def test_only_copy_stores_source_may_idle_inside_a_transaction(pg_database, monkeypatch):
    """A session of ours idle inside a transaction for a quarter of the bound is ended by
    the server (a stopped process holds nobody up), in a way that passes; copy-store's
    source, read while the target is written, is exempt (``unhurried``)."""
    import time

    import pytest

    from dataflow.errors import StoreUnavailable
    from dataflow.store import create_store
    from dataflow.store.postgres.connection import failure

    monkeypatch.setenv("DATAFLOW_LIVENESS_TIMEOUT", "2")  # a quarter: the least, 1 s
    with create_store(pg_database)[0] as store:
        with pytest.raises(psycopg.Error) as ended, store.transaction():
            time.sleep(1.5)
            store.clock()
        assert store.passing(ended.value)
        assert isinstance(failure(pg_database, ended.value), StoreUnavailable)  # one line
        with store.transaction():
            store.unhurried()
            time.sleep(1.5)
            store.clock()
        assert store.clock()  # the same session


def _small_files(limit: int):
    """A child whose files cannot grow past ``limit`` bytes (writes fail with EFBIG, as
    on a full disk; Python ignores SIGXFSZ)."""
    import resource

    def limited():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return limited


@pytest.mark.both_stores
def test_copy_store_refuses_its_own_file_by_any_name_and_says_a_folder_is_read_only(
    cli, tmp_path, store_kind
):
    _chunks(cli)
    before = state(tmp_path)
    if store_kind == "sqlite":
        (tmp_path / "link.db").symlink_to(tmp_path / "dataflow.db")
        os.link(tmp_path / "dataflow.db", tmp_path / "hard.db")
        for name in ("link.db", "hard.db", "./sub/../dataflow.db"):
            refused(cli.utility("copy-store", "--to", name, "--force"), 2, "names the store")
        (tmp_path / "hard.db").unlink()
    assert state(tmp_path) == before
    (tmp_path / "ro").mkdir()
    with mounted("-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(tmp_path / "ro")) as folder:
        said = refused(cli.utility("copy-store", "--to", str(folder / "t.db")))
        assert "cannot be written" in said.err and "createtables" not in said.err, said
        assert list(folder.iterdir()) == []
    assert state(tmp_path) == before


@pytest.mark.both_stores
@pytest.mark.long
def test_copy_store_that_fails_part_way_leaves_no_file_behind(cli, tmp_path):
    _chunks(cli)
    write_many(
        tmp_path,
        "insert into run (jobid, dataid, attempt, status, started, command) "
        "values ('A', ?, 1, 'READY', '2026-01-01 00:00:00', ?)",
        [(str(n), "x" * 2000) for n in range(1500)],  # some 3 MB
    )
    before = state(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    target = str(out / "copy.db")
    failed = cli.utility("copy-store", "--to", target, preexec_fn=_small_files(1 << 20))
    refused(failed)
    assert list(out.iterdir()) == []  # no empty target, no -wal
    # over an existing store: it is left as it was
    cli.ok("--db", target, "createtables")
    cli.ok("--db", target, "register-dataset", "kept")

    def dump():
        with closing(sqlite3.connect(target)) as conn:
            return list(conn.iterdump())

    kept, names = dump(), sorted(p.name for p in out.iterdir())
    failed = cli.utility("copy-store", "--to", target, "--force", preexec_fn=_small_files(1 << 20))
    refused(failed)
    assert sorted(p.name for p in out.iterdir()) == names and dump() == kept
    assert state(tmp_path) == before
    assert "1500 run" in cli.ok("copy-store", "--to", target, "--force").out
    assert [p.name for p in out.iterdir() if not p.name.startswith("copy.db")] == []
    (tmp_path / "alias.db").symlink_to(target)  # a copy to a symlink fills its file
    assert "1500 run" in cli.ok("copy-store", "--to", "alias.db", "--force").out
    assert (tmp_path / "alias.db").is_symlink()
