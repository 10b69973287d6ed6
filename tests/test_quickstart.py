"""The quickstart (seed 000), typed to the letter, with SPEC §8's output."""

from __future__ import annotations

import re

from support import BIN, STAMP

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


def test_quickstart_to_the_letter(cli, tmp_path):
    (tmp_path / "utility.sh").symlink_to(BIN / "utility.sh")
    created, *inserts, _ = run_lines(cli, SETUP)
    assert created.out == f"tables created in {tmp_path / 'dataflow.db'}\n"
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
