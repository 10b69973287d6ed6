"""Fenced output: what a run writes with ``dataflow.spark`` becomes its chunk only through
its finish, and only while the run still owns the chunk (dataflow/layout.py).

The job finds where to write as a Spark job does (``context().output().chunk_path``),
without starting Spark: the path is the whole protocol.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from dataflow import layout
from dataflow.run.process import processes
from support import BIN, BOUND, rows, script, start_runjob, wait_for
from support.fenced import _files, _register
from support.hosts import _children, alive
from support.lease import _holder_of, _pid


def _names(folder: Path) -> list[str]:
    """What a folder holds now (nothing once it is deleted, as it may be meanwhile)."""
    try:
        return [path.name for path in folder.iterdir()]
    except OSError:
        return []


@pytest.mark.both_stores
def test_a_runs_output_becomes_its_chunk_at_its_finish_and_a_failed_runs_never(cli, tmp_path):
    table = _register(cli, tmp_path)
    chunk = table / "dataid=7"
    (tmp_path / "wait").touch()
    runner = start_runjob(cli, "./work.sh")
    wait_for(lambda: (tmp_path / "job.pid").exists(), what="the job to write")
    (staged,) = (table / layout.ATTEMPTS / "dataid=7").iterdir()
    assert staged.name.startswith("run=") and _files(staged) == {"part.csv": "here\n"}
    assert not chunk.exists()  # nobody sees a running attempt's output
    (tmp_path / "go").touch()
    assert runner.wait(timeout=60) == 0, runner.stderr.read()
    assert _files(chunk) == {"part.csv": "here\n", "late.csv": "late\n"}
    assert not (table / layout.ATTEMPTS).exists()

    # a rerun that fails leaves the chunk as its last READY run made it
    cli.ok("resubmit", "work", "7")
    (tmp_path / "exit").write_text("3")
    (tmp_path / "wait").unlink()
    cli.runjob("./work.sh")
    assert rows(tmp_path, "select status from run where attempt = 2") == [("FAILED",)]
    assert _files(chunk) == {"part.csv": "here\n", "late.csv": "late\n"}
    assert not (table / layout.ATTEMPTS).exists()


@pytest.mark.slow
def test_a_late_writer_never_overwrites_the_chunk_of_the_attempt_that_took_it(hosts, tmp_path):
    """A frozen host wakes up after another host took its chunk and published it: what
    its job writes then goes into its own attempt folder, which is never published."""
    a, b = hosts
    table = _register(a, tmp_path)
    runner = start_runjob(a, "./work.sh")
    job = _pid(tmp_path, "job.pid")
    keeper = _holder_of(runner)
    for pid in (runner.pid, keeper, job):
        os.kill(pid, signal.SIGSTOP)
    try:
        wait_for(
            lambda: "1 abandoned" in b.ok("recover").out, timeout=BOUND * 4, what="the take-over"
        )
        b.ok("resubmit", "work", "7")
        done = b.runjob("./work.sh")
        assert done.code == 0, done.err
    finally:
        for pid in (job, keeper, runner.pid):
            os.kill(pid, signal.SIGCONT)
    (tmp_path / "go").touch()  # host A's job, if still alive, writes late
    assert runner.wait(timeout=60) != 0
    wait_for(lambda: not alive(job), timeout=BOUND, what="host A's job to end")
    assert _files(table / "dataid=7") == {"part.csv": "hostB\n"}
    assert not (table / layout.ATTEMPTS).exists()


def _a_chunk_and_two_attempts(tmp_path: Path) -> tuple[str, Path]:
    """Table ``t``: chunk 7 as attempt 1 made it, and the staged output of two attempts,
    ``late`` (a writer that goes on) and ``mine`` (the one finishing)."""
    table = str(tmp_path / "t")
    chunk = Path(table) / "dataid=7"
    chunk.mkdir(parents=True)
    (chunk / "old.csv").write_text("attempt 1's")
    for token in ("late", "mine"):
        staged = Path(layout.staging(table, "7", token))
        staged.mkdir(parents=True)
        (staged / "part.csv").write_text(token)
    return table, chunk


def test_a_publish_moves_the_chunks_old_files_and_older_attempts_aside(tmp_path):
    """Inside the finish's transaction only renames; what is deleted is deleted after."""
    table, chunk = _a_chunk_and_two_attempts(tmp_path)
    aside = layout.publish([table], "7", "mine").aside
    assert _files(chunk) == {"part.csv": "mine"}
    assert sorted(_files(Path(path)).get("part.csv", "") for path in aside) == ["", "late"]
    assert {p.name for p in (Path(table) / layout.ATTEMPTS / "dataid=7").iterdir()} == {
        Path(path).name for path in aside
    }  # the late writer's folder is no longer where it writes
    layout.remove(aside)
    assert not (Path(table) / layout.ATTEMPTS).exists()


def test_what_earlier_finishes_left_aside_goes_with_the_next_publish(tmp_path):
    """``old-<token>`` folders that a finish moved aside and a crash kept it from deleting
    once committed (nothing else deletes them) are moved aside by the chunk's next publish
    and deleted after it; an undone publish puts them back."""
    table, chunk = _a_chunk_and_two_attempts(tmp_path)
    attempts = Path(table) / layout.ATTEMPTS / "dataid=7"
    for name in ("old-gone", "old-gone.0"):
        (attempts / name).mkdir()
        (attempts / name / "part.csv").write_text("left over")
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    layout.unpublish(layout.publish([table], "7", "mine").moves)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before
    layout.remove(layout.publish([table], "7", "mine").aside)
    assert _files(chunk) == {"part.csv": "mine"}
    assert not (Path(table) / layout.ATTEMPTS).exists()


@pytest.mark.both_stores
@pytest.mark.long
def test_a_runjob_killed_after_its_finish_committed_leaves_nothing_for_good(cli, tmp_path):
    """RunJob killed (its whole group) while it deletes, after its finish committed, what
    the chunk held before: what is left of it goes with the chunk's next publish."""
    table = _register(cli, tmp_path)
    chunk = table / "dataid=7"
    assert cli.runjob("./work.sh").code == 0
    for number in range(50_000):  # deleting them after the next finish takes a while
        (chunk / f"{number}.csv").write_text("")
    cli.ok("resubmit", "work", "7")
    runner = start_runjob(cli, "./work.sh", start_new_session=True)
    attempts = table / layout.ATTEMPTS / "dataid=7"

    def aside() -> bool:
        return any(name.startswith("old-") for name in _names(attempts))

    def deleting() -> bool:
        assert runner.poll() is None, "RunJob ended before it could be killed"
        ready = rows(tmp_path, "select status from run where attempt = 2") == [("READY",)]
        return ready and aside()

    wait_for(deleting, what="the finish to commit and delete what it moved aside")
    os.killpg(runner.pid, signal.SIGKILL)
    runner.wait(timeout=30)
    assert aside()  # killed midway
    # (on PostgreSQL its keeper, in a session of its own, lets the lease go at its next tick)
    wait_for(lambda: cli.utility("resubmit", "work", "7").code == 0, what="the resubmit")
    assert cli.runjob("./work.sh").code == 0
    assert _files(chunk) == {"part.csv": "here\n"}
    assert not (table / layout.ATTEMPTS).exists()


def _a_dead_run_of_many_files(cli, tmp_path: Path) -> tuple[Path, Path]:
    """A run of chunk 7 killed with its whole group, its job too, having staged many
    files (deleting them takes a while): the table, and the chunk's attempts folder."""
    table = _register(cli, tmp_path)
    (tmp_path / "wait").touch()
    cli.env["DATAFLOW_HOLDER_IDLE"] = "0"  # its holder ends once it holds nothing (below)
    runner = start_runjob(cli, "./work.sh", start_new_session=True)
    job = _pid(tmp_path, "job.pid")
    attempts = table / layout.ATTEMPTS / "dataid=7"
    (staged,) = attempts.iterdir()
    folder = os.open(staged, os.O_RDONLY)  # (created by name in it: 8x quicker than paths)
    try:
        for number in range(50_000):
            os.close(os.open(f"{number}.csv", os.O_CREAT | os.O_WRONLY, 0o644, dir_fd=folder))
    finally:
        os.close(folder)
    keeper = [pid for pid in _children(runner.pid) if pid != job]  # on PostgreSQL
    os.killpg(runner.pid, signal.SIGKILL)
    os.killpg(job, signal.SIGKILL)  # the job's group: its shell and the sleep it waits on
    runner.wait(timeout=30)
    (token,) = [name.removeprefix("run=") for name in _names(attempts)]
    # dead for a claim once no process carries its token and its keeper, which lets go of
    # its lease when it sees that, has ended
    wait_for(
        lambda: not processes.pids_carrying(token) and not any(map(alive, keeper)),
        what="the run's processes and its keeper to end",
    )
    return table, attempts


@pytest.mark.both_stores
@pytest.mark.parametrize("by", ["utility recover", "a claim"])
@pytest.mark.long
def test_a_recovery_deletes_a_dead_runs_output_after_its_commit(cli, tmp_path, by):
    """What a dead run staged (a Spark job's partial output: many files) is deleted after
    the recovery that marks it FAILED is committed, by ``utility recover`` or by a
    RunJob's claim: no transaction waits for the deletion (on SQLite every writer would)."""
    table, attempts = _a_dead_run_of_many_files(cli, tmp_path)
    seen, done = [], threading.Event()

    def watch() -> None:  # the run's status, then whether its output is still there
        while not done.is_set():
            failed = rows(tmp_path, "select status from run") == [("FAILED",)]
            seen.append((failed, bool(_names(attempts))))

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:

        def recovered() -> bool:
            (cli.ok("recover") if by == "utility recover" else cli.runjob("./work.sh"))
            return rows(tmp_path, "select status from run") == [("FAILED",)]

        wait_for(recovered, timeout=60, what="the recovery")
    finally:
        done.set()
        watcher.join()
    assert (True, True) in seen  # FAILED committed while its output was being deleted
    assert not (table / layout.ATTEMPTS).exists()


@pytest.mark.both_stores
@pytest.mark.long
def test_a_claims_job_starts_while_a_recovery_deletes(cli, tmp_path):
    """A RunJob whose claim recovered a dead run (many staged files) starts the chunk it
    claimed while that output is deleted, not after; the deletion is over once RunJob
    has ended."""
    table, attempts = _a_dead_run_of_many_files(cli, tmp_path)
    script(tmp_path, "work.sh", f'ls -A "{attempts}" > "left.$dataid"')
    cli.ok("ready", "src", "8")
    assert cli.runjob("./work.sh").code == 0
    assert rows(tmp_path, "select dataid, status from run order by runid") == [
        ("7", "FAILED"),
        ("8", "READY"),
    ]
    assert (tmp_path / "left.8").read_text().split()  # being deleted as the job started
    assert not (table / layout.ATTEMPTS).exists()


@pytest.mark.both_stores
@pytest.mark.long
def test_a_recovery_killed_as_it_deletes_leaves_it_to_the_chunks_next_finish(cli, tmp_path):
    """``utility recover`` killed after its commit, while it deletes what a dead run
    staged: the chunk's next finish, a FAILED one too, deletes what is left of it."""
    table, attempts = _a_dead_run_of_many_files(cli, tmp_path)
    (tmp_path / "wait").unlink()

    def killed_as_it_deletes() -> bool:
        recovery = subprocess.Popen([BIN / "utility", "recover"], cwd=cli.cwd, env=cli.env)
        while recovery.poll() is None:
            if rows(tmp_path, "select status from run") == [("FAILED",)]:
                recovery.kill()
                recovery.wait()
                return True
        return False

    wait_for(killed_as_it_deletes, timeout=60, what="a recovery to commit")
    assert _names(attempts)  # what it was deleting
    cli.ok("resubmit", "work", "7")
    (tmp_path / "exit").write_text("3")
    assert cli.runjob("./work.sh").code == 3
    assert rows(tmp_path, "select status from run where attempt = 2") == [("FAILED",)]
    assert not (table / layout.ATTEMPTS).exists()


def test_a_publish_that_fails_puts_every_chunk_back(tmp_path):
    """Two outputs: the second cannot be moved, so the first is put back as it was."""
    tables = [str(tmp_path / "a"), str(tmp_path / "b")]
    for table in tables:
        (Path(table) / "dataid=7").mkdir(parents=True)
        (Path(table) / "dataid=7" / "part.csv").write_text("before")
        staged = Path(layout.staging(table, "7", "mine"))
        staged.mkdir(parents=True)
        (staged / "part.csv").write_text("after")
    (Path(tables[1]) / layout.ATTEMPTS / "dataid=7" / "old-mine").mkdir()  # in the way
    (Path(tables[1]) / layout.ATTEMPTS / "dataid=7" / "old-mine" / "x").write_text("")
    with pytest.raises(layout.PublishFailed, match="cannot publish chunk 7"):
        layout.publish(tables, "7", "mine")
    for table in tables:
        assert _files(Path(table) / "dataid=7") == {"part.csv": "before"}
        assert _files(Path(layout.staging(table, "7", "mine"))) == {"part.csv": "after"}


def test_a_publish_undone_puts_back_the_chunk_and_every_attempts_folder(tmp_path):
    """A finish that published and was not committed: its renames undone, the last first."""
    table, chunk = _a_chunk_and_two_attempts(tmp_path)
    before = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    done = layout.publish([table], "7", "mine")
    layout.unpublish(done.moves)
    assert sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")) == before
    assert _files(chunk) == {"old.csv": "attempt 1's"} and done.moves == []


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
@pytest.mark.long
def test_a_finish_whose_commit_the_server_refuses_leaves_the_chunk_as_it_was(
    cli, tmp_path, address
):
    """The server refuses the finish's COMMIT (a deferred constraint trigger of a store
    writer): the run is not READY, and its chunk keeps what its last READY run made
    (on SQLite: test_publish, a COMMIT on a full disk)."""
    import psycopg

    table = _register(cli, tmp_path)
    assert cli.runjob("./work.sh").code == 0
    (table / "dataid=7" / "mark").write_text("the first run's chunk")
    cli.ok("resubmit", "work", "7")
    with psycopg.connect(address, autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION hostile() RETURNS trigger LANGUAGE plpgsql AS"
            " $$ BEGIN RAISE EXCEPTION 'hostile commit'; END $$"
        )
        conn.execute(
            "CREATE CONSTRAINT TRIGGER hostile AFTER UPDATE ON run DEFERRABLE INITIALLY"
            " DEFERRED FOR EACH ROW WHEN (NEW.status = 'READY') EXECUTE FUNCTION hostile()"
        )
    done = cli.runjob("./work.sh")
    assert done.code != 0 and "hostile commit" in done.err, done
    assert _files(table / "dataid=7") == {"mark": "the first run's chunk", "part.csv": "here\n"}, (
        done
    )
    assert rows(tmp_path, "select status from run order by attempt") == [
        ("READY",),
        ("RUNNING",),
    ]


def _ending_commits(address: str, times: int) -> None:
    """A store writer's deferred trigger that ends the finishing session (its COMMIT's
    answer lost: the transaction is rolled back) the first ``times`` times a run turns
    READY."""
    import psycopg

    with psycopg.connect(address, autocommit=True) as conn:
        conn.execute("CREATE SEQUENCE hostile_count")  # not rolled back with its transaction
        conn.execute(
            "CREATE FUNCTION hostile() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            f" IF nextval('hostile_count') <= {times} THEN"
            "   PERFORM pg_terminate_backend(pg_backend_pid());"
            " END IF; RETURN NULL; END $$"
        )
        conn.execute(
            "CREATE CONSTRAINT TRIGGER hostile AFTER UPDATE ON run DEFERRABLE INITIALLY"
            " DEFERRED FOR EACH ROW WHEN (NEW.status = 'READY') EXECUTE FUNCTION hostile()"
        )


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
@pytest.mark.long
def test_a_finish_whose_commit_was_lost_and_not_done_is_recorded_by_its_next_try(
    cli, tmp_path, address
):
    """The finish's first COMMIT ends its session (not committed, its answer lost): the
    move is kept, the next try commits READY; the chunk holds the run's output only."""
    from support.fenced import _files, _register

    table = _register(cli, tmp_path)
    assert cli.runjob("./work.sh").code == 0
    (table / "dataid=7" / "mark").write_text("the first run's chunk")
    cli.ok("resubmit", "work", "7")
    _ending_commits(address, 1)
    done = cli.runjob("./work.sh")
    assert done.code == 0, done
    assert _files(table / "dataid=7") == {"part.csv": "here\n"}
    assert rows(tmp_path, "select status from run order by attempt") == [("READY",), ("READY",)]
    assert list((table / layout.ATTEMPTS).rglob("*")) in (
        [],
        [table / layout.ATTEMPTS / "dataid=7"],
    )


@pytest.mark.long  # the finish waits out the store's patience
@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
def test_a_finish_whose_every_commit_is_lost_leaves_no_output_of_a_failed_run(
    cli, tmp_path, address
):
    """Every COMMIT of the finish ends its session (never committed): RunJob gives up
    (one line, non-zero), and once the run is recovered FAILED the chunk must hold what
    its last READY run made, not the output of a run the store says failed."""
    from support.fenced import _files, _register

    table = _register(cli, tmp_path)
    assert cli.runjob("./work.sh").code == 0
    (table / "dataid=7" / "mark").write_text("the first run's chunk")
    cli.ok("resubmit", "work", "7")
    _ending_commits(address, 10_000)
    cli.env["DATAFLOW_LIVENESS_TIMEOUT"] = "6"  # the finish's patience: 3 x 6 s, not 3 x 20 s
    done = cli.runjob("./work.sh", timeout=300)
    assert done.code != 0 and "Traceback" not in done.err, done
    cli.ok("recover")
    assert rows(tmp_path, "select status from run order by attempt")[-1] != ("READY",)
    assert _files(table / "dataid=7") == {"mark": "the first run's chunk", "part.csv": "here\n"}
