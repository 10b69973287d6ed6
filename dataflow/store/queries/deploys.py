"""Deploys of a project (table ``deploy``): ``utility apply`` records one, ``utility
deploys`` lists them, over every backend's own named queries. Recording one is each
backend's own (its clock, how it returns the new deployid)."""

from __future__ import annotations

from typing import Any

from ..base import Row
from . import NamedQueries


class DeployQueries:
    conn: Any
    q: NamedQueries

    def deploys(self, limit: int) -> list[Row]:
        """The newest ``limit`` deploys, newest first."""
        return [dict(row) for row in self.conn.execute(self.q.deploys, (limit,))]
