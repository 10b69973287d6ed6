"""16 processes drain a 3-job chain of 1,000 chunks: every (job, dataid) runs exactly once."""

from __future__ import annotations

import sqlite3
import subprocess
from collections import Counter

import pytest

from support import script
from support.stress import CHUNKS, JOBS, LOOP, OUTPUT, STALL_S, finished


@pytest.mark.slow
def test_sixteen_processes_over_a_three_job_chain(cli, tmp_path):
    cli.ok("createtables")
    cli.ok("dml", "insert into dataset (datasetid) values ('src'), ('a'), ('b'), ('c')")
    for jobid, inputs in JOBS.items():
        for dataset in inputs:
            cli.ok(
                "dml",
                f"insert into job (jobid,itemtype,datasetid) values ('{jobid}','IN','{dataset}')",
            )
        cli.ok(
            "dml",
            f"insert into job (jobid,itemtype,datasetid) values ('{jobid}','OUT','{OUTPUT[jobid]}')",
        )
        script(tmp_path, f"{jobid}.sh", 'echo "$jobid $dataid" >> ran.log')
    cli.ok(
        "dml",
        f"with recursive n(i) as (select 1 union all select i+1 from n where i < {CHUNKS}) "
        "insert into datastatus select 'src','fakejob',i,'OUT','READY',now() from n",
    )
    (tmp_path / "loop.sh").write_text(LOOP.format(chunks=CHUNKS, stall=STALL_S))
    workers = []
    for jobid in JOBS:
        modes = [[], [], [], ["--all"], ["--parallel", "3"]]
        if jobid == "C":
            modes.append(["--parallel", "2"])
        workers += [["bash", "loop.sh", jobid, *mode] for mode in modes]
    assert len(workers) == 16
    procs = [
        subprocess.Popen(
            w,
            cwd=tmp_path,
            env=cli.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for w in workers
    ]
    outputs = finished(procs)
    for text in outputs:
        for bad in ("Traceback", "locked", "busy", "error"):
            assert bad not in text, text[-2000:]

    ran = Counter((tmp_path / "ran.log").read_text().splitlines())
    expected = Counter(f"{j} {i}" for j in JOBS for i in range(1, CHUNKS + 1))
    assert ran == expected, (ran - expected, expected - ran)
    with sqlite3.connect(tmp_path / "dataflow.db") as conn:
        states = conn.execute(
            "select locktype, status, count(*) from datastatus where jobid != 'fakejob' group by 1, 2"
        ).fetchall()
        attempts = conn.execute("select max(attempt), count(*) from run").fetchone()
    assert states == [("OUT", "READY", 3 * CHUNKS)]
    assert attempts == (1, 3 * CHUNKS)
