"""A claim of several chunks (a drain's free slots, or its chunks claimed ahead of quick
jobs) looks at them as a batch: their candidates, rows and run locks asked for together.
Each is still its own claim: its own lock, attempt and history row; a chunk of the batch
that cannot be taken is passed over for the next; racing drains never run one twice."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys

import psycopg
import pytest

from dataflow.dataids import natural_key
from dataflow.errors import RunFenced
from dataflow.run.claim import claims, lifecycle, liveness
from dataflow.run.drain import drainclaim, recorder
from dataflow.run.lease import keeper
from dataflow.run.process import locks
from dataflow.run.process.runner import Outcome
from dataflow.store import open_store
from dataflow.store.postgres.connection import stall_ms
from support import (
    ADDRESSES,
    _admin,
    chunk_holder,
    cue,
    on_cue,
    rows,
    script,
    statuses,
    wait_for,
    waiting_for_locks,
)
from support.pgserver import login_role

pytestmark = pytest.mark.both_stores


def _chunks(chain, last: int) -> None:
    """Chunks 4..last of src READY too (the chain has 1..3)."""
    chain.ok(
        "dml",
        f"with recursive n(i) as (select 4 union all select i+1 from n where i < {last}) "
        "insert into datastatus select 'src','fakejob',i,'OUT','READY',now() from n",
    )


def test_a_batch_passes_over_a_chunk_another_process_holds(chain, tmp_path, address):
    """Chunk 2's lock is held by another process (a run of it that lives on this host):
    a claim of three takes 1, 3 and 4, each with its own lock, attempt and history row."""
    _chunks(chain, 6)
    store = open_store(address)
    try:
        holder = chunk_holder(chain, str(store.lockfile), 0, "2")  # until it is killed
        try:
            job = lifecycle.load_job(store, "work")
            result = claims.claim(store, job, command="./work.sh", count=3)
            taken = [result.claim, *result.more]
            assert [c.dataid for c in taken] == ["1", "3", "4"]
            assert len({c.runid for c in taken}) == 3 and {c.attempt for c in taken} == {1}
            assert all(c.lock.fd is not None for c in taken)  # each its own lock, held
            found = statuses(tmp_path, "work")
            assert {d: found[d] for d in "134"} == dict.fromkeys("134", "RUNNING")
            assert "2" not in found  # passed over, still offered: the next claim takes it
            for claim in taken:
                claim.lock.close()
        finally:
            holder.kill()
            holder.wait()
        assert claims.claim(store, job, command="./work.sh").claim.dataid == "2"
    finally:
        store.close()
        keeper.close_all()


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
def test_a_batch_passes_over_a_chunk_whose_turn_another_transaction_holds(chain, address):
    """Another transaction is changing chunk 2 (it holds the chunk's turn, as a trigger
    of datastatus does): a claim of three takes 1, 3 and 4, in natural order; only chunk 2
    is left for a later claim, not the rest of its batch with it."""
    _chunks(chain, 6)
    store = open_store(address)
    try:
        job = lifecycle.load_job(store, "work")
        with psycopg.connect(address) as other:
            buckets = other.execute("select hashtext(d) & 1023 from unnest('{1,2,3,4}'::text[]) d")
            assert len(set(buckets.fetchall())) == 4  # the turn of 2 is no other's
            other.execute("select pg_advisory_xact_lock(1, hashtext('2') & 1023)")
            result = claims.claim(store, job, command="./work.sh", count=3)
            taken = [result.claim, *result.more]
            assert [c.dataid for c in taken] == ["1", "3", "4"]
            for claim in taken:
                claim.lock.close()
        assert claims.claim(store, job, command="./work.sh").claim.dataid == "2"
    finally:
        store.close()
        keeper.close_all()


def test_a_drain_looks_again_before_it_ends_at_a_chunk_held_a_moment_longer(chain, tmp_path):
    """Chunk 2's lock is held, while it is not RUNNING, until a moment after the drain's
    last job ends (as another drain's keeper holds the run lock of a chunk given back
    until it lets go): the drain, idle, looks again a tick later and runs it too."""
    holder = chunk_holder(chain, "", 0.3, "2")  # RunJob's lock file
    try:
        script(tmp_path, "work.sh", 'echo "$dataid" >> ran; [ "$dataid" != 3 ] || touch let-go')
        done = chain.drain("./work.sh")
    finally:
        holder.kill()
        holder.wait()
    assert done.exit_code == 0, done
    assert (tmp_path / "ran").read_text().split() == ["1", "3", "2"], done
    assert statuses(tmp_path, "work") == dict.fromkeys("123", "READY")


def test_a_drain_stopped_while_it_looks_again_claims_nothing_more(chain, tmp_path, address):
    """Every chunk held a moment longer; the drain is stopped (not idle any more) while
    it waits to look again: it claims nothing, though the chunks are free by then."""
    store = open_store(address)
    try:
        holder = chunk_holder(chain, str(store.lockfile), 0.05, "1", "2", "3")
        asked = []

        def idle() -> bool:  # asked first after a claim that passed over the three: their
            asked.append(True)  # locks go a moment later, and the drain is stopped then
            (tmp_path / "let-go").touch()
            return len(asked) == 1

        result = drainclaim.claim_patiently(
            store,
            lifecycle.load_job(store, "work"),
            command="./work.sh",
            recover_dead=False,
            count=1,
            idle=idle,
            failed=lambda *_: None,
        )
        holder.wait(timeout=30)
        assert result.claim is None and sorted(result.passed) == ["1", "2", "3"]
        assert len(asked) >= 2  # asked again after the sleep: stopped, it claims nothing
        assert statuses(tmp_path, "work") == {}
    finally:
        store.close()
        keeper.close_all()


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
def test_a_chunk_whose_last_run_holds_a_fresh_lease_is_not_one_to_look_at_again(
    chain, tmp_path, address
):
    """A chunk resubmitted whose last run holds a fresh lease (a process of it lives on
    another host) is passed over, but not as one given back a moment ago: a drain that
    found nothing else would not wait for it."""
    script(tmp_path, "work.sh", "true")
    assert chain.run_job("./work.sh").exit_code == 0  # chunk 1 READY
    chain.ok("resubmit", "work", "1")
    chain.ok("dml", "update run set seen = now(), lease = 600 where jobid = 'work'")
    store = open_store(address)
    try:
        result = claims.claim(store, lifecycle.load_job(store, "work"), command="./work.sh")
        assert result.claim.dataid == "2" and result.passed == []
        result.claim.lock.close()
    finally:
        store.close()
        keeper.close_all()


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
def test_chunks_whose_last_runs_hold_stale_leases_are_taken_and_the_leases_revoked(
    chain, tmp_path, address
):
    """Chunks resubmitted whose last runs still hold leases, lapsed (their keeper out of
    reach, or gone without letting go): a claim of them all takes each, and revokes the
    stale leases under their rows' lock (in one statement), so that a keeper that comes
    back late finds its lease gone and fences what it kept."""
    script(tmp_path, "work.sh", "true")
    assert chain.drain("./work.sh").exit_code == 0  # chunks 1..3 READY
    for dataid in ("1", "2", "3"):
        chain.ok("resubmit", "work", dataid)
    chain.ok("dml", "update run set seen = now() - interval '1 hour', lease = 1")
    store = open_store(address)
    try:
        result = claims.claim(
            store, lifecycle.load_job(store, "work"), command="./work.sh", count=3
        )
        taken = [result.claim, *result.more]
        assert sorted(c.dataid for c in taken) == ["1", "2", "3"]
        leased = "select count(*) from run where seen is not null and status <> 'RUNNING'"
        assert rows(tmp_path, leased) == [(0,)]
        for claim in taken:
            claim.lock.close()
    finally:
        store.close()
        keeper.close_all()


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
def test_a_reader_judges_a_stale_lease_dead_and_leaves_its_revoking_to_a_claim(
    chain, tmp_path, address
):
    """Chunk 1 RUNNING, its run's lease lapsed (its host died with its holder). The
    commands that only read (status, explain) judge the run dead without revoking the
    lease, and find the next chunk without locking candidates, so that they answer for a
    role that may only read (both failed: permission denied for table candidate); the
    recovery, or the claim, that takes the chunk again revokes the lease."""
    script(tmp_path, "work.sh", "true")
    assert chain.run_job("./work.sh").exit_code == 0  # chunk 1's run
    chain.ok("dml", "update datastatus set status = 'RUNNING' where jobid = 'work'")
    chain.ok("dml", "update run set seen = now() - interval '1 hour', lease = 1")
    with login_role(address, f"reader_{os.getpid()}", "select") as url:
        reader = {"DATAFLOW_DB": url}
        status = json.loads(chain.ok("--json", "status", "work", env=reader).out)
        assert status[0]["running"] == 1 and status[0]["live"] == 0
        assert "a live run" not in chain.ok("explain", "work", "1", env=reader).out
        next_chunk = chain.ok("explain", "work", env=reader).out
        assert next_chunk.startswith("next chunk of work: 2 (2 waiting)")
    leased = "select count(*) from run where seen is not null"
    assert rows(tmp_path, leased) == [(1,)]
    chain.ok("recover")
    assert rows(tmp_path, leased) == [(0,)]


def test_ends_recorded_together_are_each_recorded_as_on_their_own(chain, tmp_path, address):
    """The ends of quick jobs waiting for the recorder are recorded in one transaction:
    each chunk READY or FAILED as its run ended, RESUBMIT if a rerun was asked of it
    meanwhile, its lock let go. When one of them was ended by hand meanwhile, it alone is
    fenced; the others are still recorded."""
    _chunks(chain, 6)
    store = open_store(address)
    try:
        locks.prepare(store.lockfile)
        job = lifecycle.load_job(store, "work")
        result = claims.claim(store, job, command="./work.sh", count=6)
        taken = [result.claim, *result.more]
        assert [c.dataid for c in taken] == ["1", "2", "3", "4", "5", "6"]
        with store.transaction():
            assert store.request_rerun("work", "3", "a test") == 1
        lifecycle.end_chunk(store, "work", "5", "READY", force=True)
        codes = {"2": 3, "6": 1}
        ends = [(c, Outcome(codes.get(c.dataid, 0), 0.1)) for c in taken]
        told = []
        first = recorder.record_together(store, job, ends[:3], lambda *e: told.append(e))
        then = recorder.record_together(store, job, ends[3:], lambda *e: told.append(e))
        found = {e.claim.dataid: (e.kind, e.status) for e in first + then}
        assert found == {
            "1": ("ended", "READY"),
            "2": ("ended", "FAILED"),
            "3": ("ended", "RESUBMIT"),
            "4": ("ended", "READY"),
            "5": ("fenced", str(RunFenced("work", "5", "READY"))),
            "6": ("ended", "FAILED"),
        }
        assert [e.counts for e in first + then if e.kind == "ended"] == [(1, 1)] * 5
        assert all(c.lock.fd is None for c in taken) and told == []
        assert statuses(tmp_path, "work") == {
            "1": "READY", "2": "FAILED", "3": "RESUBMIT", "4": "READY", "5": "READY",
            "6": "FAILED",
        }  # fmt: skip
        runs = {d: (s, r) for d, s, r in rows(tmp_path, "select dataid, status, reason from run")}
        assert runs["3"] == ("READY", "its chunk set to RESUBMIT: a test asked a rerun")
        assert runs["2"] == ("FAILED", "exit code 3") and runs["5"][0] == "FAILED"
        assert runs["5"][1].startswith("ended by hand")
    finally:
        store.close()
        keeper.close_all()


# renews the leases of the runs named in argv over and over (says so after the first time)
# until the file stop appears; an error ends it with a traceback and a non-zero exit
RENEW_UNTIL_STOP = """
import os, sys
from dataflow.store import open_store
from dataflow.store.address import locate
store = open_store(locate())
runids = [int(runid) for runid in sys.argv[1:]]
store.renew_leases(runids)
print("renewing", flush=True)
while not os.path.exists("stop"):
    store.renew_leases(runids)
"""


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
def test_ends_recorded_together_while_their_leases_are_renewed_never_deadlock(
    chain, tmp_path, address
):
    """A drain's keeper renews the leases of its runs while the drain records the ends of
    several of them in one transaction, in the order they ended. Both lock those rows of
    run in the same order (runid): one waits for the other, neither is ended by the
    server as a deadlock."""
    _chunks(chain, 160)
    store = open_store(address)
    try:
        locks.prepare(store.lockfile)
        job = lifecycle.load_job(store, "work")
        told: list = []
        for _ in range(4):
            result = claims.claim(store, job, command="./work.sh", count=40)
            taken = [result.claim, *result.more]
            (tmp_path / "stop").unlink(missing_ok=True)
            renewing = subprocess.Popen(
                [sys.executable, "-c", RENEW_UNTIL_STOP, *(str(c.runid) for c in taken)],
                cwd=tmp_path,
                env=chain.env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            assert renewing.stdout.readline() == "renewing\n"
            ends = [(c, Outcome(0, 0.1)) for c in reversed(taken)]
            found = recorder.record_together(store, job, ends, lambda *e: told.append(e))
            (tmp_path / "stop").touch()
            _, err = renewing.communicate(timeout=60)
            assert renewing.returncode == 0 and told == [], err
            assert [e.status for e in found] == ["READY"] * 40
        assert set(statuses(tmp_path, "work").values()) == {"READY"}
    finally:
        store.close()
        keeper.close_all()


RENEW_ON_CUE = """
import sys
from dataflow.store import open_store
from dataflow.store.address import locate
store = open_store(locate())
print("ready", flush=True)
sys.stdin.readline()
print(sorted(store.renew_leases([int(r) for r in sys.argv[1:]]).items()), flush=True)
"""


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
def test_a_renewal_never_waits_for_a_lease_a_claim_is_revoking(chain, tmp_path, address):
    """A claim transaction revokes stale leases in more than one statement (its
    recovery's, then each batch's), and asks its host's holder for run locks in between.
    A holder renewing two of those leases meanwhile renews the one whose row is free and
    leaves the other, which the claim holds: it never waits for it (the claim may be
    waiting for this very holder's answer; before, they waited for each other until the
    server ended one). The lease the claim revoked is seen revoked at the next renewal."""
    _chunks(chain, 4)
    store = open_store(address)
    try:
        locks.prepare(store.lockfile)
        result = claims.claim(store, lifecycle.load_job(store, "work"), count=2)
        low, high = sorted([result.claim, *result.more], key=lambda c: c.runid)
        chain.ok("dml", "update run set seen = now() - interval '1 hour', lease = 1")
        renewing = on_cue(tmp_path, chain.env, RENEW_ON_CUE, str(low.runid), str(high.runid))
        with store.transaction():
            assert store.live_leases([("work", high.dataid)], revoke=True) == set()
            cue(renewing)
            out, err = renewing.communicate(timeout=60)  # while the claim holds high's row
            assert renewing.returncode == 0, err
            assert out == f"{[(low.runid, True), (high.runid, False)]}\n"
            assert store.live_leases([("work", low.dataid)], revoke=True) == {("work", low.dataid)}
        assert store.renew_leases([low.runid, high.runid]) == {low.runid: True}
        leased = "select runid from run where seen is not null"
        assert rows(tmp_path, leased) == [(low.runid,)]
        for claim in (low, high):
            claim.lock.close()
    finally:
        store.close()
        keeper.close_all()


# what a claim holds while it asks its host's holder for run locks: the row of a run whose
# lease it looks at (to revoke it), or the table's insert lock (its new runs) while a claim
# given back by another thread waits for the table behind it (LOCK TABLE run)
CLAIM_HOLDS = {
    "a row": "select 1 from run where runid = %(runid)s for update",
    "the table": "lock table run in row exclusive mode",
}


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
@pytest.mark.parametrize("held", list(CLAIM_HOLDS))
def test_a_holder_asked_for_a_run_lock_never_waits_for_what_the_claim_holds(
    chain, tmp_path, address, held
):
    """A claim asks its host's lease holder for a chunk's run lock, and waits for the
    answer, while it holds a row of run or the table's insert lock; meanwhile the holder
    lets go of the lease of the chunk's earlier run (it ended, no process of it left).
    The holder does not wait for the row, nor long for the table: it answers, and ends
    the lease once the claim is done. Before, each waited for the other until the server
    ended the claim's session (found by test_resource_limits in CI: a drain's claim
    failed for a moment)."""
    store = open_store(address)
    queued = None
    try:
        locks.prepare(store.lockfile)
        run = claims.claim(store, lifecycle.load_job(store, "work")).claim
        liveness.started(store, "work", run.dataid, run.runid, run.token, 0)
        with psycopg.connect(address) as claiming:  # ended by the server as a claim's is
            claiming.execute(f"set idle_in_transaction_session_timeout = {stall_ms()}")
            claiming.execute(CLAIM_HOLDS[held], {"runid": run.runid})
            if held == "the table":
                queued = on_cue(tmp_path, chain.env, GIVE_BACK)
                cue(queued)
                waiting_for_locks(tmp_path, 1)
            run.lock.close()
            liveness.ended(store, "work", run.dataid, run.runid)  # the holder lets it go
            assert keeper.keeper_for(store).hold([("work", run.dataid)]) == [True]
        if queued is not None:
            assert queued.communicate(timeout=60)[0] == "locked\n"
        seen = "select seen is null from run where runid = %s"
        wait_for(lambda: rows(tmp_path, seen, run.runid) == [(True,)], what="the lease to end")
    finally:
        if queued is not None and queued.poll() is None:
            queued.kill()
        store.close()
        keeper.close_all()


# a claim given back: the table of run locked against inserts (waits for the claims under way)
GIVE_BACK = """
import sys
import psycopg
from dataflow.store.address import locate
with psycopg.connect(locate()) as conn:
    print("ready", flush=True)
    sys.stdin.readline()
    conn.execute("lock table run in share row exclusive mode")
print("locked", flush=True)
"""


@pytest.mark.long  # waits half the liveness bound
@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
def test_a_run_whose_lease_cannot_be_renewed_for_half_the_bound_is_fenced(
    chain, tmp_path, address, monkeypatch
):
    """A renewal that finds a run's row held by another transaction leaves it for the next
    one. Held at every renewal for half the bound, the lease may lapse before it is
    renewed (another host may then take the chunk): the holder fences the run, as it
    fences every run when its heartbeats fail for that long."""
    monkeypatch.setenv("DATAFLOW_LIVENESS_TIMEOUT", "4")
    store = open_store(address)
    job = None
    try:
        locks.prepare(store.lockfile)
        run = claims.claim(store, lifecycle.load_job(store, "work")).claim
        job = subprocess.Popen(
            ["sleep", "600"], env={**os.environ, "DATAFLOW_RUN": run.token}, start_new_session=True
        )
        liveness.started(store, "work", run.dataid, run.runid, run.token, job.pid)
        with psycopg.connect(address) as other:  # a transaction, never ended by the server
            other.execute("select 1 from run where runid = %s for update", (run.runid,))
            assert job.wait(timeout=60) == -signal.SIGKILL
        run.lock.close()
    finally:
        if job is not None and job.poll() is None:
            job.kill()
        store.close()
        keeper.close_all()


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


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
@pytest.mark.slow
def test_keeper_sessions_ended_during_a_drains_batch_claims_cost_it_nothing(chain, tmp_path):
    """The server ends the keeper's session again and again while a drain of quick jobs
    asks it for the run locks of up to twelve chunks at a time: a request it cannot
    answer fails the claim, which is tried again; every chunk runs once and ends READY."""
    import threading
    import time

    from support.hosts import keeper_backends

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
