"""The PostgreSQL store's schema, as ordered migrations; table ``dataflow_schema`` holds
how many were applied. Migration ``n`` is the literal file ``migrations/000n.sql`` of this
package, frozen once released (:mod:`dataflow.store.migrations`).

The three seed tables keep the seed's columns in the seed's order (``modified`` is a
``timestamp``, so the seed's ``now()`` works in positional inserts). ``candidate``, our
index of work, is kept current by triggers written in PL/pgSQL and stored in the database
itself, so a write by ``psql`` or any other client is honoured by the next claim exactly
as one of ours (see :mod:`dataflow.store.sqlite.schema` for the rules: the same here).

Writers are not serialized as in SQLite: two transactions that make the inputs of one
chunk READY at the same time could each miss the other's row and offer nothing. The
trigger therefore first takes the offer locks of the chunks a statement wrote
(transaction-level advisory locks); a claim takes a chunk's lock before it checks the
candidate. Since version 2 an offer lock covers one of :data:`OFFER_LOCKS` buckets of
dataids, and the trigger runs once per statement and takes its locks in order: a
statement that writes tens of thousands of chunks (a producer marking a backlog READY,
``copy-store``) holds at most that many locks, where one lock per dataid ran out of
PostgreSQL's shared lock table (64 per connection by default), and two such statements
never deadlock on them.
"""

from __future__ import annotations

from ..migrations import read, read_all

# advisory lock spaces (the first of two int4 keys): a chunk's offers, a job's cap. The
# offer lock is also written out in the triggers of migration 0002: a change is a new
# migration (tests/test_migrations.py checks that both agree)
OFFERS, CAP = 1, 2
OFFER_LOCKS = 1024  # buckets of dataids, one offer lock each (version 2)


def offer_lock(dataid: str) -> str:
    """The two keys of the offer lock of the dataid that SQL expression ``dataid`` gives."""
    return f"{OFFERS}, {_bucket(dataid)}"


def _bucket(dataid: str) -> str:
    return f"hashtext({dataid}) & {OFFER_LOCKS - 1}"


VERSION = 8  # the number of files in migrations/


def migration(version: int) -> str:
    """The text of migration ``version`` (1 to :data:`VERSION`)."""
    return read(__package__, version)


def migrations() -> tuple[str, ...]:
    """Every migration, in order: version ``n`` is item ``n - 1``."""
    return read_all(__package__)
