"""The quickstart (seed 000), typed to the letter, with SPEC §8's output."""

from __future__ import annotations

import re
import subprocess

import pytest

from dataflow.store import shown
from support import BIN, STAMP, rows, script

SETUP = [
    "./utility.sh createtables",
    """./utility.sh dml "insert into dataset (datasetid) values  ('bobin')\"""",
    """./utility.sh dml "insert into dataset (datasetid) values  ('bobout')\"""",
    """./utility.sh dml "insert into job (datasetid,itemtype,jobid) values ('bobout','OUT','loadbob')\"""",
    """./utility.sh dml "insert into job (datasetid,itemtype,jobid) values ('bobin' ,'IN', 'loadbob')\"""",
    """./utility.sh dml "insert into datastatus (dataid,datasetid,jobid,locktype,modified,status) values ('1.0','bobin','fakejob', 'OUT',now(),'READY')\"""",
    """echo 'echo "running loadbob with dataid $dataid partition of input  $bobin_DATASETID"' > loadbob.sh && chmod +x loadbob.sh""",
]


def run_lines(cli, lines):
    results = []
    for line in lines:
        result = cli.sh(f"export PASSKEY=plugh; {line}")
        assert result.code == 0, (line, result)
        assert result.err == "", (line, result)
        results.append(result)
    return results


@pytest.mark.both_stores
@pytest.mark.empty_store  # createtables says it made the tables
@pytest.mark.long
def test_quickstart_to_the_letter(cli, tmp_path, address):
    (tmp_path / "utility.sh").symlink_to(BIN / "utility.sh")
    created, *inserts, _ = run_lines(cli, SETUP)
    assert created.out == f"tables created in {shown(address)}\n"
    assert [r.out for r in inserts] == ["1 row affected\n"] * 5

    (first,) = run_lines(cli, ["RunJob ./loadbob.sh"])
    assert re.fullmatch(
        rf"{STAMP}: Launching \./loadbob\.sh with dataid 1\.0\n"
        r"running loadbob with dataid 1\.0 partition of input  bobin\n"
        rf"{STAMP}: Job \./loadbob\.sh is complete\. Updating status\n"
        r"1 rows updated to READY for loadbob and 1\.0 1 IN file-local locks released\n",
        first.out,
    ), first.out

    (second,) = run_lines(cli, ["RunJob ./loadbob.sh"])
    assert re.fullmatch(
        rf"{STAMP}: no suitable data available for job\. Not running it\n", second.out
    )

    runs, sql = run_lines(cli, ["./utility.sh runs", 'utility.sh sql "select * from datastatus"'])
    header, dashes, newest, oldest = runs.lines
    assert header.split() == ["DATAID", "DATASETID", "JOBID", "LOCKTYPE", "MODIFIED", "STATUS"]
    assert set(dashes) == {"-", " "}
    assert newest.split()[:4] + newest.split()[-1:] == ["1.0", "bobout", "loadbob", "OUT", "READY"]
    assert oldest.split()[:4] + oldest.split()[-1:] == ["1.0", "bobin", "fakejob", "OUT", "READY"]
    stamp = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}"
    assert re.search(stamp, newest) and re.search(stamp, oldest)

    header, _, *rows = sql.lines
    assert header.split() == ["DATASETID", "JOBID", "DATAID", "LOCKTYPE", "STATUS", "MODIFIED"]
    assert [row.split()[:5] for row in rows] == [
        ["bobin", "fakejob", "1.0", "OUT", "READY"],
        ["bobout", "loadbob", "1.0", "OUT", "READY"],
    ]

    # The remarks: a RESUBMIT makes the chunk run again, with nothing else to do.
    (resubmit,) = run_lines(cli, ["utility.sh endjob loadbob 1.0 RESUBMIT"])
    assert resubmit.out == "1 row updated to RESUBMIT for loadbob and 1.0\n"
    (rerun,) = run_lines(cli, ["RunJob ./loadbob.sh"])
    assert "Launching ./loadbob.sh with dataid 1.0" in rerun.out
    assert (
        rerun.lines[-1]
        == "1 rows updated to READY for loadbob and 1.0 1 IN file-local locks released"
    )


def test_make_demo_script_runs_the_quickstart(cli, tmp_path):
    """`make demo`'s script, run from a fresh folder, shows the same lines."""
    demo = cli(
        "bash",
        str(BIN.parent / "examples/quickstart/demo.sh"),
        env={"DEMO_DIR": str(tmp_path / "d")},
    )
    assert demo.code == 0, demo
    assert "1 rows updated to READY for loadbob and 1.0 1 IN file-local locks released" in demo.out
    assert "no suitable data available for job. Not running it" in demo.out


@pytest.mark.long
def test_make_demo_replaces_only_its_own_folder(cli, tmp_path):
    """Run twice from a folder where an example keeps its results in demo-run/: the
    quickstart starts afresh each time, the example's store is left alone."""
    example = tmp_path / "demo-run" / "daily_pipeline"
    example.mkdir(parents=True)
    (example / "dataflow.db").write_text("the example's results")
    for _ in range(2):
        demo = cli("bash", str(BIN.parent / "examples/quickstart/demo.sh"))
        assert demo.code == 0, demo
        assert "tables created in " in demo.out  # a fresh store each time
    assert (example / "dataflow.db").read_text() == "the example's results"
    assert (tmp_path / "demo-run" / "quickstart" / "dataflow.db").is_file()


def crontab_lines() -> list[str]:
    """The README's crontab block, line by line."""
    text = (BIN.parent / "README.md").read_text()
    block = text.split("```crontab\n", 1)[1].split("```", 1)[0]
    return block.splitlines()


def test_the_readme_crontab_lines_run_under_crons_environment(cli, tmp_path):
    """Each line's command, as cron's sh runs it: `env -i` with cron's PATH, nothing of
    ours on it; the RunJob line twice at once (no flock), its chunk run once."""
    cli.ok("createtables")
    cli.ok("register-dataset", "src")
    cli.ok("register-dataset", "dst")
    cli.ok("register-job", "load", "--in", "src", "--out", "dst")
    cli.ok("ready", "src", "1")
    script(tmp_path, "load.sh", 'echo "load $dataid"; echo "$dataid" >> starts; sleep 1')
    runjob, board = crontab_lines()
    assert len(runjob.split(None, 5)) == len(board.split(None, 5)) == 6  # 5 times + command

    def cron(line: str) -> subprocess.Popen:
        command = line.split(None, 5)[5]
        command = command.replace("/opt/opendataflow", str(BIN.parent))
        command = command.replace("/srv/etl", str(tmp_path))
        env = ["env", "-i", f"HOME={tmp_path}", "PATH=/usr/bin:/bin", "SHELL=/bin/sh"]
        return subprocess.Popen([*env, "sh", "-c", command], cwd="/")

    together = [cron(runjob), cron(runjob)]
    assert [process.wait(timeout=120) for process in together] == [0, 0]
    assert (tmp_path / "starts").read_text() == "1\n"
    assert rows(tmp_path, "select status from datastatus where jobid = 'load'") == [("READY",)]
    log = (tmp_path / "load.log").read_text()
    assert "load 1" in log and "no suitable data available for job. Not running it" in log
    assert "error" not in log
    assert cron(board).wait(timeout=120) == 0
    assert "board written to" in (tmp_path / "board.log").read_text()
    assert 'data-job="load"' in (tmp_path / "board.html").read_text()
