"""The lease's tests share (test_lease, test_liveness, test_keeper_faults, test_publish,
test_fenced_output): the job whose own ``flock`` per chunk judges (a second run beside a
live process of the first writes ``OVERLAP`` into the ledger), a helper that leaves, and
the pids a job writes."""

from __future__ import annotations

import sys

from support import wait_for, written
from support.hosts import environ_of, holder_of

# the job: one flock per chunk, held by every process it starts (descriptor 9)
JOB = """
exec 9>>"flock.$dataid"
flock -n 9 || echo "OVERLAP $dataid" >> ledger
echo "$dataid $$" >> ledger
echo $$ > job.pid
"""


RETRY = "insert into job (jobid, itemtype, itemvalue) values ('work', 'retries', '1')"


WAIT_GO = "until [ -e go ]; do sleep 0.1; done"


# a helper that leaves: a new session, every descriptor closed but the flock's (so not the
# chunk lock's), the environment kept (DATAFLOW_RUN); it ends when told
HELPER = (
    f"setsid {sys.executable} -c 'import os, time\n"
    "os.closerange(3, 9); os.closerange(10, 65536)\n"
    'open("helper.pid", "w").write(f"{os.getpid()}\\n")\n'
    'while not os.path.exists("go"): time.sleep(0.1)\' </dev/null >/dev/null 2>&1 &\n'
    "until [ -s helper.pid ]; do sleep 0.05; done"
)


def _ledger(tmp_path) -> list[str]:
    path = tmp_path / "ledger"
    return path.read_text().splitlines() if path.exists() else []


def _pid(tmp_path, name: str) -> int:
    wait_for(lambda: written(tmp_path / name), what=name)
    return int((tmp_path / name).read_text())


def _holder_of(runner) -> int:
    """The lease holder RunJob ``runner`` reaches: its host's (DATAFLOW_STATE)."""
    state = environ_of(runner.pid)[b"DATAFLOW_STATE"].decode()
    wait_for(lambda: holder_of(state), what="the lease holder")
    found = holder_of(state)
    assert found is not None
    return found
