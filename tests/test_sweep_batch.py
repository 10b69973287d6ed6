"""An adversarial sweep of batch claims (a claim of several chunks, looked at together),
PostgreSQL's pipelined claims and finishes, and a drain's claims ahead: breaks found,
each a test (fixed, or marked ``xfail(strict=True)`` with the break in its reason), and
attacks that held where no other test says so."""

from __future__ import annotations

import sqlite3
from contextlib import closing

import psycopg
import pytest

from dataflow.dataids import natural_key
from dataflow.run import claims, keeper, lifecycle, locks
from dataflow.store import open_store
from dataflow.store.postgres import connection
from support import ADDRESSES, wait_for

pytestmark = pytest.mark.both_stores


def _admin(tmp_path, sql: str, *params) -> list[tuple]:
    """A statement of any SQL client of the store (DDL included), committed."""
    address = ADDRESSES.get(tmp_path, tmp_path / "dataflow.db")
    if isinstance(address, str):
        with psycopg.connect(connection.conninfo(address), autocommit=True) as conn:
            cursor = conn.execute(sql.replace("?", "%s"), params)
            return cursor.fetchall() if cursor.description is not None else []
    with closing(sqlite3.connect(address)) as conn, conn:
        return conn.execute(sql, params).fetchall()


def _hostile_delete_of_candidate(tmp_path, dataid: str) -> None:
    """A hostile trigger: deleting the candidate row of ``dataid`` fails."""
    if isinstance(ADDRESSES.get(tmp_path), str):
        _admin(
            tmp_path,
            "CREATE FUNCTION hostile() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN RAISE EXCEPTION 'hostile row'; END $$",
        )
        _admin(
            tmp_path,
            "CREATE TRIGGER hostile BEFORE DELETE ON candidate FOR EACH ROW"
            f" WHEN (OLD.dataid = '{dataid}') EXECUTE FUNCTION hostile()",
        )
    else:
        _admin(
            tmp_path,
            "CREATE TRIGGER hostile BEFORE DELETE ON candidate"
            f" WHEN OLD.dataid = '{dataid}' BEGIN SELECT RAISE(ABORT, 'hostile row'); END",
        )


def _drop_hostile(tmp_path) -> None:
    on = " ON candidate" if isinstance(ADDRESSES.get(tmp_path), str) else ""
    _admin(tmp_path, f"DROP TRIGGER hostile{on}")


def _stale_candidate(chain, tmp_path, dataid: str) -> None:
    """The job has produced ``dataid`` already, and a writer puts its candidate back."""
    chain.ok("dml", f"insert into datastatus values ('dst','work','{dataid}','OUT','READY',now())")
    _admin(
        tmp_path,
        "insert into candidate(jobid, sortkey, dataid) values ('work', ?, ?)",
        natural_key(dataid),
        dataid,
    )


def _chunks(chain, last: int) -> None:
    """Chunks 4..last of src READY too (the chain has 1..3)."""
    chain.ok(
        "dml",
        f"with recursive n(i) as (select 4 union all select i+1 from n where i < {last}) "
        "insert into datastatus select 'src','fakejob',i,'OUT','READY',now() from n",
    )


def test_a_claim_that_fails_in_its_second_batch_lets_go_of_the_first_batchs_locks(
    chain, tmp_path, address
):
    """A claim of two: chunk 2 is held by a process of an earlier run, so the first batch
    (1, 2) gives chunk 1 only and the claim looks at the next (3, 4); a store error there
    (a hostile trigger on chunk 3's stale candidate; a session ended, a server restarting)
    fails the claim. Nothing is claimed, and chunk 1's lock must be let go with it: kept,
    its own drain and every other RunJob pass it over until this process ends (and on
    PostgreSQL the keeper keeps its run lock as long)."""
    _chunks(chain, 6)
    _stale_candidate(chain, tmp_path, "3")
    _hostile_delete_of_candidate(tmp_path, "3")
    store = open_store(address)
    other = locks.ChunkLock(store.lockfile, "work", "2")  # an earlier run's process
    try:
        job = lifecycle.load_job(store, "work")
        claims.prepare(store, "work")
        assert other.try_acquire()
        with pytest.raises(Exception, match="hostile row"):
            claims.claim(store, job, command="./work.sh", count=2)
        assert not locks.is_held(store.lockfile, "work", "1")  # let go with the claim
        if isinstance(address, str):
            wait_for(lambda: not store.run_locks_held([("work", "1")]), what="run lock let go")
        _drop_hostile(tmp_path)
        result = claims.claim(store, job, command="./work.sh", count=2)
        assert [c.dataid for c in (result.claim, *result.more)] == ["1", "4"]
        for claim in (result.claim, *result.more):
            claim.lock.close()
    finally:
        other.close()
        store.close()
        keeper.close_all()
