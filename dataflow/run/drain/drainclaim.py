"""A drain's claim: patient with the store, and looking again, before the drain ends, at
chunks another drain gave back a moment ago (their keeper lets go of their run locks at
once, :func:`..claim.liveness.released`; until it has, a claim passes them over)."""

from __future__ import annotations

import time
from collections.abc import Callable

from ...store import Store
from ..claim import patience
from ..claim.claims import ClaimResult, claim
from ..claim.lifecycle import Job

CLAIM_PATIENCE = 2  # a drain's claim waits this many times the store's patience (ends compete)
LOOK_AGAIN_S, LOOKS = 0.25, 4  # an idle drain looks again this often, this many times


def claim_patiently(
    store: Store,
    job: Job,
    *,
    command: str,
    recover_dead: bool,
    count: int,
    idle: Callable[[], bool],
    failed: patience.Failed,
) -> ClaimResult:
    """A drain's :func:`claim`, patient with the store (for :data:`CLAIM_PATIENCE` times
    its patience; ``failed`` told). If nothing was claimed while chunks were passed over
    (``passed``: given back a moment ago), and the drain is ``idle()`` (it ends then; not
    if stopped), it looks again each :data:`LOOK_AGAIN_S`, up to :data:`LOOKS` times."""

    def once(recover: bool) -> ClaimResult:
        found = patience.patiently(
            store,
            lambda: claim(store, job, command=command, recover_dead=recover, count=count),
            CLAIM_PATIENCE,
            failed=failed,
        )
        assert isinstance(found, ClaimResult)
        return found

    result, looks = once(recover_dead), 0
    while result.claim is None and result.passed and looks < LOOKS and idle():
        time.sleep(LOOK_AGAIN_S)
        looks += 1
        if idle():  # (a signal during the sleep: no claim; dead runs were just recovered)
            result = once(False)
    return result
