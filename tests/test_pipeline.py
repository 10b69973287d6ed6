"""PostgreSQL's claims and finishes are pipelined (psycopg's pipeline mode: a statement is
sent without waiting for the one before). What a pipeline must not change: a claim or a
finish that fails part-way leaves nothing of itself and the connection usable, and a
session the server ended between two claims costs the next one nothing but a reconnect.
Many processes claiming through pipelines: tests/test_stress.py, test_hosts.py and the
cut sessions of test_store_failures.py."""

from __future__ import annotations

import os
import threading

import psycopg
import pytest

from dataflow.run.claim import claims, lifecycle, patience
from dataflow.run.drain import recorder
from dataflow.run.lease import keeper
from dataflow.run.process.runner import Outcome
from dataflow.store import open_store
from dataflow.store.postgres import connection
from dataflow.store.postgres.store import QUERIES
from support import (
    InProcessCli,
    _admin,
    rows,
    script,
    statuses,
    wait_for,
)
from support.hosts import keeper_backends


@pytest.fixture
def work(tmp_path, pg_database):
    """Job ``work`` (src -> dst) with chunks 1 and 2 claimable; its store, open."""
    cli = InProcessCli(tmp_path, pg_database)
    cli.ok("createtables")
    cli.ok("register-dataset", "src")
    cli.ok("register-dataset", "dst")
    cli.ok("register-job", "work", "--in", "src", "--out", "dst")
    cli.ok("ready", "src", "1", "2")
    store = open_store(pg_database)
    try:
        yield store, lifecycle.load_job(store, "work")
    finally:
        store.close()
        keeper.close_all()


def _chunk(address: str, dataid: str) -> tuple[list[tuple], int, int]:
    """The job's rows at ``dataid``, its run rows, its candidate rows."""
    rows = _admin(
        address,
        "SELECT datasetid, locktype, status FROM datastatus WHERE jobid = 'work'"
        f" AND dataid = '{dataid}' ORDER BY datasetid",
    )
    runs = _admin(address, f"SELECT count(*) FROM run WHERE dataid = '{dataid}'")[0][0]
    offered = _admin(address, f"SELECT count(*) FROM candidate WHERE dataid = '{dataid}'")[0][0]
    return rows, runs, offered


def _fail_writes_of(address: str, table: str, operation: str) -> None:
    """A hostile trigger: every ``operation`` on ``table`` fails until it is dropped."""
    _admin(
        address,
        "CREATE FUNCTION hostile() RETURNS trigger LANGUAGE plpgsql AS"
        " $$ BEGIN RAISE EXCEPTION 'hostile row'; END $$",
    )
    _admin(
        address, f"CREATE TRIGGER hostile BEFORE {operation} ON {table} EXECUTE FUNCTION hostile()"
    )


def _end_session(address: str, pid: int) -> None:
    """The server ends one session, as an administrator or a restarted pooler would."""
    assert _admin(address, f"SELECT pg_terminate_backend({pid})") == [(True,)]


def test_a_claim_that_fails_part_way_leaves_nothing_and_the_store_usable(work, pg_database):
    store, job = work
    before = _chunk(pg_database, "1")
    _fail_writes_of(pg_database, "run", "INSERT")  # the claim's last write: after the others
    with pytest.raises(psycopg.Error, match="hostile row"):
        claims.claim(store, job, command="./work.sh")
    assert _chunk(pg_database, "1") == before  # no RUNNING row, no run, still offered
    _admin(pg_database, "DROP TRIGGER hostile ON run")
    claimed = claims.claim(store, job, command="./work.sh").claim  # the same connection
    assert claimed is not None and claimed.dataid == "1"
    rows, runs, offered = _chunk(pg_database, "1")
    assert {status for *_, status in rows} == {"RUNNING"} and runs == 1 and offered == 0


def test_a_finish_that_fails_part_way_leaves_the_run_running(work, pg_database):
    store, job = work
    claimed = claims.claim(store, job, command="./work.sh").claim
    assert claimed is not None
    _fail_writes_of(pg_database, "datastatus", "DELETE")  # the IN rows' release, with COMMIT
    ended = recorder.record(store, job, {}, claimed, Outcome(0), lambda *_: None)
    assert ended.kind == "lost" and "hostile row" in str(ended.status)
    rows, runs, _ = _chunk(pg_database, "1")
    assert {status for *_, status in rows} == {"RUNNING"} and runs == 1  # READY rolled back
    assert _admin(pg_database, "SELECT status FROM run WHERE dataid = '1'") == [("RUNNING",)]
    _admin(pg_database, "DROP TRIGGER hostile ON datastatus")
    again = claims.claim(store, job, command="./work.sh").claim  # the connection is usable
    assert again is not None and again.dataid == "2"


@pytest.mark.parametrize("idle", [False, True], ids=["at-once", "after-idle"])
def test_a_session_ended_between_claims_costs_the_next_one_a_reconnect(
    work, pg_database, monkeypatch, idle
):
    store, job = work
    first = claims.claim(store, job, command="./work.sh").claim
    assert first is not None and first.dataid == "1"
    _end_session(pg_database, store.conn.raw.info.backend_pid)  # the claims' own session
    if idle:  # the connection has been idle long enough to be checked before the claim
        monkeypatch.setattr(connection, "IDLE_S", 0.0)
    failures = []
    result = patience.patiently(
        store,
        lambda: claims.claim(store, job, command="./work.sh"),
        2,
        failed=lambda error, seconds: failures.append(error),
    )
    assert isinstance(result, claims.ClaimResult)
    assert result.claim is not None and result.claim.dataid == "2"
    # checked first, a lost connection is opened again before anything is sent; sent
    # with the first query, its loss is a failure that passes (tried again at once)
    assert len(failures) == (0 if idle else 1)
    rows, runs, offered = _chunk(pg_database, "2")
    assert {status for *_, status in rows} == {"RUNNING"} and runs == 1 and offered == 0


def test_a_keeper_whose_session_ended_answers_the_next_claim_at_once(work, pg_database):
    """The server ends the keeper's session while it holds chunk 1's run lock: the next
    claim's request reconnects it, which takes chunk 1's lock again, and is answered (it
    failed until the keeper's next heartbeat, up to two seconds later)."""
    store, job = work
    first = claims.claim(store, job, command="./work.sh").claim
    assert first is not None and first.dataid == "1"
    (backend,) = keeper_backends(pg_database)
    _end_session(pg_database, backend)
    second = claims.claim(store, job, command="./work.sh").claim  # no patience: one try
    assert second is not None and second.dataid == "2"
    (again,) = keeper_backends(pg_database)
    held = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1"
    assert again != backend and _admin(pg_database, f"{held} AND pid = {again}") == [(2,)]


def test_a_keeper_started_above_descriptor_1023_answers(work):
    """A drain of many slots holds more than 1,024 descriptors (it raises its limit for
    them): a keeper started then talks over pipes numbered above 1023, where select()
    cannot look."""
    import os
    import resource

    store, job = work
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"a hard limit of {hard} open files")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    held: list[int] = []
    try:
        while not held or held[-1] < 1030:
            held.append(os.open(os.devnull, os.O_RDONLY))
        claimed = claims.claim(store, job, command="./work.sh").claim
        assert claimed is not None and claimed.dataid == "1"
        assert keeper.current(store).requests > 1023
    finally:
        for fd in held:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _fail_once(address: str, table: str, operation: str) -> None:
    """A trigger that fails the first ``operation`` on ``table`` as a serialization failure
    does (a failure that passes: the transaction is tried again), and lets the next ones be."""
    _admin(address, "CREATE SEQUENCE tries")
    _admin(
        address,
        "CREATE FUNCTION fail_once() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        " IF nextval('tries') = 1 THEN RAISE EXCEPTION USING ERRCODE = 'serialization_failure',"
        " MESSAGE = 'not this time'; END IF; RETURN NULL; END $$",
    )
    _admin(
        address, f"CREATE TRIGGER once AFTER {operation} ON {table} EXECUTE FUNCTION fail_once()"
    )


def test_a_claim_given_back_when_the_store_fails_once_is_given_back(work, pg_database):
    """A drain gives back the chunks it claimed ahead and will not start (it is stopped,
    or short of descriptors): the store failing once in a way that passes, it tries again,
    and the chunk is as it was, with no attempt used (not left RUNNING, to be recovered
    later as a failed run)."""
    store, job = work
    before = _chunk(pg_database, "2")
    result = claims.claim(store, job, command="./work.sh", count=2)
    assert [c.dataid for c in (result.claim, *result.more)] == ["1", "2"]
    _fail_once(pg_database, "run", "DELETE")
    claims.release(store, job.jobid, result.more[0])
    assert _chunk(pg_database, "2") == before and result.more[0].lock.fd is None
    assert _admin(pg_database, "SELECT last_value FROM tries") == [(2,)]
    result.claim.lock.close()


def test_ends_recorded_together_when_the_store_fails_once(work, pg_database):
    """The ends of two quick jobs recorded in one transaction, the store failing once in
    a way that passes: tried again, both READY, each run recorded once."""
    store, job = work
    result = claims.claim(store, job, command="./work.sh", count=2)
    taken = [result.claim, *result.more]
    _fail_once(pg_database, "run", "UPDATE")
    told = []
    ends = [(c, Outcome(0, 0.1)) for c in taken]
    ended = recorder.record_together(store, job, ends, lambda *e: told.append(e))
    assert [(e.kind, e.status) for e in ended] == [("ended", "READY")] * 2 and len(told) == 1
    for dataid in "12":
        rows, runs, _ = _chunk(pg_database, dataid)
        assert {status for *_, status in rows} == {"READY"} and runs == 1


# the lease holder a test starts is a new interpreter (not a fork): on its PYTHONPATH,
# this makes its look at its runs (and so its heartbeat) once a minute, not 5 times a second
MINUTE_TICKS = "from dataflow.run.lease import holder\nholder.TICK_S = 60.0\n"


def test_a_claim_given_back_lets_its_run_lock_go_at_once(work, pg_database, tmp_path, monkeypatch):
    """A chunk a drain claimed ahead and gives back is free for another host's drain at
    once: its keeper lets the chunk's run lock go when told, not at its next look (made a
    minute here). Else a drain on another host that finds it held passes it over, and may
    end with it left (while the drain that gave it back ends too)."""
    from dataflow.store.postgres.claims import run_key

    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(MINUTE_TICKS)
    paths = [str(site), os.environ.get("PYTHONPATH", "")]
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, paths)))
    monkeypatch.setenv("DATAFLOW_HOLDER_IDLE", "0")  # it ends as this test lets go of it
    store, job = work
    result = claims.claim(store, job, command="./work.sh", count=2)
    given_back = result.more[0]
    key = run_key("work", given_back.dataid)

    def free() -> bool:  # another session takes the run lock, and lets it go
        taken = _admin(pg_database, f"SELECT pg_try_advisory_lock({key})")[0][0]
        return bool(taken)

    assert not free()  # held by this process's keeper
    claims.release(store, job.jobid, given_back)
    wait_for(free, timeout=10, what="the run lock let go")  # (not a minute later)
    result.claim.lock.close()


def test_a_give_back_waits_for_the_chunks_turn_and_leaves_a_recovered_run(work, pg_database):
    """A give-back reads the chunk's last run in the chunk's turn (the lock every change of
    the chunk takes). Here another host's recovery holds it, marking the claim's run FAILED
    (its lease lapsed while it waited to start): the give-back waits, then finds its run no
    longer RUNNING and leaves it so. Read without the turn, it saw the run RUNNING (the
    recovery not committed yet) and undid the recovery once its table lock was had: no
    history row, the chunk as it was before the claim."""
    store, job = work
    claimed = claims.claim(store, job, command="./work.sh").claim
    assert claimed is not None and claimed.dataid == "1"
    waiting = (
        "SELECT count(*) FROM pg_stat_activity"
        " WHERE wait_event_type = 'Lock' AND datname = current_database()"
    )
    giving = threading.Thread(target=claims.release, args=(store, job.jobid, claimed))
    with psycopg.connect(pg_database) as recovery:  # committed at the end of the block
        recovery.execute(QUERIES.chunk_turn, ("1",))  # as the store takes it
        recovery.execute(
            "UPDATE run SET status = 'FAILED', reason = 'abandoned' WHERE runid = %s",
            (claimed.runid,),
        )
        recovery.execute(
            "UPDATE datastatus SET status = 'FAILED' WHERE jobid = 'work' AND dataid = '1'"
        )
        giving.start()
        wait_for(lambda: _admin(pg_database, waiting) == [(1,)], 20, "the give-back to wait")
    giving.join(timeout=60)
    assert not giving.is_alive() and claimed.lock.fd is None
    assert _admin(pg_database, "SELECT status, reason FROM run WHERE dataid = '1'") == [
        ("FAILED", "abandoned")
    ]
    assert {status for *_, status in _chunk(pg_database, "1")[0]} == {"FAILED"}


def _chunks(chain, last: int) -> None:
    """Chunks 4..last of src READY too (the chain has 1..3)."""
    chain.ok(
        "dml",
        f"with recursive n(i) as (select 4 union all select i+1 from n where i < {last}) "
        "insert into datastatus select 'src','fakejob',i,'OUT','READY',now() from n",
    )


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
@pytest.mark.parametrize(
    "table, operation",
    [("candidate", "DELETE"), ("run", "INSERT"), ("run", "UPDATE"), ("datastatus", "DELETE")],
    ids=["claim-first-write", "claim-last-write", "finish-first-write", "finish-last-write"],
)
@pytest.mark.both_stores
def test_a_session_ended_inside_a_pipelined_claim_or_finish_costs_a_drain_nothing(
    chain, tmp_path, table, operation
):
    """The server ends the drain's session while the statements of a claim of several
    chunks, or of a finish, are in flight (a trigger ends its own session, four times):
    the drain carries on, every chunk runs once and ends READY, with one history row, and
    what it says is one warning line."""
    _chunks(chain, 40)
    script(tmp_path, "work.sh", 'echo "$dataid" >> ran')
    _admin(tmp_path, "CREATE SEQUENCE once")
    _admin(
        tmp_path,
        "CREATE FUNCTION hostile() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
        " IF nextval('once') IN (3, 11, 19, 30) THEN"
        " PERFORM pg_terminate_backend(pg_backend_pid()); END IF;"
        " IF TG_OP = 'DELETE' THEN RETURN OLD; END IF; RETURN NEW; END $$",
    )
    _admin(
        tmp_path,
        f"CREATE TRIGGER hostile BEFORE {operation} ON {table} FOR EACH ROW"
        " WHEN (pg_trigger_depth() < 1) EXECUTE FUNCTION hostile()",
    )
    done = chain.runjob("--all", "--parallel", "3", "./work.sh", timeout=300)
    assert done.code == 0, done
    assert [line for line in done.err.splitlines() if not line.startswith("warning: ")] == []
    assert "pipeline" not in done.err and "in progress" not in done.err
    assert sorted(map(int, (tmp_path / "ran").read_text().split())) == list(range(1, 41))
    assert set(statuses(tmp_path, "work").values()) == {"READY"}
    assert rows(tmp_path, "select status, count(*) from run group by status") == [("READY", 40)]
    assert rows(tmp_path, "select count(*) from datastatus where locktype = 'IN'") == [(0,)]
    assert rows(tmp_path, "select last_value >= 30 from once") == [(True,)]
