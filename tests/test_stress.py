"""16 processes drain a 3-job chain of 1,000 chunks: every (job, dataid) runs exactly once."""

from __future__ import annotations

import sqlite3
import subprocess
from collections import Counter

import pytest

from support import script

CHUNKS = 1000
JOBS = {"A": ["src"], "B": ["a"], "C": ["a", "b"]}
OUTPUT = {"A": "a", "B": "b", "C": "c"}

STALL_S = 120  # no chunk of any job run for this long: one is lost, the workers give up

# A worker calls RunJob (plain, or a drain) again and again until its job has
# run every chunk: upstream jobs may still be producing when it first looks. When no
# worker has run a chunk for STALL_S seconds, a chunk is lost (never READY, or never
# offered): it says so and fails, rather than spin until the test's timeout.
LOOP = """
job=$1; shift
ran() {{ cat ran.log 2>/dev/null | grep -c "$1"; }}
seen=-1; since=$SECONDS
until [ "$(ran "^$job ")" -ge {chunks} ]; do
    out=$(RunJob "$@" ./$job.sh) || {{ echo "RunJob failed: $out"; exit 1; }}
    case $out in *"no suitable data"*) sleep 0.05;; esac
    now=$(ran '')
    if [ "$now" != "$seen" ]; then
        seen=$now; since=$SECONDS
    elif [ $((SECONDS - since)) -ge {stall} ]; then
        echo "stalled: job $job ran $(ran "^$job ") of {chunks} chunks, and no job ran" \
            "a chunk for {stall} s: a chunk is lost"
        exit 3
    fi
done
"""


def finished(procs: list[subprocess.Popen], timeout: float = 1200) -> list[str]:
    """The workers' outputs once all have ended; fails with the words of those that failed
    (a stall names the job that lost a chunk)."""
    outputs = [p.communicate(timeout=timeout)[0] for p in procs]
    failed = [text.strip()[-2000:] for p, text in zip(procs, outputs, strict=True) if p.returncode]
    assert not failed, "\n".join(failed)
    return outputs


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
