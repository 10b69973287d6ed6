"""The store's schema, as ordered migrations. ``PRAGMA user_version`` = migrations applied.

Migration ``n`` is the literal file ``migrations/000n.sql`` of this package, frozen once
released (:mod:`dataflow.store.migrations`): a fresh store applies them all in order, an
older one those it lacks. A schema change is a new file, never an edit of an old one.

The three seed tables keep the seed's columns in the seed's order, so the
quickstart's positional and named inserts run unchanged.

``candidate`` is our index of work: (job, dataid) pairs whose inputs were all
READY when last touched and that the job has not produced. Triggers keep it
current for every write, including a user's ``utility dml``, so a claim reads
the smallest candidate instead of stepping over every chunk already done. It
may hold stale pairs (an input was later resubmitted, say); the claim checks
each pair exactly and drops the stale ones. The triggers use plain SQL only (since
version 7), so that any SQLite client may write the store; the rule they follow is
written once for both stores in :mod:`dataflow.store.offers`.
"""

from __future__ import annotations

from ..migrations import read, read_all
from .connection import statements

VERSION = 16  # the number of files in migrations/


def migration(version: int) -> str:
    """The text of migration ``version`` (1 to :data:`VERSION`)."""
    return read(__package__, version)


def migrations() -> tuple[str, ...]:
    """Every migration, in order: version ``n`` is item ``n - 1``."""
    return read_all(__package__)


# the tables a migration rebuilds (by its version): indexes and triggers a user made on
# them are put back after it
REBUILDS = {5: "datastatus"}


def ours() -> frozenset[str]:
    """Every index and trigger a migration makes or drops; any other one is a user's."""
    import re

    made = "\n".join(sql for script in migrations() for sql in statements(script))
    return frozenset(re.findall(r"(?:INDEX|TRIGGER) (?:IF (?:NOT )?EXISTS )?(\w+)", made))
