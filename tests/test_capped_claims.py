"""A claim of a capped job (``max_parallel``) takes the job's turn before it locks any
candidate or tries any chunk's turn: a claim waiting for that turn hides no chunk from
another claim, of this job or of another. A claim whose writes do not all land is undone
whole. (PostgreSQL: claims there lock rows and take turns; SQLite's writers take turns.)"""

from __future__ import annotations

import psycopg
import pytest

from support import cue, on_cue, rows, waiting_for_locks

# claims job work (a dry run with "dry"), printing what it found, once it is told to
CLAIM_ON_CUE = """
import sys
from dataflow.run.claim import claims, lifecycle
from dataflow.run.lease import keeper
from dataflow.store import open_store
from dataflow.store.address import locate
store = open_store(locate())
jobid = sys.argv[3] if len(sys.argv) > 3 else "work"
job = lifecycle.load_job(store, jobid)
claims.prepare(store, jobid)
print("ready", flush=True)
sys.stdin.readline()
found = claims.claim(store, job, dry_run=sys.argv[1] == "dry", count=int(sys.argv[2]))
print(found.claim and found.claim.dataid, found.cap_full, flush=True)
for c in [found.claim, *found.more]:
    if c is not None and sys.argv[1] != "dry":
        claims.release(store, jobid, c)
keeper.close_all()
"""


def _claimer(chain, tmp_path, kind: str, jobid: str = "work"):
    return on_cue(tmp_path, chain.env, CLAIM_ON_CUE, kind, "1", jobid)


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
def test_a_dry_run_waiting_for_the_turn_never_hides_a_chunk_from_a_claim(chain, tmp_path, address):
    """Job work is capped (max_parallel 2, nothing running) and has one candidate left
    (chunk 1; 2 and 3 are READY already). Another claim holds the job's turn (here: a
    session holding it). A dry run (RunJob --dry-run, or a Spark drain's anything_to_do)
    asks, then a real claim; both wait for the turn. Had the dry run locked chunk 1's
    candidate first, the real claim would find none (SKIP LOCKED), and once the turn is
    free and the dry run rolled back, it would claim nothing with room under the cap:
    RunJob would say "no suitable data" with a claimable chunk left."""
    chain.ok("dml", "insert into job (jobid,itemtype,itemvalue) values ('work','max_parallel','2')")
    chain.ok("dml", "insert into datastatus values ('dst','work','2','OUT','READY',now())")
    chain.ok("dml", "insert into datastatus values ('dst','work','3','OUT','READY',now())")
    chain.ok("dml", "delete from candidate where dataid in ('2','3')")
    assert rows(tmp_path, "select dataid from candidate") == [("1",)]
    dry = _claimer(chain, tmp_path, "dry")
    real = _claimer(chain, tmp_path, "real")
    with psycopg.connect(address) as holder:  # another claim, in its turn
        holder.execute("select pg_advisory_xact_lock(2, hashtext('work'))")
        cue(dry)
        waiting_for_locks(tmp_path, 1)
        cue(real)
        waiting_for_locks(tmp_path, 2)
        holder.rollback()
    dry_out, dry_err = dry.communicate(timeout=60)
    out, err = real.communicate(timeout=60)
    assert dry.returncode == 0 and real.returncode == 0, (dry_err, err)
    assert dry_out == "1 False\n"
    assert out == "1 False\n", "the real claim found no suitable data, chunk 1 claimable"


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
def test_a_claim_whose_run_insert_is_swallowed_is_undone(chain, tmp_path, address):
    """A hostile trigger on run (written with `utility ddl`) swallows the history row of
    chunk 1. The claim's runids are read inside its transaction: the missing one fails
    it, and it is rolled back whole (nothing RUNNING, no history row, no lock held); were
    they read after its COMMIT, chunk 1 would be left RUNNING with no history row."""
    from dataflow.run.claim import claims, lifecycle
    from dataflow.run.lease import keeper
    from dataflow.run.process import locks
    from dataflow.store import open_store

    with psycopg.connect(address) as conn:
        conn.execute(
            "create function swallow() returns trigger language plpgsql as $$ begin "
            "if new.dataid = '1' then return null; end if; return new; end $$"
        )
        conn.execute(
            "create trigger swallow before insert on run for each row execute function swallow()"
        )
    store = open_store(address)
    try:
        locks.prepare(store.lockfile)
        with pytest.raises(Exception) as failed:
            claims.claim(store, lifecycle.load_job(store, "work"), count=2)
        print(repr(failed.value))
        running = rows(tmp_path, "select dataid from datastatus where status = 'RUNNING'")
        history = rows(tmp_path, "select dataid from run")
        assert running == [] and history == [], (running, history)
        assert not locks.is_held(store.lockfile, "work", "1")
    finally:
        store.close()
        keeper.close_all()


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
def test_a_claim_waiting_for_its_turn_never_hides_a_chunk_of_another_job(chain, tmp_path, address):
    """Jobs work (capped: max_parallel 2) and other (no cap) both read src; chunk 1 is
    the only candidate of each. A claim of work waits for its job's turn (another claim
    of work holds it). Had it locked chunk 1's candidate and tried its turn first, a
    claim of other, meanwhile, would find chunk 1's turn taken and pass it over:
    RunJob of other would say "no suitable data" though chunk 1 is claimable."""
    chain.ok("dml", "insert into job (jobid,itemtype,itemvalue) values ('work','max_parallel','2')")
    chain.ok("dml", "insert into dataset (datasetid) values ('dst2')")
    chain.ok(
        "dml",
        "insert into job (jobid,itemtype,datasetid) values ('other','IN','src'), ('other','OUT','dst2')",
    )
    chain.ok("dml", "update datastatus set modified = now() where datasetid = 'src'")
    chain.ok("dml", "delete from candidate where dataid in ('2','3')")
    assert rows(tmp_path, "select jobid, dataid from candidate order by 1") == [
        ("other", "1"),
        ("work", "1"),
    ]
    work = _claimer(chain, tmp_path, "real", "work")
    other = _claimer(chain, tmp_path, "real", "other")
    with psycopg.connect(address) as holder:  # another claim of work, in its turn
        holder.execute("select pg_advisory_xact_lock(2, hashtext('work'))")
        cue(work)
        waiting_for_locks(tmp_path, 1)
        cue(other)
        out, err = other.communicate(timeout=60)
        holder.rollback()
    work_out, work_err = work.communicate(timeout=60)
    assert work.returncode == 0 and other.returncode == 0, (work_err, err)
    assert work_out == "1 False\n"
    assert out == "1 False\n", "the claim of other found no suitable data, chunk 1 claimable"
