"""``RunJob --all FOLDER``: one cron line for a whole pipeline, with the guarantees of
separate RunJobs: producers before consumers, until nothing is left, each chunk once."""

from __future__ import annotations

import pytest

from support import rows, script, start_runjob

# a chain a -> b -> c; each job appends "<job> <dataid>" to a ledger
STEP = 'echo "$jobid $dataid" >> ledger; [ "$jobid $dataid" != "$FAIL" ]'


def _chain(cli, tmp_path, chunks: int):
    cli.ok("createtables")
    for name in ("src", "a_out", "b_out", "c_out"):
        cli.ok("register-dataset", name)
    cli.ok("register-job", "a", "--in", "src", "--out", "a_out")
    cli.ok("register-job", "b", "--in", "a_out", "--out", "b_out")
    cli.ok("register-job", "c", "--in", "b_out", "--out", "c_out")
    cli.ok("ready", "src", *[str(i) for i in range(1, chunks + 1)])
    etl = tmp_path / "etl"
    etl.mkdir()
    for job in ("c", "a", "b"):  # not in pipeline order: the store knows the order
        script(etl, f"{job}.sh", STEP)
    (etl / "README").write_text("not a job\n")
    script(etl, "helper.sh", "exit 0")  # an executable that names no job
    return etl


@pytest.mark.both_stores
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


def test_racing_pipeline_drains_run_each_chunk_once(cli, tmp_path):
    _chain(cli, tmp_path, 30)
    racers = [start_runjob(cli, "--all", "--parallel", "2", "./etl") for _ in range(3)]
    assert [racer.wait(timeout=300) for racer in racers] == [0, 0, 0]
    ledger = (tmp_path / "ledger").read_text().splitlines()
    assert len(ledger) == len(set(ledger)) == 90


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


def test_batch_implies_all_for_a_folder_too_and_shell_jobs_run_one_chunk_each(cli, tmp_path):
    _chain(cli, tmp_path, 3)
    done = cli.runjob("--batch", "2", "./etl")  # as RunJob --batch 2 SCRIPT for each job
    assert done.code == 0, done
    ledger = (tmp_path / "ledger").read_text().splitlines()
    assert ledger == [f"{job} {n}" for job in "abc" for n in (1, 2, 3)]
    assert rows(tmp_path, "select count(*) from run where status = 'READY'") == [(9,)]
