"""An adversarial sweep of batch claims (a claim of several chunks, looked at together),
PostgreSQL's pipelined claims and finishes, and a drain's claims ahead: breaks found,
each a test (fixed, or marked ``xfail(strict=True)`` with the break in its reason), and
attacks that held where no other test says so."""

from __future__ import annotations

import contextlib
import datetime
import signal
import sqlite3
from contextlib import closing

import psycopg
import pytest

from dataflow.dataids import natural_key
from dataflow.run import claims, keeper, lifecycle, locks
from dataflow.store import open_store
from dataflow.store.postgres import connection
from support import ADDRESSES, rows, script, start_runjob, statuses, wait_for, written

pytestmark = pytest.mark.both_stores


def _admin(tmp_path, sql: str, *params) -> list[tuple]:
    """A statement of any SQL client of the store (DDL included), committed."""
    address = ADDRESSES.get(tmp_path, tmp_path / "dataflow.db")
    if isinstance(address, str):
        with psycopg.connect(connection.conninfo(address), autocommit=True) as conn:
            cursor = conn.execute(sql.replace("?", "%s"), params)
            return cursor.fetchall() if cursor.description is not None else []
    with closing(sqlite3.connect(address)) as conn, conn:
        conn.create_function("dataflow_natkey", 1, natural_key)  # the store's triggers call it
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


def test_a_batch_puts_candidates_with_wrong_sort_keys_in_their_place(chain, tmp_path, address):
    """A writer gives chunk 7 a sort key that puts it first, chunk 2 one that puts it
    last, and chunk 3 a second candidate row under a wrong key: claims of four take each
    chunk once, never chunk 7 before 1 to 4 (chunk 2 comes when the scan reaches its
    key: the writer's order), and leave every key repaired."""
    _chunks(chain, 8)
    _admin(tmp_path, "update candidate set sortkey = 'zzz' where dataid = '2'")
    _admin(tmp_path, "update candidate set sortkey = '' where dataid = '7'")
    _admin(tmp_path, "insert into candidate values ('work', '!', '3')")
    store = open_store(address)
    try:
        job = lifecycle.load_job(store, "work")
        claims.prepare(store, "work")
        taken = []
        while (result := claims.claim(store, job, command="./work.sh", count=4)).claim:
            taken.append([result.claim, *result.more])
        first = [c.dataid for c in taken[0]]
        assert "7" not in first and first == sorted(first, key=natural_key)
        claimed = [c.dataid for batch in taken for c in batch]
        assert sorted(claimed) == list("12345678")
        for batch in taken:
            for claim in batch:
                claim.lock.close()
        assert _admin(tmp_path, "select count(*) from candidate") == [(0,)]
        assert len(rows(tmp_path, "select 1 from run")) == 8
    finally:
        store.close()
        keeper.close_all()


# dataids no shell, file name or line protocol should take whole
ODD = [f"{n} \n'\"$(touch pwned)`id`;\t\\ ünï😀 " + "x" * 600 + f" -- {n}\n" for n in range(40)]


def test_racing_drains_run_chunks_with_odd_long_dataids_once(chain, tmp_path):
    """Forty chunks whose dataids hold spaces, newlines, quotes, a command substitution,
    unicode and 600 more characters: two drains of eight slots, claiming up to 32 at a
    time (on PostgreSQL their run locks asked of the keeper in one request)."""
    for dataid in ODD:
        _admin(
            tmp_path,
            "insert into datastatus values ('src', 'fakejob', ?, 'OUT', 'READY', ?)",
            dataid,
            "2026-11-27 00:00:00.000000",
        )
    # a file a run (two runs' appends of long lines could interleave)
    (tmp_path / "ran").mkdir()
    script(tmp_path, "work.sh", 'printf "%s" "$dataid" > "ran/$DATAFLOW_RUN"')
    drains = [start_runjob(chain, "--all", "--parallel", "8", "./work.sh") for _ in range(2)]
    for drain in drains:
        out, err = drain.communicate(timeout=600)
        assert drain.returncode == 0, (out, err)
        assert "Traceback" not in err and "error" not in err, err
    ran = [one.read_bytes().decode() for one in (tmp_path / "ran").iterdir()]
    assert sorted(ran) == sorted(["1", "2", "3", *ODD])
    assert not (tmp_path / "pwned").exists()
    found = statuses(tmp_path, "work")
    assert len(found) == 43 and set(found.values()) == {"READY"}
    assert len(rows(tmp_path, "select 1 from run")) == 43


def test_racing_drains_of_a_clock_jobs_backfill_run_each_period_once(cli, tmp_path):
    """A daily job with 80 days resubmitted (a backfill) and today: three drains of four
    slots, whose quick jobs make them claim up to sixteen periods at a time. A clock job
    has no candidate rows to lock: each period is guarded by its offer lock alone."""
    cli.ok("createtables")
    cli.ok("register-dataset", "daily_out")
    cli.ok("register-job", "daily", "--in", "today", "--out", "daily_out")
    today = datetime.date.today()
    first, last = today - datetime.timedelta(days=80), today - datetime.timedelta(days=1)
    cli.ok("resubmit", "daily", "--from", first.isoformat(), "--to", last.isoformat())
    script(tmp_path, "daily.sh", 'echo "$dataid" >> ran')
    drains = [start_runjob(cli, "--all", "--parallel", "4", "./daily.sh") for _ in range(3)]
    for drain in drains:
        out, err = drain.communicate(timeout=600)
        assert drain.returncode == 0, (out, err)
    ran = (tmp_path / "ran").read_text().split()
    assert len(ran) == len(set(ran)) and len(set(ran)) >= 81  # today's may be tomorrow's
    runs = rows(tmp_path, "select dataid, attempt, status from run")
    assert sorted(d for d, _, _ in runs) == sorted(ran)  # one history row each
    assert {(attempt, status) for _, attempt, status in runs} == {(1, "READY")}


def test_a_batch_passes_over_a_chunk_whose_run_lives_on_another_host(hosts, tmp_path):
    """Host A runs chunk 1; a store writer sets it RESUBMIT and deletes its IN row, so it
    is offered again while A's job lives. Host B's drain claims three at a time: chunk 1,
    first of its first batch, is passed over (A's lease), the others run, and chunk 1
    stays offered until A's run ends."""
    a, b = hosts
    a.ok("createtables")
    a.ok("register-dataset", "src")
    a.ok("register-dataset", "dst")
    a.ok("register-job", "work", "--in", "src", "--out", "dst")
    a.ok("ready", "src", *map(str, range(1, 8)))
    script(
        tmp_path,
        "work.sh",
        'echo "$DATAFLOW_HOST $dataid" >> ran\n'
        'if [ "$DATAFLOW_HOST" = hostA ]; then echo $$ > job.pid; '
        "until [ -e go ]; do sleep 0.1; done; fi",
    )
    runner = start_runjob(a, "./work.sh")
    try:
        wait_for(lambda: written(tmp_path / "job.pid"), what="host A's job")
        a.ok(
            "dml",
            "delete from datastatus where jobid = 'work' and dataid = '1' and locktype = 'IN'",
        )
        a.ok(
            "dml",
            "update datastatus set status = 'RESUBMIT' where jobid = 'work' and dataid = '1'",
        )
        assert rows(tmp_path, "select count(*) from candidate where dataid = '1'") == [(1,)]
        done = b.runjob("--all", "--parallel", "3", "./work.sh", timeout=300)
        assert done.code == 0, done
        ran = (tmp_path / "ran").read_text().splitlines()
        assert sorted(ran) == ["hostA 1", *(f"hostB {n}" for n in range(2, 8))]
        assert rows(tmp_path, "select count(*) from candidate where dataid = '1'") == [(1,)]
    finally:
        (tmp_path / "go").touch()
        runner.wait(timeout=60)


LEDGER_JOB = """
exec 9>>"flock.$dataid"
flock -n 9 || echo "OVERLAP $dataid" >> ledger
echo "$DATAFLOW_HOST $dataid" >> ledger
if [ "$DATAFLOW_HOST $dataid" = "hostA 2" ]; then until [ -e go ]; do sleep 0.1; done; fi
"""


def _ledger(tmp_path) -> list[str]:
    path = tmp_path / "ledger"
    return path.read_text().splitlines() if path.exists() else []


@contextlib.contextmanager
def _ahead_lapsed(hosts, tmp_path, monkeypatch):
    """Host A's drain (one slot) runs chunk 1 at once and chunk 2 until the file ``go``
    exists: chunk 3 (and more) is claimed ahead, and waits until its lease, which nobody
    renews, is older than the bound. Then host B (in this process) claims while the
    server ends host A's keeper session. Yields host A's RunJob and host B's claim (None
    if it took nothing), held until the block ends."""
    from hosts import keeper_backends
    from support import BOUND

    a, b = hosts
    a.ok("createtables")
    a.ok("register-dataset", "src")
    a.ok("register-dataset", "dst")
    a.ok("register-job", "work", "--in", "src", "--out", "dst")
    a.ok("dml", "insert into job (jobid, itemtype, itemvalue) values ('work', 'retries', '1')")
    a.ok("ready", "src", *map(str, range(1, 5)))
    script(tmp_path, "work.sh", LEDGER_JOB)
    runner = start_runjob(a, "--all", "--parallel", "1", "./work.sh")
    found = store = None
    try:
        wait_for(lambda: "hostA 2" in _ledger(tmp_path), what="chunk 2")
        wait_for(lambda: rows(tmp_path, "select count(*) from run where dataid = '3'") == [(1,)])
        stale = "select seen + lease * interval '1 second' < now() from run where dataid = '3'"
        wait_for(lambda: rows(tmp_path, stale) == [(True,)], timeout=BOUND * 4, what="lapse")
        for name, value in b.env.items():
            if name.startswith("DATAFLOW_"):
                monkeypatch.setenv(name, value)
        store = open_store(b.address)
        job = lifecycle.load_job(store, "work")
        keeper.keeper_for(store)
        for _ in range(20):
            for backend in keeper_backends(a.address):
                _admin(tmp_path, f"SELECT pg_terminate_backend({backend})")
            found = claims.claim(store, job, command="./work.sh").claim
            if found is not None:
                break
        yield runner, found
    finally:
        (tmp_path / "go").touch()
        if runner.poll() is None:
            runner.wait(timeout=60)
        if found is not None:
            found.lock.close()
        if store is not None:
            store.close()
        keeper.close_all()


@pytest.mark.slow
def test_a_chunk_claimed_ahead_for_longer_than_the_bound_never_runs_beside_another_hosts(
    hosts, tmp_path, monkeypatch
):
    """On PostgreSQL: host A's drain goes on (chunk 2 ends) while host B holds its claim
    of a chunk host A claimed ahead: host A never starts it. (Nobody renews the lease of
    a chunk claimed ahead before its start: a drain gives back those that waited half
    the bound, and a chunk given back that another host took since is left as it is.)"""
    with _ahead_lapsed(hosts, tmp_path, monkeypatch) as (runner, found):
        before = _ledger(tmp_path)
        (tmp_path / "go").touch()
        runner.wait(timeout=60)
        after = _ledger(tmp_path)[len(before) :]
    if found is not None:
        assert f"hostA {found.dataid}" not in after, (found.dataid, before, after)


@pytest.mark.slow
def test_a_stopped_drain_never_gives_back_a_chunk_another_host_claimed_since(
    hosts, tmp_path, monkeypatch
):
    """On PostgreSQL: as above, but host A's drain is stopped (SIGTERM): the chunks it
    claimed ahead are given back, host B's claim of one of them stays as it is."""
    with _ahead_lapsed(hosts, tmp_path, monkeypatch) as (runner, found):
        runner.send_signal(signal.SIGTERM)
        runner.wait(timeout=60)
        if found is not None:
            mine = rows(
                tmp_path,
                "select locktype, status from datastatus where jobid = 'work' and dataid = ?",
                found.dataid,
            )
            assert sorted(mine) == [("IN", "RUNNING"), ("OUT", "RUNNING")], mine
            assert rows(tmp_path, "select count(*) from run where runid = ?", found.runid) == [(1,)]


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
@pytest.mark.parametrize(
    "table, operation",
    [("candidate", "DELETE"), ("run", "INSERT"), ("run", "UPDATE"), ("datastatus", "DELETE")],
    ids=["claim-first-write", "claim-last-write", "finish-first-write", "finish-last-write"],
)
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


def test_a_hostile_run_row_is_one_line_and_blocks_only_its_chunk(chain, tmp_path, address):
    """A last run whose attempt no claim can add one to (text, which any SQLite client
    may write into the typeless column; on PostgreSQL the integer's limit) is said in
    one line and its chunk skipped; every other chunk of the job runs."""
    attempt = "2147483647" if isinstance(address, str) else "'x'"
    _chunks(chain, 6)
    chain.ok("dml", "insert into datastatus values ('dst','work','2','OUT','FAILED',now())")
    chain.ok("dml", "insert into job (jobid, itemtype, itemvalue) values ('work', 'retries', '3')")
    _admin(
        tmp_path,
        "insert into run (jobid, dataid, attempt, retry, status, started)"
        f" values ('work', '2', {attempt}, 0, 'FAILED', '2026-01-01 00:00:00')",
    )
    script(tmp_path, "work.sh", 'echo "$dataid" >> ran')
    done = chain.runjob("--all", "--parallel", "3", "./work.sh")
    assert done.code == 0, done.err
    assert done.err.splitlines() == [
        "warning: dataid '2' of work has a last run whose attempt or retry is not a "
        "count: skipped; correct or delete its rows"
    ]
    assert sorted((tmp_path / "ran").read_text().split()) == ["1", "3", "4", "5", "6"]
    assert statuses(tmp_path, "work")["2"] == "FAILED"


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
@pytest.mark.slow
def test_keeper_sessions_ended_during_a_drains_batch_claims_cost_it_nothing(chain, tmp_path):
    """The server ends the keeper's session again and again while a drain of quick jobs
    asks it for the run locks of up to twelve chunks at a time: a request it cannot
    answer fails the claim, which is tried again; every chunk runs once and ends READY."""
    import threading
    import time

    from hosts import keeper_backends

    _chunks(chain, 120)
    script(tmp_path, "work.sh", 'sleep 0.03; echo "$dataid" >> ran')
    stop, ended = threading.Event(), []

    def terminate() -> None:
        while not stop.is_set():
            for backend in keeper_backends(chain.address):
                with contextlib.suppress(psycopg.Error):
                    ended.extend(_admin(tmp_path, f"SELECT pg_terminate_backend({backend})"))
            time.sleep(0.1)

    thread = threading.Thread(target=terminate)
    thread.start()
    try:
        done = chain.runjob("--all", "--parallel", "3", "./work.sh", timeout=300)
    finally:
        stop.set()
        thread.join()
    assert done.code == 0, done
    assert len(ended) >= 3  # sessions ended while the drain ran
    assert [line for line in done.err.splitlines() if not line.startswith("warning: ")] == []
    assert sorted(map(int, (tmp_path / "ran").read_text().split())) == list(range(1, 121))
    assert set(statuses(tmp_path, "work").values()) == {"READY"}
    assert rows(tmp_path, "select status, count(*) from run group by status") == [("READY", 120)]
