"""``RunJob --all FOLDER``: one cron line for a whole pipeline, with the guarantees of
separate RunJobs: producers before consumers, until nothing is left, each chunk once."""

from __future__ import annotations

import contextlib
import os
import pty
import select
import signal
import time

import pytest

from support import BIN, rows, script, start_runjob, wait_for
from support.folders import STEP, _chain


@pytest.mark.both_stores
@pytest.mark.long
def test_one_cron_line_drains_a_whole_pipeline_in_dependency_order(cli, tmp_path):
    _chain(cli, tmp_path, 3)
    done = cli.runjob("--all", "./etl", env={"FAIL": "b 2"})
    assert done.code == 1, done  # a chunk FAILED
    assert "etl/helper.sh: no job 'helper' is registered; skipped" in done.err
    ledger = (tmp_path / "ledger").read_text().splitlines()
    assert sorted(ledger) == sorted(
        ["a 1", "a 2", "a 3", "b 1", "b 2", "b 3", "c 1", "c 3"]
    )  # c 2 waits for b 2, which failed
    assert ledger.index("a 3") < ledger.index("b 1") < ledger.index("c 1")
    status = dict(
        rows(
            tmp_path,
            "select jobid || ' ' || dataid, status from datastatus"
            " where locktype = 'OUT' and jobid != 'external'",
        )
    )
    assert status["b 2"] == "FAILED" and status["c 3"] == "READY" and "c 2" not in status

    cli.ok("resubmit", "b", "2")  # fixed: the next tick finishes the pipeline
    again = cli.runjob("--all", "./etl")
    assert again.code == 0, again
    assert (tmp_path / "ledger").read_text().splitlines()[len(ledger) :] == ["b 2", "c 2"]


def test_a_folder_takes_no_script_options(cli, tmp_path):
    _chain(cli, tmp_path, 1)
    refused = cli.runjob("--all", "--dry-run", "./etl")
    assert (refused.code, refused.err) == (
        2,
        "error: a folder takes --all [--parallel N] [--workers W] [--batch K] only: "
        "name a script for the rest\n",
    )
    zero = cli.runjob("--batch", "0", "./etl")
    assert (zero.code, zero.err) == (2, "error: --batch needs a number >= 1\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = cli.runjob("--all", str(empty))
    assert nothing.code == 2 and "names a registered job" in nothing.err


@pytest.mark.long
def test_batch_implies_all_for_a_folder_too_and_shell_jobs_run_one_chunk_each(cli, tmp_path):
    _chain(cli, tmp_path, 3)
    done = cli.runjob("--batch", "2", "./etl")  # as RunJob --batch 2 SCRIPT for each job
    assert done.code == 0, done
    ledger = (tmp_path / "ledger").read_text().splitlines()
    assert ledger == [f"{job} {n}" for job in "abc" for n in (1, 2, 3)]
    assert rows(tmp_path, "select count(*) from run where status = 'READY'") == [(9,)]


@pytest.mark.long
def test_workers_spread_a_folders_shell_jobs_and_leave_its_spark_jobs_alone(cli, tmp_path):
    """``--workers`` is for jobs run as a process a chunk: a folder passes it to those and
    not to a ``.py`` job (run through spark-submit here a fake one), which RunJob refuses
    it for when named alone."""
    etl = _chain(cli, tmp_path, 2)
    (etl / "c.sh").unlink()
    (etl / "c.py").write_text("raise SystemExit('run by spark-submit, not by Python')\n")
    spark = tmp_path / "spark"
    (spark / "bin").mkdir(parents=True)
    script(spark / "bin", "spark-submit", STEP)
    env = {"SPARK_HOME": str(spark)}
    done = cli.runjob("--all", "--parallel", "2", "--workers", "2", "./etl", env=env)
    assert done.code == 0, done
    ledger = (tmp_path / "ledger").read_text().splitlines()
    assert sorted(ledger) == [f"{job} {n}" for job in "abc" for n in (1, 2)]
    alone = cli.runjob("--all", "--parallel", "2", "--workers", "2", "./etl/c.py", env=env)
    assert (alone.code, alone.err) == (
        2,
        "error: --workers is for a job run as a process a chunk, not through Spark: ./etl/c.py\n",
    )
    unspread = cli.runjob("--workers", "2", "./etl/a.sh")
    assert (unspread.code, unspread.err) == (
        2,
        "error: --workers spreads the slots of --parallel N: give --parallel too\n",
    )


@pytest.mark.long
@pytest.mark.parametrize("number", [signal.SIGINT, signal.SIGHUP])
def test_a_terminals_signal_reaches_a_folder_drains_job_once(cli, tmp_path, number):
    """^C at a terminal signals its whole foreground process group. The job under way
    gets it once, however late the folder's RunJob passes it on (a second ^C is how
    many jobs, Spark's among them, are told to stop at once, without cleaning up), and
    the folder's RunJob exits 128+n."""
    etl = _chain(cli, tmp_path, 2)
    (etl / "helper.sh").unlink()
    name = signal.Signals(number).name[3:]
    script(
        etl,
        "a.sh",
        f"trap 'echo {name} >> signals' {name}; touch started; "
        "while [ ! -s signals ]; do sleep 0.05; done; sleep 2; exit 9",
    )
    runjob = start_runjob(cli, "--all", "./etl", process_group=0)  # a terminal's job
    wait_for(lambda: (tmp_path / "started").exists(), what="the job to start")
    os.kill(runjob.pid, signal.SIGSTOP)  # the folder's RunJob passes the signal on late
    os.killpg(runjob.pid, number)
    time.sleep(0.5)
    os.kill(runjob.pid, signal.SIGCONT)
    _, err = runjob.communicate(timeout=60)
    assert (runjob.returncode, err) == (128 + number, ""), err
    assert (tmp_path / "signals").read_text().split() == [name]


def test_a_folder_drain_on_a_terminal_that_stops_background_writers(cli, tmp_path):
    """``stty tostop``: a process of a background group that writes to the terminal is
    stopped. The RunJob a folder drain runs for a script has a group of its own, yet
    writes its report to the terminal and ends, as does the folder's RunJob."""
    _chain(cli, tmp_path, 2)
    pid, terminal = pty.fork()
    if pid == 0:  # the terminal's shell
        os.chdir(cli.cwd)
        os.execve("/bin/sh", ["sh", "-c", f"stty tostop; exec {BIN}/RunJob --all ./etl"], cli.env)
    said, deadline = b"", time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):  # (EIO once the terminal's last writer is gone)
            if select.select([terminal], [], [], 0.2)[0]:
                said += os.read(terminal, 4096)
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
    else:
        os.kill(pid, signal.SIGKILL)
        raise AssertionError(f"the folder's RunJob did not end; it said {said!r}")
    os.close(terminal)
    assert os.waitstatus_to_exitcode(status) == 0, said
    assert b"c: 2 READY, 0 FAILED" in said, said
    assert sorted((tmp_path / "ledger").read_text().splitlines()) == sorted(
        f"{job} {n}" for job in "abc" for n in (1, 2)
    )
