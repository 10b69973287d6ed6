"""What a store keeps for its operators beside the rules' tables: deploys of a project,
each run's log as its host sent it, and the actions taken by hand. Part of the store's
interface (:class:`dataflow.store.base.Store`); the queries are in :mod:`.queries`."""

from __future__ import annotations

from abc import ABC, abstractmethod

Row = dict[str, object]


class Records(ABC):
    # -- deploys of a project (utility apply, utility deploys) ----------------------------

    @abstractmethod
    def add_deploy(
        self, host: str, project: str, digest: str, revision: str | None, changes: str
    ) -> int:
        """Record a deploy at the store's clock (inside the caller's transaction): the host
        that applied, the project folder, its project file's sha256, the git commit (None:
        not a checkout), a one-line summary of the changes. Returns its deployid."""

    @abstractmethod
    def deploys(self, limit: int) -> list[Row]:
        """The newest ``limit`` deploys, newest first, each with every column of ``deploy``."""

    # -- what an operator reads of any host (:mod:`.queries.operator`) ---------------------

    @abstractmethod
    def put_log(self, runid: int, size: int, kept: int, body: bytes, done: bool) -> bool:
        """Keep the end of a run's log (``body``: its last ``kept`` of ``size`` bytes,
        compressed); only a RUNNING run's until ``done``, never again after."""

    @abstractmethod
    def run_output(self, runid: int) -> Row | None: ...

    @abstractmethod
    def add_action(self, **action: str | None) -> None:
        """Record an action taken by hand (host, who, client, action, jobid, dataid,
        detail) at the store's clock."""

    @abstractmethod
    def actions(self, jobid: str | None, dataid: str | None, limit: int = 50) -> list[Row]: ...
