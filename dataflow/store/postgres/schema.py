"""The PostgreSQL store's schema, as ordered migrations; table ``dataflow_schema`` holds
how many were applied. Migration ``n`` is the literal file ``migrations/000n.sql`` of this
package, frozen once released (:mod:`dataflow.store.migrations`).

The three seed tables keep the seed's columns in the seed's order (``modified`` is a
``timestamp``, so the seed's ``now()`` works in positional inserts). ``candidate``, our
index of work, is kept current by triggers written in PL/pgSQL and stored in the database
itself, so a write by ``psql`` or any other client is honoured by the next claim exactly
as one of ours (the rule, written once for both stores: :mod:`dataflow.store.offers`).

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
from ..offers import OFFER_LOCKS, OFFERS, offer_lock

__all__ = ["CAP", "OFFERS", "OFFER_LOCKS", "VERSION", "migration", "migrations", "offer_lock"]

# advisory lock spaces (the first of two int4 keys): a chunk's offers (the lock the rule's
# triggers take, :mod:`dataflow.store.offers`), a job's cap
CAP = 2
VERSION = 10  # the number of files in migrations/


def migration(version: int) -> str:
    """The text of migration ``version`` (1 to :data:`VERSION`)."""
    return read(__package__, version)


def migrations() -> tuple[str, ...]:
    """Every migration, in order: version ``n`` is item ``n - 1``."""
    return read_all(__package__)
