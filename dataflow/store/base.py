"""The store: every operation the rest of the toolkit may ask of a store, in one class.

Domain code (claim and finish rules, operator commands) calls these named operations and
never sees SQL or a driver. :class:`Store` is made of the operations of
:mod:`dataflow.store.queries`, one module per topic (the claim and finish, registration,
holds, history, views, whole tables, deploys, operators' records, metrics), each a
concrete method that runs the backend's named query of the same name; and of the seam a
backend writes (:class:`dataflow.store.connector.Connector`: opening, transactions,
placeholders, what a driver error means). Finding an operation is two steps: its method
here, then its named query in ``<backend>/queries/*.sql``. Every operation that writes
runs inside the caller's :meth:`Store.transaction`.
"""

from __future__ import annotations

from .address import Address, busy_timeout, is_url, liveness_timeout, locate, same_store, shown  # noqa: F401 (the interface's names)
from .columns import DATASET_COLUMNS, TABLES  # noqa: F401 (the interface's names)
from .connector import DRIVER_ERRORS, Connector  # noqa: F401 (the interface's names)
from .queries.chunks import ChunkQueries
from .queries.deploys import DeployQueries
from .queries.history import HistoryQueries
from .queries.holds import HoldQueries
from .queries.metrics import MetricQueries
from .queries.operator import OperatorQueries
from .queries.registration import RegistrationQueries
from .queries.tables import TableQueries
from .queries.views import ViewQueries
from .records import ChunkRow, JobItem, Row, capped, now, zoned_now  # noqa: F401 (the interface's names)


class Store(
    ChunkQueries,
    RegistrationQueries,
    HoldQueries,
    HistoryQueries,
    ViewQueries,
    TableQueries,
    DeployQueries,
    OperatorQueries,
    MetricQueries,
    Connector,
):
    """An open store (a backend's subclass: :func:`dataflow.store.open_store` picks it)."""

    def __enter__(self) -> Store:
        return self

    def __exit__(self, kind: object, exc: BaseException | None, traceback: object) -> None:
        """Close; a driver error on its way out says what it means for the store."""
        self.close()
        if exc is not None and (meaning := self.failure(exc)):
            raise meaning from None
