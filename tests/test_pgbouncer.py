"""A fleet's hosts behind PgBouncer in transaction mode (docs/stores.md): everything but
the leases goes through the pooler (``DATAFLOW_DB``), the host's lease holder straight to
the server, or through the same pooler's lease pool in session mode
(``DATAFLOW_DB_DIRECT``). A real PgBouncer (Debian's ``pgbouncer``, the ini of the docs)
in front of the test session's PostgreSQL server. The fleet of more hosts than the
server has sessions: tests/test_fleet.py."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter

import psycopg
import pytest

from dataflow.run.lease.holder import LOG_NAME
from support import (
    ADDRESSES,
    BOUND,
    Cli,
    on_cue,
    process_state,
    rows,
    script,
    start_runjob,
    statuses,
    two_hosts,
    wait_for,
)
from support.hosts import _one_job, holder_of, holder_sessions, keeper_backends
from support.pooler import POOL_SIZE, Pooler

CHUNKS = 36


@pytest.fixture
def pooler(pg_server):
    found = Pooler(pg_server)
    found.start()
    yield found
    found.stop()


@pytest.fixture
def behind(tmp_path, pg_database, pooler):
    """The CLIs of a host whose store's address is the pooler's; the server's own in
    ``DATAFLOW_DB_DIRECT``. Tests read the store straight from the server."""
    dbname = pg_database.rsplit("/", 1)[1]
    cli = Cli(tmp_path, pooler.url(dbname))
    cli.env["DATAFLOW_DB_DIRECT"] = pg_database
    ADDRESSES[tmp_path] = pg_database
    yield cli
    ADDRESSES.pop(tmp_path, None)


def _setup(cli, tmp_path, chunks: int, body: str) -> None:
    """createtables, register, ready: through the pooler."""
    cli.ok("createtables")
    cli.ok("register-dataset", "src")
    cli.ok("register-dataset", "dst")
    cli.ok("register-job", "work", "--in", "src", "--out", "dst")
    cli.ok("ready", "src", *[str(n) for n in range(1, chunks + 1)])
    script(tmp_path, "work.sh", body)


def _ledger(tmp_path) -> Counter:
    return Counter((tmp_path / "ledger").read_text().split())


def _statuses(tmp_path) -> dict[str, str]:
    found = rows(tmp_path, "select dataid, status from datastatus where jobid='work'")
    return dict(found)


class Sessions:
    """What the server says of the test database's sessions, looked at until stopped:
    the pooled ones (no client address: the pooler's Unix socket), ours straight to the
    server (127.0.0.1), and which of them held a run lock (a session-level advisory lock
    of one bigint key: objsubid 1)."""

    def __init__(self, direct: str):
        self.conn = psycopg.connect(direct, autocommit=True)
        self.pooled: set[int] = set()
        self.direct: set[int] = set()
        self.locking_pooled: set[int] = set()
        self.locking_direct: set[int] = set()
        self.most_pooled = 0
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        while not self.done.is_set():
            self.look()
            self.done.wait(0.05)

    def look(self) -> None:
        found = self.conn.execute(
            """SELECT a.pid, a.client_addr IS NULL,
                      EXISTS (SELECT 1 FROM pg_locks l WHERE l.pid = a.pid AND l.granted
                              AND l.locktype = 'advisory' AND l.objsubid = 1)
               FROM pg_stat_activity a WHERE a.datname = current_database()
                 AND a.backend_type = 'client backend' AND a.pid <> pg_backend_pid()"""
        ).fetchall()
        pooled = {pid for pid, local, _ in found if local}
        self.most_pooled = max(self.most_pooled, len(pooled))
        self.pooled |= pooled
        self.direct |= {pid for pid, local, _ in found if not local}
        self.locking_pooled |= {pid for pid, local, locks in found if local and locks}
        self.locking_direct |= {pid for pid, local, locks in found if not local and locks}

    def stop(self) -> None:
        self.done.set()
        self.thread.join(timeout=30)
        self.conn.close()


@pytest.mark.long
def test_a_drain_and_the_operators_commands_work_through_pgbouncer(behind, tmp_path, pg_database):
    """createtables, register, ready, a drain of --parallel 2, the operator's reads, a
    resubmit and its rerun, all through PgBouncer in transaction mode: no chunk runs
    twice (the job's own ledger); the server sees the pooled work on the pooler's few
    sessions, and the run locks held only by sessions straight to it (the lease holder's)."""
    cli = behind
    _setup(cli, tmp_path, CHUNKS, 'echo "$dataid" >> ledger; echo "did $dataid"; sleep 0.2')
    sessions = Sessions(pg_database)
    try:
        runner = start_runjob(cli, "--all", "--parallel", "2", "./work.sh")
        out, err = runner.communicate(timeout=300)
    finally:
        sessions.stop()
    assert runner.returncode == 0, (out, err)
    assert _ledger(tmp_path) == Counter(str(n) for n in range(1, CHUNKS + 1))
    assert _statuses(tmp_path) == {str(n): "READY" for n in range(1, CHUNKS + 1)}
    assert sessions.pooled and 1 <= sessions.most_pooled <= POOL_SIZE
    assert sessions.locking_direct and not sessions.locking_pooled
    # every session straight to the server was the lease holder's: it held run locks,
    # one session for the drain and its workers
    assert sessions.direct == sessions.locking_direct
    assert len(sessions.direct) == 1, sessions.direct

    status = json.loads(cli.ok("status", "--json").out)
    assert status, status
    history = cli.ok("history", "work").out
    assert history.count("READY") == CHUNKS, history
    board = json.loads(cli.ok("board", "--json").out)
    assert board, board
    assert "did 7" in cli.ok("log", "work", "7").out

    cli.ok("resubmit", "work", "7")
    assert _statuses(tmp_path)["7"] == "RESUBMIT"
    again = cli.runjob("./work.sh")
    assert again.code == 0, again
    assert _ledger(tmp_path)["7"] == 2 and sum(_ledger(tmp_path).values()) == CHUNKS + 1
    assert _statuses(tmp_path)["7"] == "READY"
    # nothing of ours is left on the server: the lease holder's session ended with it,
    # once idle (DATAFLOW_HOLDER_IDLE, 10 s by default)
    query = (
        "select count(*) from pg_stat_activity where datname = current_database()"
        " and client_addr is not null and pid <> pg_backend_pid()"
    )
    wait_for(lambda: rows(tmp_path, query) == [(0,)], what="the holder's session to end")


def test_a_poolers_address_without_the_direct_one_is_refused_in_one_line(
    tmp_path, pg_store, pooler
):
    """PgBouncer refuses the session settings of a direct connection: the line says
    which variable is missing."""
    cli = Cli(tmp_path, pooler.url(pg_store.rsplit("/", 1)[1]))
    result = cli.utility("status")
    assert result.code == 3, result
    assert result.err.count("\n") == 1 and "DATAFLOW_DB_DIRECT" in result.err, result.err
    wrong = cli.utility("status", env={"DATAFLOW_DB_DIRECT": "db1:5432"})
    assert wrong.code != 0 and wrong.err.count("\n") == 1, wrong
    assert "DATAFLOW_DB_DIRECT must be" in wrong.err, wrong


@pytest.mark.slow
def test_a_drain_outlives_its_pooler_down_for_seconds(behind, tmp_path, pooler):
    """PgBouncer killed under a drain and started again 3 s later: the drain's pooled
    connections are cut, refused meanwhile, and made again within its patience (the
    bound), said in one line, as for a server restarting (test_store_failures); the
    keepers, straight to the server, never lose their session, and the job that runs
    through it is not fenced. Every chunk ends READY, once."""
    cli = behind
    first = 'if [ "$dataid" = 1 ]; then sleep 5; else sleep 0.2; fi'
    _setup(cli, tmp_path, 8, f'echo "$dataid" >> ledger; touch started; {first}')
    runner = start_runjob(cli, "--all", "--parallel", "2", "./work.sh")
    wait_for(lambda: (tmp_path / "started").exists(), what="the first job")
    port = pooler.port
    pooler.kill()
    time.sleep(3)
    pooler.start(port)
    out, err = runner.communicate(timeout=120)
    assert runner.returncode == 0, (out, err, pooler.log())
    assert err.startswith("warning: the store failed for ") and err.count("\n") == 1, err
    assert _statuses(tmp_path) == {str(n): "READY" for n in range(1, 9)}
    assert _ledger(tmp_path) == Counter(str(n) for n in range(1, 9))
    (log,) = tmp_path.rglob(LOG_NAME)
    assert "store out of reach" not in log.read_text(), log.read_text()


@pytest.mark.long
def test_a_direct_address_of_another_database_is_refused_before_any_job(behind, tmp_path, pg_store):
    """DATAFLOW_DB_DIRECT naming another store's database: the keeper would hold leases
    nobody else looks at. RunJob refuses at once, in one line, before the job runs, and
    the chunk is left as it was."""
    cli = behind
    _setup(cli, tmp_path, 1, 'echo "$dataid" >> ledger')
    result = cli.runjob("./work.sh", env={"DATAFLOW_DB_DIRECT": pg_store})
    assert result.code == 3, result
    assert "reaches another server or database" in result.err, result
    assert result.err.count("\n") == 1, result.err
    assert not (tmp_path / "ledger").exists()
    assert rows(tmp_path, "select count(*) from run") == [(0,)]
    assert "RUNNING" not in _statuses(tmp_path).values()


def test_a_pooled_transaction_sets_its_own_idle_timeout(pooler, pg_store, monkeypatch):
    """The pooler passes no session settings on: each transaction through it sets the
    server's idle timeout for itself (a quarter of the bound: 5 s), a user's read-only
    statement's too, and the keepers' store (open_session) goes straight to the server."""
    from dataflow.store import open_store

    monkeypatch.setenv("DATAFLOW_DB_DIRECT", pg_store)
    show = "SHOW idle_in_transaction_session_timeout"
    with open_store(pooler.url(pg_store.rsplit("/", 1)[1])) as store:
        with store.transaction():
            assert store.conn.execute(show).fetchone()[0] == "5s"
        assert store.query(show)[1] == [("5s",)]
        assert store.conn.execute(show).fetchone()[0] == "0"  # the pooled session's own
    with open_store(pooler.url(pg_store.rsplit("/", 1)[1]), session=True) as store:
        assert store.conn.address == pg_store
        assert store.conn.execute(show).fetchone()[0] == "5s"  # its options


HOLD_A_ROW = """
import os, signal, sys
from dataflow.store import open_store
store = open_store(sys.argv[1])
with store.transaction():
    store.conn.execute("SELECT 1 FROM dataset WHERE datasetid = 'src' FOR UPDATE").fetchall()
    print("ready", flush=True)
    os.kill(os.getpid(), signal.SIGSTOP)
"""


@pytest.mark.long
def test_a_process_stopped_inside_a_pooled_transaction_holds_its_rows_a_while_only(
    behind, tmp_path, pg_database
):
    """Its transaction's own idle timeout (a quarter of the bound) reaches the server
    through the pooler: the server ends the pooled session of a process stopped inside a
    transaction, and the row it locked is free again while the process is still stopped
    (without the timeout, the wait below runs into its own lock_timeout and fails)."""
    cli = behind
    cli.env["DATAFLOW_LIVENESS_TIMEOUT"] = "8"  # a stall of 2 s
    _setup(cli, tmp_path, 1, "true")
    proc = on_cue(tmp_path, cli.env, HOLD_A_ROW, cli.address)
    try:
        wait_for(lambda: process_state(proc.pid) == "T", what="the process stopped")
        with psycopg.connect(pg_database, autocommit=True) as conn:
            conn.execute("SET lock_timeout = '60s'")
            with conn.transaction():
                conn.execute("SELECT 1 FROM dataset WHERE datasetid = 'src' FOR UPDATE")
        assert process_state(proc.pid) == "T"  # freed while it was still stopped
    finally:
        proc.kill()
        proc.wait(timeout=30)


# -- the lease holders through the pooler's lease pool (session mode) ---------------------


@pytest.fixture
def leased(tmp_path, pg_store, pg_server):
    """Hosts A and B of a store behind a pooler with a lease pool of one server session
    (the docs' ``dataflow_leases`` line): ``DATAFLOW_DB_DIRECT`` its address; a holder
    ends 1 s after its last run. Tests read the store straight from the server."""
    dbname = pg_store.rsplit("/", 1)[1]
    pooler = Pooler(pg_server, leases=(dbname, 1))
    pooler.start()
    hosts = two_hosts(tmp_path, pooler.url(dbname), BOUND)
    for host in hosts:
        host.env.update(DATAFLOW_DB_DIRECT=pooler.leases_url(dbname), DATAFLOW_HOLDER_IDLE="1")
    ADDRESSES[tmp_path] = pg_store
    yield hosts, pooler
    ADDRESSES.pop(tmp_path, None)
    pooler.stop()


def _lease_pool(pooler, dbname: str) -> dict:
    """The lease pool's line of the pooler's ``SHOW POOLS``."""
    with psycopg.connect(pooler.url("pgbouncer"), autocommit=True) as console:
        cursor = psycopg.ClientCursor(console).execute("SHOW POOLS")  # (simple protocol)
        names = [column.name for column in cursor.description]
        pools = [dict(zip(names, values, strict=True)) for values in cursor.fetchall()]
    return next((pool for pool in pools if pool["database"] == f"{dbname}_leases"), {})


def test_a_holders_session_through_the_lease_pool_has_its_settings_and_no_others_locks(
    pg_store, pg_server, monkeypatch
):
    """PgBouncer refuses the ``options`` startup parameter that a direct session's
    settings ride on: the lease holder's store (open_session) sets them once connected,
    and its session is the pooler's (no client address: the pooler's Unix socket). The
    pool's one server session, lent to the next holder, holds none of the run locks the
    last one took (the documented ``server_reset_query``)."""
    from dataflow.store import open_store

    dbname = pg_store.rsplit("/", 1)[1]
    leases = Pooler(pg_server, leases=(dbname, 1))
    leases.start()
    mine = "SELECT count(*) FROM pg_locks WHERE pid = pg_backend_pid() AND locktype = 'advisory'"
    try:
        monkeypatch.setenv("DATAFLOW_DB_DIRECT", leases.leases_url(dbname))
        with open_store(leases.url(dbname), session=True) as store:
            show = store.conn.execute
            assert show("SHOW idle_in_transaction_session_timeout").fetchone()[0] == "5s"
            assert show("SHOW DateStyle").fetchone()[0].startswith("ISO")
            where = "SELECT client_addr FROM pg_stat_activity WHERE pid = pg_backend_pid()"
            assert show(where).fetchone()[0] is None
            assert store.try_run_locks([("work", "1"), ("work", "2")]) == [True, True]
            assert show(mine).fetchone()[0] == 2
            backend = show("SELECT pg_backend_pid()").fetchone()[0]
        with open_store(leases.url(dbname), session=True) as store:
            assert store.conn.execute("SELECT pg_backend_pid()").fetchone()[0] == backend
            assert store.conn.execute(mine).fetchone()[0] == 0
            assert store.try_run_locks([("work", "1")]) == [True]
    finally:
        leases.stop()


@pytest.mark.long  # waits for the holder to take its locks again
def test_a_holder_whose_pooled_session_is_ended_takes_its_locks_again(leased, tmp_path):
    """``pg_terminate_backend`` of the holder's server session behind the lease pool:
    PgBouncer closes the holder's connection too (it never lends the holder another
    session silently, without the run locks), the holder reconnects through the pool and
    takes its lock again; the job is not fenced and finishes READY, once."""
    (a, _), _ = leased
    _one_job(
        a, tmp_path, 'echo "$dataid $DATAFLOW_HOST" >> ledger; until [ -e go ]; do sleep 0.1; done'
    )
    runner = start_runjob(a, "./work.sh")
    wait_for(lambda: len(holder_sessions(ADDRESSES[tmp_path], "hostA")) == 1, what="the holder")
    (session,) = holder_sessions(ADDRESSES[tmp_path], "hostA")
    wait_for(lambda: session in keeper_backends(ADDRESSES[tmp_path]), what="the run lock")
    holder = holder_of(a.env["DATAFLOW_STATE"])
    with psycopg.connect(ADDRESSES[tmp_path], autocommit=True) as conn:
        conn.execute("SELECT pg_terminate_backend(%s)", (session,))

    def again() -> bool:
        found = holder_sessions(ADDRESSES[tmp_path], "hostA")
        return found not in ([], [session]) and found[0] in keeper_backends(ADDRESSES[tmp_path])

    wait_for(again, what="the holder to take its lock again")
    assert holder_of(a.env["DATAFLOW_STATE"]) == holder
    (tmp_path / "go").touch()
    out, err = runner.communicate(timeout=120)
    assert runner.returncode == 0, (out, err)
    assert (tmp_path / "ledger").read_text() == "1 hostA\n"
    assert statuses(tmp_path, "work") == {"1": "READY"}
    (log,) = tmp_path.glob(f"hostA/*/{LOG_NAME}")
    assert "store reached again" in log.read_text(), log.read_text()


@pytest.mark.long  # waits for the pooler's lease session
def test_a_host_beyond_the_lease_pool_waits_its_turn_before_it_claims(leased, tmp_path):
    """A lease pool of one session, held by host A's run: host B's RunJob neither fails
    nor claims while its holder waits in the pooler's queue; once A's run ends and A's
    holder ends (idle), B's holder gets the session and B runs its chunk."""
    (a, b), pooler = leased
    body = 'echo "$dataid $DATAFLOW_HOST" >> ledger; until [ -e go ]; do sleep 0.1; done'
    _one_job(a, tmp_path, body, chunks=2)
    first = start_runjob(a, "./work.sh")
    wait_for(lambda: (tmp_path / "ledger").exists(), what="host A's job")
    second = start_runjob(b, "./work.sh")
    dbname = ADDRESSES[tmp_path].rsplit("/", 1)[1]
    wait_for(lambda: _lease_pool(pooler, dbname).get("cl_waiting") == 1, what="B in the queue")
    assert statuses(tmp_path, "work") == {"1": "RUNNING"}  # B claimed nothing
    assert second.poll() is None
    (tmp_path / "go").touch()
    for runner in (first, second):
        out, err = runner.communicate(timeout=120)
        assert runner.returncode == 0 and not err, (out, err)
    assert (tmp_path / "ledger").read_text() == "1 hostA\n2 hostB\n"
    assert statuses(tmp_path, "work") == {"1": "READY", "2": "READY"}
