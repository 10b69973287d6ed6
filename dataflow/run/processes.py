"""Processes of a run that escaped its chunk lock.

Every process of a run inherits the variable ``DATAFLOW_RUN=<token>`` (the store and
the run's history row). A helper the job detaches with its descriptors closed (for
example ``subprocess.Popen(..., start_new_session=True)``: new session, new process
group, no lock descriptor) still carries it, so a run is live while any process with
its token exists. The boundary: a process that drops its environment (``env -i``, an
``execve`` with a clean one) *and* closes the lock descriptor is not seen, nor one
whose environment we may not read (another user's, unless RunJob runs as root).

Reading every ``/proc/PID/environ`` costs a few milliseconds, so it is done only
when a lock alone says "dead" or a finished chunk is about to start again.
"""

from __future__ import annotations

import os

VARIABLE = "DATAFLOW_RUN"


def token(store_identity: str, runid: int) -> str:
    """The value of ``DATAFLOW_RUN`` for one run of one store."""
    return f"{store_identity}:{runid}"


def carrying(tokens: set[str]) -> set[str]:
    """The tokens that some live process on this host carries in its environment."""
    if not tokens:
        return set()
    wanted = {f"{VARIABLE}={t}".encode(): t for t in tokens}
    found: set[str] = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/environ", "rb") as file:
                variables = file.read().split(b"\0")
        except OSError:  # gone, or another user's
            continue
        found.update(wanted[v] for v in variables if v in wanted)
        if len(found) == len(tokens):
            break
    return found
