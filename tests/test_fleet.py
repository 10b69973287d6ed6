"""A fleet of more hosts than its server has sessions (issue 45's soak, bounded for CI):
simulated hosts fire cron's ticks against a PostgreSQL server of ``max_connections`` =
50, through one PgBouncer of the docs' ``pgbouncer.ini``: claims, finishes and the rest
through its transaction pool (``DATAFLOW_DB``), the hosts' lease holders through its
lease pool in session mode (``DATAFLOW_DB_DIRECT``), smaller than the hosts.

The server's sessions are budgeted as docs/stores.md says: the transaction pool keeps
all of its sessions open (``min_pool_size``), so that the server has fewer sessions left
than there are hosts with a lease holder at once. Leases straight to the server would be
refused ("too many clients"); through the lease pool, a holder beyond it waits in the
pooler's queue, before its RunJob claims anything, until another host's holder ends.
The jobs of the first hosts to hold a lease wait (a barrier) until more hosts have
started a holder than the server has sessions left, so that the overlap does not depend
on how fast one machine starts a hundred processes. The job is the judge of what ran:
it appends ``job dataid host`` to a ledger.
"""

from __future__ import annotations

from collections import Counter

import psycopg
import pytest

from support import BIN, Cli, pgserver, script
from support.fleet import Watch, errors, refused, tick
from support.pooler import Pooler

MAX_CONNECTIONS = 50
POOLED = 30  # the transaction pool's server sessions, all kept open
LEASES = 8  # the lease pool's server sessions (session mode)
HOSTS = 24
JOBS = ["j1", "j2"]
TICKS, TICK_S = 2, 8.0
# hosts that have started a holder before the first runs may end: more than the server's
# sessions left beside the pool and the watch's own (50 - 30 - 1 = 19), so that leases
# straight to the server would be refused
BARRIER = 22
CHUNKS = HOSTS * TICKS // 2  # per job: every RunJob of the first tick finds one
JOB = """
echo "$jobid $dataid $DATAFLOW_HOST" >> "{folder}/ledger"
for _ in $(seq 600); do
  [ "$(ls "{folder}"/hosts/*/*.d/holder.log 2>/dev/null | wc -l)" -ge {barrier} ] && break
  sleep 0.1
done
sleep 0.5
"""


@pytest.fixture
def fleet_server():
    """A PostgreSQL server of this test alone, with the fleet's ``max_connections``."""
    with pgserver.own_server(max_connections=MAX_CONNECTIONS) as server:
        yield server


@pytest.fixture
def fleet(fleet_server, tmp_path):
    """The fleet's CLIs (a host's environment but its name and folder), the server's own
    address of the store's database, and its PgBouncer with both pools."""
    with pgserver.database(fleet_server) as direct:
        dbname = direct.rsplit("/", 1)[1]
        pooler = Pooler(fleet_server, leases=(dbname, LEASES))
        pooler.ini["pgbouncer"].update(default_pool_size=str(POOLED), min_pool_size=str(POOLED))
        pooler.start()
        try:
            cli = Cli(tmp_path, pooler.url(dbname))
            cli.env["DATAFLOW_DB_DIRECT"] = pooler.leases_url(dbname)
            cli.env["DATAFLOW_HOLDER_IDLE"] = "1"  # a host's lease session is another's soon
            # the hosts share two cores: a RunJob starved inside a pooled transaction is
            # not taken for a stopped one (the stall guard, a quarter of the bound: 15 s)
            cli.env["DATAFLOW_LIVENESS_TIMEOUT"] = "60"
            yield cli, direct, pooler
        finally:
            pooler.stop()


@pytest.mark.slow
def test_a_fleet_of_more_hosts_than_server_sessions_runs_every_chunk_once(fleet, tmp_path):
    """24 hosts x 2 jobs, two cron ticks 8 s apart, against a server of 50 sessions of
    which the transaction pool keeps 30 and the lease pool lends 8: more than 19 hosts
    have a lease holder alive at once, and the lease pool's clients queue; no RunJob is
    refused a session or fails, no chunk runs twice, every chunk ends READY, and the
    server never holds more than the pools' sessions."""
    cli, direct, pooler = fleet
    cli.ok("createtables")
    cli.ok("register-dataset", "src")
    for job in JOBS:
        cli.ok("register-dataset", f"{job}out")
        cli.ok("register-job", job, "--in", "src", "--out", f"{job}out")
        script(tmp_path, f"{job}.sh", JOB.format(folder=tmp_path, barrier=BARRIER))
    cli.ok("ready", "src", *[str(n) for n in range(1, CHUNKS + 1)])
    leases = pooler.leases_url(direct.rsplit("/", 1)[1]).rsplit("/", 1)[1]
    watch = Watch(direct, pooler.url("pgbouncer"), leases, tmp_path)
    try:
        runjobs = []
        for n in range(TICKS):
            if n:
                watch.done.wait(TICK_S)
            runjobs += tick(tmp_path, cli.env, HOSTS, JOBS, str(BIN / "RunJob"))
        codes = Counter(runjob.wait(timeout=600) for runjob in runjobs)
    finally:
        watch.stop()
    said = errors(tmp_path)
    assert refused(said) == 0, said
    assert codes == {0: len(runjobs)}, (codes, said)
    ran = Counter(
        tuple(line.split()[:2]) for line in (tmp_path / "ledger").read_text().split("\n") if line
    )
    assert [chunk for chunk, runs in ran.items() if runs > 1] == []
    expected = {(job, str(n)) for job in JOBS for n in range(1, CHUNKS + 1)}
    assert set(ran) == expected
    with psycopg.connect(direct) as conn:
        found = conn.execute(
            "SELECT jobid, dataid, status FROM datastatus WHERE jobid = ANY(%s)", (JOBS,)
        )
        assert {(job, dataid): status for job, dataid, status in found} == dict.fromkeys(
            expected, "READY"
        )
    # the proof: more hosts had a holder at once than the server had sessions left for
    # them beside the pool and the watch; the lease pool lent no more than its own, and
    # its clients waited their turn
    assert watch.holders >= BARRIER > MAX_CONNECTIONS - POOLED - 1, watch.holders
    assert watch.lease_sessions <= LEASES and watch.waiting > 0, vars(watch)
    assert watch.sessions <= POOLED + LEASES, watch.sessions
