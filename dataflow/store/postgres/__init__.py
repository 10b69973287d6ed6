"""The PostgreSQL backend: one database shared by RunJobs on many hosts; its schema,
migrations, all its SQL, and the run locks that keepers hold (a store.leases.LeaseStore).

May import: store.base, store.connector, store.leases, store.migrations, store.address, store.queries, store.offers, errors, dataids.

Its driver is psycopg 3, an optional extra (``pip install 'opendataflow[postgres]'``):
only a ``postgresql://`` address imports it.
"""

from __future__ import annotations


def backend():
    """The store class; a clear error when the driver is not installed."""
    try:
        from .store import PostgresStore
    except ImportError as exc:
        if exc.name not in ("psycopg", "psycopg_binary", "psycopg_c"):
            raise
        from ...errors import StoreUnavailable

        why = "its driver is not installed: pip install 'opendataflow[postgres]'"
        raise StoreUnavailable("use", "a PostgreSQL store", why) from None
    return PostgresStore


__all__ = ["backend"]
