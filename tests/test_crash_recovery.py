"""Crashes, signals, timeouts, retries and the max_parallel cap, with real processes, on
both stores; what is about SQLite's file and its folder (network file systems, lock
file names) on SQLite only."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from dataflow.errors import NetworkFilesystem
from dataflow.run.drain.drain import MANY_AHEAD
from dataflow.run.process.locks import safe_name
from dataflow.store import now
from dataflow.store.sqlite.filesystems import mount_type, require_local
from support import (
    BIN,
    chunk_holder,
    dump,
    history,
    in_rows,
    process_state,
    rows,
    run_is_live,
    script,
    setting,
    start_runjob,
    statuses,
    wait_for,
    written,
)
from support.hosts import alive


@pytest.mark.both_stores
def test_a_runjob_recovers_the_dead_runs_of_its_own_job_only(chain, tmp_path):
    """Job other (src -> dst2) left chunk 2 RUNNING, its run dead. RunJob of work recovers
    work's dead runs only: it never says other's chunk was work's, nor alerts so; other's
    own next run recovers it, in its own words."""
    chain.ok("dml", "insert into dataset (datasetid) values ('dst2')")
    chain.ok(
        "dml",
        "insert into job (jobid,itemtype,datasetid) values ('other','IN','src'), ('other','OUT','dst2')",
    )
    chain.ok("dml", "insert into datastatus values ('dst2','other','2','OUT','RUNNING',now())")
    for name in ("work", "other"):
        script(tmp_path, f"{name}.sh", "true")
    ran = chain.runjob("./work.sh")
    assert ran.code == 0 and "abandoned" not in ran.out, ran
    assert statuses(tmp_path, "other") == {"2": "RUNNING"}
    other = chain.runjob("./other.sh")
    assert "chunk 2 of other belonged to a dead run; marked FAILED (abandoned)" in other.out
    assert statuses(tmp_path, "other")["2"] == "FAILED"


@pytest.mark.both_stores
def test_kill_9_of_runjob_and_job_is_recovered(chain, tmp_path):
    script(tmp_path, "work.sh", 'echo "$dataid" >> starts; echo "$$" > job.pid; sleep 60')
    runjob = start_runjob(chain, "./work.sh", start_new_session=True)
    wait_for(lambda: written(tmp_path / "job.pid"), what="the job to start")
    job_pid = int((tmp_path / "job.pid").read_text())
    os.kill(runjob.pid, signal.SIGKILL)  # RunJob, then the job's whole group: a power cut
    runjob.wait()  # (the other way round, RunJob may record the job's death first)
    os.killpg(job_pid, signal.SIGKILL)
    assert statuses(tmp_path, "work")["1"] == "RUNNING"
    # SIGKILL is delivered asynchronously: wait until every process of the run is gone
    # (on PostgreSQL: its keeper too, which then lets the run lock go).
    wait_for(lambda: not run_is_live(tmp_path, "work", "1"), what="the killed processes to exit")

    script(tmp_path, "work.sh", 'echo "$dataid" >> starts')
    ran = chain.runjob("./work.sh")
    assert ran.code == 0, ran
    assert "chunk 1 of work belonged to a dead run; marked FAILED (abandoned)" in ran.out
    assert "Launching ./work.sh with dataid 2" in ran.out  # 1 stays FAILED (retries 0)
    assert statuses(tmp_path, "work") == {"1": "FAILED", "2": "READY"}
    assert in_rows(tmp_path, "work") == []
    assert history(tmp_path, "work")[0][:3] == ("1", 1, "FAILED")
    assert history(tmp_path, "work")[0][5] == "abandoned"

    chain.ok("endjob", "work", "1", "RESUBMIT")
    assert "Launching ./work.sh with dataid 1" in chain.runjob("./work.sh").out
    assert (tmp_path / "starts").read_text().split() == ["1", "2", "1"]
    assert [h[:3] for h in history(tmp_path, "work")][-1] == ("1", 2, "READY")


@pytest.mark.both_stores
@pytest.mark.long
def test_kill_9_of_runjob_alone_never_starts_the_chunk_twice(chain, tmp_path):
    script(
        tmp_path,
        "work.sh",
        'echo "$dataid" >> starts; [ "$dataid" = 1 ] || exit 0; '
        "touch started; while [ ! -e release ]; do sleep 0.05; done; touch finished",
    )
    runjob = start_runjob(chain, "./work.sh")
    wait_for(lambda: (tmp_path / "started").exists(), what="the job to start")
    os.kill(runjob.pid, signal.SIGKILL)  # the job lives on, orphaned, holding the chunk lock
    runjob.wait()

    again = chain.runjob("./work.sh")  # the chunk is still RUNNING and alive: not recovered
    assert "dead run" not in again.out
    assert statuses(tmp_path, "work")["1"] == "RUNNING"
    assert chain.ok("recover").out.endswith("0 abandoned chunks recovered\n")
    refused = chain.utility("endjob", "work", "1", "RESUBMIT")  # not while a run lives
    assert refused.code != 0 and f"its RunJob (pid {runjob.pid}) has ended" in refused.err
    chain.ok("endjob", "work", "1", "RESUBMIT", "--force")  # an operator insists: still not
    for _ in range(3):
        ran = chain.runjob("./work.sh")
        assert "with dataid 1" not in ran.out
    assert (tmp_path / "starts").read_text().split().count("1") == 1

    (tmp_path / "release").touch()
    wait_for(lambda: (tmp_path / "finished").exists(), what="the orphan to end")
    wait_for(lambda: "with dataid 1" in chain.runjob("./work.sh").out, what="the rerun of chunk 1")
    assert (tmp_path / "starts").read_text().split().count("1") == 2


@pytest.mark.parametrize("output", [None, "RESUBMIT"], ids=["never produced", "resubmitted"])
def test_a_chunk_its_job_holds_an_in_row_of_is_not_claimed(chain, tmp_path, output):
    """SPEC: a job claims a chunk only while it holds no IN row for it (a run of it is
    consuming the chunk). One written by any client, at a chunk never produced or
    resubmitted: the chunk is passed over, explain says why, the others run."""
    if output:
        chain.ok("dml", f"insert into datastatus values ('dst','work','2','OUT','{output}',now())")
    chain.ok("dml", "insert into datastatus values ('src','work','2','IN','RUNNING',now())")
    script(tmp_path, "work.sh", 'echo "$dataid" >> ran')
    assert chain.runjob("--all", "./work.sh").code == 0
    assert sorted((tmp_path / "ran").read_text().split()) == ["1", "3"]
    assert "2" not in statuses(tmp_path, "work") or statuses(tmp_path, "work")["2"] == output
    explained = chain.ok("explain", "work", "2").out
    assert "will not run: a run of work is consuming its inputs (its IN rows)" in explained


def test_a_run_ended_by_hand_while_it_ran_has_its_result_refused_in_one_line(chain, tmp_path):
    """``endjob --force`` while the run lives: its result comes too late and is not
    recorded. RunJob says so in one line naming the job, the chunk and the result, and
    exits 1; the chunk keeps the operator's status and the history row the operator's
    end."""
    script(tmp_path, "work.sh", "touch started; while [ ! -e release ]; do sleep 0.05; done")
    runjob = start_runjob(chain, "./work.sh")
    wait_for(lambda: (tmp_path / "started").exists(), what="the job to start")
    chain.ok("endjob", "work", "1", "RESUBMIT", "--force")
    (tmp_path / "release").touch()
    out, err = runjob.communicate(timeout=60)
    assert runjob.returncode == 1, (out, err)
    assert err.splitlines() == [
        "warning: the run of work at 1 was ended elsewhere while it ran (recovered as abandoned,"
        " or ended by hand); its result READY is not recorded"
    ], err
    assert statuses(tmp_path, "work")["1"] == "RESUBMIT"
    assert rows(tmp_path, "select status, reason from run") == [
        ("FAILED", "ended by hand (RESUBMIT)")
    ]


@pytest.mark.both_stores
def test_sigterm_reaches_the_job_group_and_fails_the_chunk(chain, tmp_path):
    script(
        tmp_path,
        "work.sh",
        "trap 'echo got TERM >> trapped; exit 3' TERM; sleep 30 & echo $! > child.pid; wait",
    )
    runjob = start_runjob(chain, "./work.sh")
    wait_for(lambda: written(tmp_path / "child.pid"), what="the job's child")
    child = int((tmp_path / "child.pid").read_text())
    runjob.send_signal(signal.SIGTERM)
    out, err = runjob.communicate(timeout=30)
    assert runjob.returncode == 128 + signal.SIGTERM, (out, err)
    assert "Job ./work.sh has failed. Updating status" in out
    assert (
        out.splitlines()[-1]
        == "1 rows updated to FAILED for work and 1 1 IN file-local locks released"
    )
    assert (tmp_path / "trapped").read_text() == "got TERM\n"
    assert history(tmp_path, "work")[-1][2:] == ("FAILED", 3, "SIGTERM", "interrupted by SIGTERM")
    wait_for(lambda: not alive(child), what="the job's child to die of the signal too")


@pytest.mark.both_stores
def test_timeout_kills_the_job_and_fails_the_chunk(chain, tmp_path):
    setting(chain, "timeout", "0.5")
    script(tmp_path, "work.sh", "sleep 30")
    ran = chain.runjob("./work.sh")
    assert ran.code == 124
    assert statuses(tmp_path, "work")["1"] == "FAILED"
    assert history(tmp_path, "work")[-1][5] == "timeout after 0.5 s"


@pytest.mark.both_stores
def test_retries_then_stays_failed_until_resubmitted(chain, tmp_path):
    setting(chain, "retries", "2")
    script(tmp_path, "work.sh", '[ "$dataid" != 1 ] || { echo "$dataid" >> tries; exit 5; }')
    ran = chain(str(BIN / "RunJob"), "--all", "./work.sh")
    assert ran.code == 1  # a drain with a failure says so
    assert (tmp_path / "tries").read_text().split() == ["1", "1", "1"]  # 1 + 2 retries
    assert [h[:4] for h in history(tmp_path, "work") if h[0] == "1"] == [
        ("1", 1, "FAILED", 5),
        ("1", 2, "FAILED", 5),
        ("1", 3, "FAILED", 5),
    ]
    assert "no suitable data" in chain.runjob("./work.sh").out
    chain.ok("endjob", "work", "1", "RESUBMIT")
    chain.runjob("--all", "./work.sh")
    assert (tmp_path / "tries").read_text().split() == ["1"] * 6  # a fresh series of 3
    chain.ok("deleterun", "work", "1")  # the chunk forgotten (its runs kept): new again
    chain.runjob("--all", "./work.sh")
    assert (tmp_path / "tries").read_text().split() == ["1"] * 9
    counts = rows(tmp_path, "select attempt, retry from run where dataid = '1' order by attempt")
    assert counts == [(a, (a - 1) % 3) for a in range(1, 10)]  # each series counts from 0


@pytest.mark.both_stores
def test_log_file_masks_passwords(chain, tmp_path):
    token = chain.ok("crypt", "-e", "Pa$$w0rd", env={"PASSKEY": "k"}).out.strip()
    chain.ok("dml", f"update dataset set encryptedpass='{token}' where datasetid='src'")
    script(
        tmp_path,
        "work.sh",
        'echo "connecting with $src_password"; printf "%s" "$src_password" >&2; echo " done" >&2',
    )
    ran = chain.runjob("./work.sh", env={"PASSKEY": "k"})
    assert ran.code == 0
    log = chain.ok("log", "work", "1").out
    assert log.splitlines() == ["connecting with ***", "*** done"] or set(log.splitlines()) == {
        "connecting with ***",
        "*** done",
    }
    assert "Pa$$w0rd" not in ran.out + ran.err + log
    logpath = history_log(tmp_path)
    assert Path(logpath).read_bytes().count(b"***") == 2


def history_log(tmp_path):
    return rows(tmp_path, "select logpath from run order by runid desc limit 1")[0][0]


@pytest.mark.both_stores
def test_dry_run_changes_nothing(chain, tmp_path):
    token = chain.ok("crypt", "-e", "hunter2", env={"PASSKEY": "k"}).out.strip()
    chain.ok(
        "dml", f"update dataset set encryptedpass='{token}', hostname='h' where datasetid='src'"
    )
    script(tmp_path, "work.sh", "touch ran")
    before = rows(tmp_path, "select * from datastatus order by 1, 2, 3")
    dry = chain.runjob("--dry-run", "./work.sh", env={"PASSKEY": "k"})
    assert dry.code == 0, dry
    assert dry.lines[0].startswith("would claim dataid 1 for work and run:")
    assert "src_password='***'" in dry.lines and "src_hostname=h" in dry.lines
    assert "hunter2" not in dry.out
    assert rows(tmp_path, "select * from datastatus order by 1, 2, 3") == before
    assert rows(tmp_path, "select count(*) from run") == [(0,)]
    assert not (tmp_path / "ran").exists()


def test_a_spark_drains_look_ahead_claims_nothing(chain, tmp_path):
    """``claims.anything_to_do``, which a Spark drain asks before it starts a driver: a
    chunk to claim is something to do, no chunk nothing; either way it writes nothing (a
    dry run: rolled back, no lock taken)."""
    state = "select * from datastatus union all select jobid, dataid, 0, 0, 0, 0 from candidate"
    before = rows(tmp_path, state)
    assert _anything_to_do(tmp_path) is True
    assert rows(tmp_path, state) == before
    assert rows(tmp_path, "select count(*) from run") == [(0,)]
    produced = ", ".join(f"('dst','work','{d}','OUT','READY',now())" for d in "123")
    chain.ok("dml", f"insert into datastatus values {produced}")  # nothing left
    assert _anything_to_do(tmp_path) is False


def _anything_to_do(tmp_path) -> bool:
    """``claims.anything_to_do`` of job work, on the SQLite store in ``tmp_path``."""
    from dataflow.run.claim import claims, lifecycle
    from dataflow.store import open_store

    store = open_store(tmp_path / "dataflow.db")
    try:
        return claims.anything_to_do(store, lifecycle.load_job(store, "work"))
    finally:
        store.close()


def test_a_spark_drains_look_ahead_counts_a_dead_runs_chunk_it_would_retry(chain, tmp_path):
    """Chunks 1 and 3 of work are done; chunk 2 says RUNNING, its run dead, a retry left.
    ``claims.anything_to_do`` recovers it as the drain's claim would (rolled back): there
    is something to do, and a Spark drain starts its driver for it."""
    done = ", ".join(f"('dst','work','{d}','OUT','READY',now())" for d in "13")
    chain.ok(
        "dml", f"insert into datastatus values {done}, ('dst','work','2','OUT','RUNNING',now())"
    )
    setting(chain, "retries", "1")
    before = dump(tmp_path)
    assert _anything_to_do(tmp_path) is True
    assert dump(tmp_path) == before


def test_a_dry_run_passes_over_a_chunk_another_process_holds(chain, tmp_path):
    """Chunk 1's lock is held by another process (a run of it that lives on this host,
    its rows not written yet, or deleted by hand): ``--dry-run`` names chunk 2, the one a
    claim would take, as a claim passes chunk 1 over (SQLite: the lock is the whole of a
    run's liveness there)."""
    script(tmp_path, "work.sh", "touch ran")
    holder = chunk_holder(chain, "", 0, "1")  # until it is killed
    try:
        dry = chain.runjob("--dry-run", "./work.sh")
    finally:
        holder.kill()
        holder.wait()
    assert dry.code == 0, dry
    assert dry.lines[0].startswith("would claim dataid 2 for work and run:"), dry
    assert rows(tmp_path, "select count(*) from run") == [(0,)]


@pytest.mark.both_stores
@pytest.mark.parametrize("dataid", ["../x", "with space", "ünï/cödé", ".", ""])
def test_any_dataid_gets_a_safe_lock_and_log(chain, tmp_path, dataid, store_kind):
    chain.ok(
        "dml", f"insert into datastatus values ('src','fakejob','{dataid}','OUT','READY',now())"
    )
    chain.ok("dml", "delete from datastatus where dataid in ('1','2','3')")
    script(tmp_path, "work.sh", 'printf "%s" "$dataid" > seen')
    assert chain.runjob("./work.sh").code == 0
    assert (tmp_path / "seen").read_text() == dataid
    # a shared store's logs and locks are this host's, in $DATAFLOW_STATE
    files = tmp_path / ("state" if store_kind == "postgres" else "dataflow.db.d")
    assert any(files.rglob("*.log"))
    for path in files.rglob("*"):
        assert files in path.resolve().parents
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
def test_a_host_whose_state_folder_is_not_made_yet_makes_it_with_its_parents(chain, tmp_path):
    """A fresh host's state folder (``~/.local/state/dataflow``, whose ``~/.local/state``
    is often not there yet) is made with its parents. A drain spread over workers makes
    its lock file before any of the workers' lease holders has made the folder."""
    state = tmp_path / "fresh" / "state"
    chain.env["DATAFLOW_STATE"] = str(state)
    script(tmp_path, "work.sh", "touch ran-$dataid")
    drain = chain.runjob("--all", "--parallel", "2", "--workers", "2", "./work.sh")
    assert drain.code == 0, drain
    assert sorted(path.name for path in tmp_path.glob("ran-*")) == ["ran-1", "ran-2", "ran-3"]
    assert list(state.glob("*-locks"))


HOME_PARTS = st.sampled_from(["/", "//", "/./", "/../", "home", "u", ".", "..", "é", " "])


@given(home=st.lists(HOME_PARTS, max_size=8).map("".join))
@example(home="/home//u")  # a passwd entry made with a base folder ending in "/"
@example(home="/home/./u/")
def test_a_shared_stores_state_folder_under_any_home_is_named_as_pathlib_names_it(home):
    """Without $DATAFLOW_STATE a shared store's logs and locks are in
    ``~/.local/state/dataflow``: named (``utility where``, a run's log path, an alert's)
    as ``Path.home()`` joined it, whatever ``//`` or ``.`` parts $HOME has."""
    from dataflow.store.postgres.store import PostgresStore

    url = "postgresql://u@db.example:5433/etl"
    saved = {name: os.environ.get(name) for name in ("HOME", "DATAFLOW_STATE")}
    os.environ.pop("DATAFLOW_STATE", None)
    os.environ["HOME"] = home
    try:
        expected = str(Path.home() / ".local" / "state" / "dataflow" / "db.example-5433-etl")
        assert PostgresStore.local_name(url) == expected
        assert PostgresStore.files_of(url) == expected + ".d"
        assert PostgresStore.lockfile_of(url) == expected + "-locks"
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


PATH_PARTS = st.sampled_from(
    ["/", "//", "///", ".", "..", "~", "~root", "~no-such-user", "a", "job.sh", ".x", "é", "\udcff"]
)


@given(path=st.lists(PATH_PARTS, max_size=8).map("".join))
def test_a_stores_address_and_a_scripts_jobid_are_named_as_pathlib_names_them(path):
    """A store's address as a run names it (``locate``, ``for_job``: a job's DATAFLOW_DB)
    is the string of ``Path(path).expanduser().absolute()`` (pathlib is not imported by a
    run), and a script's jobid is its ``Path(script).name`` less its extension."""
    from dataflow.run.process.scripts import job_name
    from dataflow.store.address import absolute

    try:
        expected = str(Path(path).expanduser().absolute())
    except RuntimeError:  # "~no-such-user": pathlib gives up, the run takes the name as is
        expected = None
    if expected is not None:
        assert absolute(path) == expected
    name = Path(path).name
    stem, dot, _ = name.rpartition(".")
    assert job_name(path) == (stem if dot and stem else name)


@given(st.text(max_size=300))
@example("x" * 201)  # a long name (a long dataid): a prefix and a hash; rarely drawn
@example("é" * 40)  # 80 bytes, 240 characters escaped
def test_safe_names_are_one_to_one_and_safe(text):
    name = safe_name(text)
    assert "/" not in name and name not in (".", "..", "") and len(name.encode()) <= 255
    other = text + "x"
    assert safe_name(other) != name


def test_network_file_systems_are_refused(tmp_path):
    require_local(tmp_path)  # this machine's tmp is local
    real = Path("/proc/self/mountinfo").read_text()
    table = tmp_path / "mountinfo"
    table.write_text(real + f"999 1 0:99 / {tmp_path}/nfs rw - nfs4 server:/export rw\n")
    (tmp_path / "nfs").mkdir()
    assert mount_type(tmp_path / "nfs" / "deep", str(table)) == "nfs4"
    with pytest.raises(
        NetworkFilesystem, match="nfs4 file system: the store and its locks need a local disk"
    ):
        require_local(tmp_path / "nfs", str(table))
    require_local(tmp_path, str(table))


def _chunks_up_to(chain, last: int) -> None:
    """Chunks 4..last of src READY too (the chain has 1..3)."""
    chain.ok(
        "dml",
        f"with recursive n(i) as (select 4 union all select i+1 from n where i < {last}) "
        "insert into datastatus select 'src','fakejob',i,'OUT','READY',now() from n",
    )


def _counting_live_runs(chain, tmp_path, last: int, cap: int, work: str) -> None:
    """Chunks up to ``last``, max_parallel ``cap``, and a job that appends its dataid and
    the number of live jobs to ``seen`` as it starts, then does ``work``."""
    _chunks_up_to(chain, last)
    setting(chain, "max_parallel", str(cap))
    (tmp_path / "live").mkdir()
    script(
        tmp_path,
        "work.sh",
        f'touch "live/$dataid"; echo "$dataid $(ls live | wc -l)" >> seen; {work}; '
        'rm "live/$dataid"',
    )


@pytest.mark.both_stores
@pytest.mark.long  # 60 jobs; they wait for the change of cap, however slow
def test_cap_lowered_and_raised_during_a_drain(chain, tmp_path):
    """Each job records how many runs are live when it starts: never above the cap in
    force when it was claimed (the claim time is the run's ``started``). Jobs wait while
    the cap is being changed, so the drain cannot end before the change, however slow
    the ``utility`` that makes it; and the cap is changed once as many jobs as it allows
    wait, so that no claim is under way across the change (a claim reads the cap before
    it records its ``started``: one that began before the change would be judged by the
    new cap)."""
    _counting_live_runs(
        chain,
        tmp_path,
        60,
        2,
        "sleep 0.2; for p in raise lower; do"
        ' while [ -e "$p" ]; do touch "paused/$p.$dataid"; sleep 0.05; done; done',
    )
    (tmp_path / "paused").mkdir()
    waiting = lambda p, n: lambda: len(list((tmp_path / "paused").glob(f"{p}.*"))) == n  # noqa: E731
    drain = start_runjob(chain, "--parallel", "4", "./work.sh")
    done = lambda n: lambda: len(rows(tmp_path, "select 1 from run where status='READY'")) >= n  # noqa: E731
    pause = tmp_path / "raise"
    wait_for(done(8), what="8 chunks under cap 2")
    pause.touch()
    wait_for(waiting("raise", 2), what="2 jobs waiting under cap 2")
    before_raise = now()
    setting(chain, "max_parallel", "4")
    after_raise = now()
    pause.unlink()
    wait_for(done(20), what="12 more chunks under cap 4")
    pause = tmp_path / "lower"
    pause.touch()
    wait_for(waiting("lower", 4), what="4 jobs waiting under cap 4")
    before_lower = now()
    setting(chain, "max_parallel", "1")
    after_lower = now()
    pause.unlink()
    out, err = drain.communicate(timeout=300)
    assert drain.returncode == 0, (out, err)
    live = dict(line.split() for line in (tmp_path / "seen").read_text().splitlines())
    claimed = dict(rows(tmp_path, "select dataid, started from run"))
    assert len(live) == len(claimed) == 60
    cap = [
        (
            2
            if at < before_raise
            else 4
            if after_raise < at < before_lower
            else 1
            if at > after_lower
            else 4
        )
        for at in (claimed[d] for d in live)
    ]
    seen = [int(n) for n in live.values()]
    assert all(n <= c for n, c in zip(seen, cap, strict=True)), list(
        zip(live, seen, cap, strict=True)
    )
    assert any(n > 2 for n, c in zip(seen, cap, strict=True) if c == 4)  # raising took effect
    assert sum(c == 1 for c in cap) > 5  # and so did lowering, for many chunks


@pytest.mark.both_stores
def test_ctrl_c_in_a_drain_leaves_nothing_stuck(chain, tmp_path):
    script(tmp_path, "work.sh", 'touch "started.$dataid"; sleep 30')
    drain = start_runjob(chain, "--parallel", "2", "./work.sh")
    wait_for(lambda: len(list(tmp_path.glob("started.*"))) == 2, what="two runs")
    drain.send_signal(signal.SIGINT)
    out, err = drain.communicate(timeout=30)
    assert drain.returncode == 130, (out, err)
    assert "Traceback" not in err
    assert sorted(statuses(tmp_path, "work").values()) == ["FAILED", "FAILED"]
    assert in_rows(tmp_path, "work") == []
    assert [h[4] for h in history(tmp_path, "work")] == ["SIGINT", "SIGINT"]
    assert not (tmp_path / "started.3").exists()  # stopped claiming


def _ahead_chain(chain, tmp_path):
    """Chunks 1..10; each job quick but chunk 5's, which waits: the drain, whose jobs are
    short, claims chunk 6 ahead while 5 runs."""
    _chunks_up_to(chain, 10)
    script(
        tmp_path,
        "work.sh",
        'echo "$dataid" >> ran; [ "$dataid" != 5 ] || { echo $$ > job.pid; sleep 60; }',
    )
    drain = start_runjob(chain, "--all", "./work.sh", start_new_session=True)
    wait_for(lambda: written(tmp_path / "job.pid"), what="chunk 5 to start")
    claimed = "select 1 from run where dataid = '6'"
    wait_for(lambda: rows(tmp_path, claimed), what="chunk 6 to be claimed ahead")
    return drain


@pytest.mark.both_stores
def test_a_chunk_claimed_ahead_is_given_back_when_the_drain_is_stopped(chain, tmp_path):
    drain = _ahead_chain(chain, tmp_path)
    running = {d for d, s in statuses(tmp_path, "work").items() if s == "RUNNING"}
    # claimed, never started (the ends of quick jobs are recorded together, a moment late)
    ahead = running - set((tmp_path / "ran").read_text().split())
    # jobs that end within 0.1 s: four chunks claimed ahead for the one slot, no more
    assert "6" in ahead and len(ahead) <= MANY_AHEAD
    drain.send_signal(signal.SIGTERM)
    out, err = drain.communicate(timeout=60)
    assert drain.returncode == 143, (out, err)
    found = statuses(tmp_path, "work")
    assert [found[d] for d in "12345"] == ["READY"] * 4 + ["FAILED"]
    assert set(found) == set("12345")  # as they were: never started, no attempt used
    assert sorted(int(d) for (d,) in rows(tmp_path, "select dataid from run")) == [1, 2, 3, 4, 5]
    assert (tmp_path / "ran").read_text().split() == ["1", "2", "3", "4", "5"]
    ran = chain.runjob("./work.sh")
    assert "Launching ./work.sh with dataid 6" in ran.out, ran
    assert [h[:3] for h in history(tmp_path, "work") if h[0] == "6"] == [("6", 1, "READY")]


@pytest.mark.both_stores
def test_a_chunk_claimed_ahead_and_ended_by_hand_keeps_the_operators_end(chain, tmp_path):
    """``endjob --force`` of a chunk a drain claimed ahead (RUNNING, never started), then
    the drain is stopped: its give-back finds the chunk's last run is still its claim (its
    number and token) but no longer RUNNING, and leaves it as the operator ended it: the
    status, and the history row with its reason (not undone as if never claimed)."""
    drain = _ahead_chain(chain, tmp_path)
    chain.ok("endjob", "work", "6", "RESUBMIT", "--force")
    drain.send_signal(signal.SIGTERM)
    out, err = drain.communicate(timeout=60)
    assert drain.returncode == 143, (out, err)
    assert statuses(tmp_path, "work")["6"] == "RESUBMIT"
    assert rows(tmp_path, "select status, reason from run where dataid = '6'") == [
        ("FAILED", "ended by hand (RESUBMIT)")
    ]
    assert "6" not in (tmp_path / "ran").read_text().split()  # it never started


@pytest.mark.both_stores
def test_a_chunk_claimed_ahead_starts_on_its_claim(chain, tmp_path):
    """The chunks a drain claimed ahead while chunk 5 ran start on those claims (their
    tokens) when its slot frees, one run each; they are not given back and claimed again.
    A chunk lock does not lapse; a lease lapses after half the bound (20 s here, and the
    slot frees at once), and its claim is then given back (``test_hosts``)."""
    _chunks_up_to(chain, 10)
    script(
        tmp_path,
        "work.sh",
        'echo "$dataid" >> ran; [ "$dataid" != 5 ] || until [ -e go ]; do sleep 0.05; done',
    )
    drain = start_runjob(chain, "--all", "./work.sh")
    wait_for(lambda: rows(tmp_path, "select 1 from run where dataid = '6'"), what="chunk 6")
    claimed = rows(tmp_path, "select dataid, token from run where status = 'RUNNING'")
    ahead = {(dataid, token) for dataid, token in claimed if int(dataid) > 5}
    assert "6" in dict(ahead), claimed
    (tmp_path / "go").touch()
    assert drain.wait(timeout=60) == 0
    ran = set(rows(tmp_path, "select dataid, token from run where status = 'READY'"))
    assert ahead <= ran, (ahead, ran)
    assert sorted((tmp_path / "ran").read_text().split(), key=int) == [str(d) for d in range(1, 11)]


@pytest.mark.both_stores
@pytest.mark.slow
def test_a_chunk_claimed_ahead_by_a_killed_drain_is_recovered_and_never_runs_twice(chain, tmp_path):
    drain = _ahead_chain(chain, tmp_path)
    os.kill(drain.pid, signal.SIGKILL)  # RunJob alone: chunk 5's job lives on
    drain.wait()
    # chunk 6 never started: it is dead, and recovered (within the liveness bound on a
    # shared store, whose lease its keeper let go of); chunk 5 lives and is left alone

    def recovered() -> bool:
        chain.ok("recover")
        return statuses(tmp_path, "work")["6"] == "FAILED"

    wait_for(recovered, timeout=60, what="chunk 6 to be recovered")
    assert statuses(tmp_path, "work")["5"] == "RUNNING"
    assert [h[5] for h in history(tmp_path, "work") if h[0] == "6"] == ["abandoned"]
    chain.ok("endjob", "work", "6", "RESUBMIT")
    chain.runjob("--all", "./work.sh")
    found = statuses(tmp_path, "work")
    assert found["5"] == "RUNNING" and found["6"] == "READY" and found["10"] == "READY"
    assert sorted((tmp_path / "ran").read_text().split(), key=int) == [str(d) for d in range(1, 11)]
    os.killpg(int((tmp_path / "job.pid").read_text()), signal.SIGKILL)


@pytest.mark.both_stores
@pytest.mark.parametrize(  # a spread drain and a folder drain start many processes: long
    "how",
    [
        "one",
        "drain",
        pytest.param("workers", marks=pytest.mark.long),
        pytest.param("folder", marks=pytest.mark.long),
    ],
)
def test_ctrl_z_stops_the_jobs_with_runjob_and_fg_lets_them_go_on(chain, tmp_path, how):
    """A terminal's ^Z (SIGTSTP to RunJob's process group) stopped RunJob alone: its jobs,
    in groups of their own, went on without it. They now stop with it (through its
    workers, or a folder's RunJob), and go on with it when it is continued."""
    (tmp_path / "jobs").mkdir()
    body = (
        'echo $$ > "p.$dataid"; mv "p.$dataid" "pid.$dataid"\nuntil [ -e go ]; do sleep 0.1; done'
    )
    script(tmp_path / ("jobs" if how == "folder" else "."), "work.sh", body)
    argv, jobs = {
        "one": (["./work.sh"], 1),
        "drain": (["--all", "--parallel", "2", "./work.sh"], 2),
        "workers": (["--all", "--parallel", "2", "--workers", "2", "./work.sh"], 2),
        "folder": (["--all", "jobs"], 1),
    }[how]
    runjob = start_runjob(chain, *argv, process_group=0)
    wait_for(lambda: len(list(tmp_path.glob("pid.*"))) == jobs, what="the jobs to start")
    pids = [int(path.read_text()) for path in tmp_path.glob("pid.*")]
    os.killpg(runjob.pid, signal.SIGTSTP)  # what a terminal's ^Z does
    wait_for(
        lambda: all(process_state(pid) == "T" for pid in [runjob.pid, *pids]), what="all stopped"
    )
    os.killpg(runjob.pid, signal.SIGCONT)  # fg
    wait_for(
        lambda: all(process_state(pid) not in ("T", "") for pid in pids), what="the jobs to go on"
    )
    (tmp_path / "go").touch()
    out, err = runjob.communicate(timeout=60)
    assert runjob.returncode == 0, (out, err)
    assert set(statuses(tmp_path, "work").values()) == {"READY"}


# On SIGTERM the job cleans up for 3 s (well within the 10 s grace), says so, then goes on
# as if it had not been asked to end: only a SIGKILL after the grace ends it.
STUBBORN = """echo $$ > job.pid
trap 'echo term > term; sleep 3; echo cleaned > cleaned; while :; do sleep 1; done' TERM
sleep 300 & wait"""


@pytest.mark.long  # waits out the grace
def test_a_job_that_ignores_sigterm_is_killed_after_the_grace(chain, tmp_path):
    """SIGTERM first, and time to act on it (a SIGKILL at once would leave no "cleaned");
    then SIGKILL (without it, RunJob would wait for the job for ever)."""
    script(tmp_path, "work.sh", STUBBORN)
    runjob = start_runjob(chain, "./work.sh")
    wait_for(lambda: written(tmp_path / "job.pid"), what="the job to start")
    job = int((tmp_path / "job.pid").read_text())
    runjob.send_signal(signal.SIGTERM)
    assert runjob.wait(timeout=60) == 128 + signal.SIGTERM
    assert (tmp_path / "term").exists(), "the job never had the SIGTERM"
    assert (tmp_path / "cleaned").exists(), "the job was killed before its grace ended"
    assert not os.path.exists(f"/proc/{job}")  # killed, and reaped by RunJob
    assert statuses(tmp_path, "work") == {"1": "FAILED"}


def test_dry_run_never_writes_even_the_recovery_of_dead_runs(chain, tmp_path):
    chain.ok("dml", "insert into datastatus values ('dst','work','1','OUT','RUNNING',now())")
    chain.ok("dml", "update datastatus set status='RUNNING' where dataid in ('2','3')")
    script(tmp_path, "work.sh", "true")
    before = dump(tmp_path)
    dry = chain.runjob("--dry-run", "./work.sh")
    assert dry.code == 0 and "no suitable data" in dry.out, dry
    assert dump(tmp_path) == before
    setting(chain, "max_parallel", "1")
    before = dump(tmp_path)
    assert chain.runjob("--dry-run", "./work.sh").code == 0
    assert dump(tmp_path) == before
    assert not (tmp_path / "dataflow.db.d").exists()  # not even a lock file


@pytest.mark.both_stores
def test_a_job_at_its_cap_says_how_many_runs_live_and_starts_nothing(chain, tmp_path):
    """max_parallel 1 and a run of work alive: another RunJob of work (and its dry run)
    says so, the cap read from the store, and claims nothing."""
    setting(chain, "max_parallel", "1")
    gate = tmp_path / "gate"
    wait = f'[ "$dataid" != 1 ] || while [ ! -e {gate} ]; do sleep 0.05; done'  # chunk 1 waits
    script(tmp_path, "work.sh", f'echo "$dataid" >> ran; {wait}')
    first = start_runjob(chain, "./work.sh")
    try:
        wait_for(lambda: (tmp_path / "ran").exists(), what="the first run")
        second = chain.runjob("./work.sh")
        dry = chain.runjob("--dry-run", "./work.sh")
    finally:
        gate.touch()
        first.communicate(timeout=60)
    assert second.code == 0 and second.err == "", second
    assert second.lines[0].endswith(
        ": 1 run of work is live (max_parallel 1). Not starting another"
    )
    assert dry.code == 0 and dry.lines == [
        "1 run of work is live (max_parallel 1): would not start"
    ]
    assert (tmp_path / "ran").read_text() == "1\n"  # the second claimed nothing
    assert rows(tmp_path, "select dataid from run") == [("1",)]
