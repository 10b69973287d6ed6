"""Shared by the tests of a drain spread over worker processes (``RunJob --all --parallel
N --workers W``: test_workers*.py): its chunks, its workers found in /proc, and the job
whose own ``flock`` per chunk judges: a second run beside a live process of the first
writes ``OVERLAP`` into the ledger."""

from __future__ import annotations

import os

from support import BOUND, script, setting, start_runjob, wait_for


def chunks(cli, count: int) -> None:
    """Job ``work`` (src -> dst), chunks 1..count of src READY."""
    cli.ok("createtables")
    cli.ok("dml", "insert into dataset (datasetid) values ('src'), ('dst')")
    cli.ok(
        "dml",
        "insert into job (jobid,itemtype,datasetid) values ('work','IN','src'), ('work','OUT','dst')",
    )
    values = ", ".join(f"('src','fakejob','{n}','OUT','READY',now())" for n in range(1, count + 1))
    cli.ok("dml", f"insert into datastatus values {values}")


def workers_of(pid: int) -> list[int]:
    """The worker processes RunJob ``pid`` started (its children running the worker)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as file:
                parent = int(file.read().rpartition(b")")[2].split()[1])
            with open(f"/proc/{entry}/cmdline", "rb") as file:
                command = file.read()
        except (OSError, ValueError, IndexError):
            continue
        if parent == pid and b"dataflow.run.drain.worker" in command:
            found.append(int(entry))
    return found


# the job: one flock per chunk, held by every process it starts (descriptor 9)
JUDGE = """
exec 9>>"flock.$dataid"
flock -n 9 || echo "OVERLAP $dataid" >> ledger
echo "$dataid $$" >> ledger
"""
# it waits for the file go when the file hold was there as it started
HELD = 'if [ -e hold ]; then echo "$dataid $$" >> held; until [ -e go ]; do sleep 0.1; done; fi'
SPREAD = ("--all", "--parallel", "4", "--workers", "2", "./work.sh")


def _lines(path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _bounded(cli) -> None:
    cli.env["DATAFLOW_LIVENESS_TIMEOUT"] = str(BOUND)


def _no_overlap(tmp_path) -> list[str]:
    """The ledger's dataids, in order; no line of it says OVERLAP."""
    ledger = _lines(tmp_path / "ledger")
    assert not [line for line in ledger if line.startswith("OVERLAP")], ledger
    return [line.split()[0] for line in ledger]


def _four_held(cli, tmp_path):
    """A spread drain of 8 chunks (retries 1) whose first four jobs are running and held
    (until the file go): RunJob, and its two workers' pids."""
    chunks(cli, 8)
    setting(cli, "retries", "1")
    script(tmp_path, "work.sh", JUDGE + HELD)
    (tmp_path / "hold").touch()
    runjob = start_runjob(cli, *SPREAD)
    wait_for(lambda: len(_lines(tmp_path / "held")) == 4, what="four jobs to start")
    pids = workers_of(runjob.pid)
    assert len(pids) == 2
    return runjob, pids


def _said_once(err: str) -> None:
    """At most one warning line and one error line, nothing else (no traceback)."""
    lines = err.splitlines()
    assert all(line.startswith(("warning: ", "error: ")) for line in lines), err
    assert sum(line.startswith("warning: ") for line in lines) <= 1, err
    assert sum(line.startswith("error: ") for line in lines) <= 1, err
