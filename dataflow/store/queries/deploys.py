"""Deploys of a project (table ``deploy``): ``utility apply`` records one, ``utility
deploys`` lists them, over every backend's own named queries."""

from __future__ import annotations

from ..records import Row, zoned_now
from . import NamedQueries

TYPE_CHECKING = False  # typing's flag, without importing typing (a run's start)
if TYPE_CHECKING:
    from typing import Any


class DeployQueries:
    conn: Any
    q: NamedQueries

    def add_deploy(
        self, host: str, project: str, digest: str, revision: str | None, changes: str
    ) -> int:
        """Record a deploy at the store's clock (inside the caller's transaction): the host
        that applied, the project folder, its project file's sha256, the git commit (None:
        not a checkout), a one-line summary of the changes. Returns its deployid. The time
        is this host's, with its UTC offset as the run history's times; a server's query
        takes its own clock instead (its column's default)."""
        params = {
            "deployed": zoned_now(),
            "host": host,
            "project": project,
            "digest": digest,
            "revision": revision,
            "changes": changes,
        }
        return self.inserted_id(self.q.add_deploy, params)

    def deploys(self, limit: int) -> list[Row]:
        """The newest ``limit`` deploys, newest first, each with every column of ``deploy``."""
        return [dict(row) for row in self.conn.execute(self.q.deploys, (limit,))]
