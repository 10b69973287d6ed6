"""What a store whose liveness is ``"lease"`` adds to :class:`Store`: run locks that a
host's lease holder holds (dataflow.run.lease.keeper, dataflow.run.lease.holder), and the runs'
heartbeats every host sees. Only the liveness of leases (``dataflow.run.claim.liveness``) and
the holder ask for them."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence

from .base import Address, Store


class LeaseStore(Store):
    liveness = "lease"

    @classmethod
    def open_session(cls, address: Address) -> LeaseStore:
        """The store for what needs a session of its own (a lease holder's run locks, heartbeats
        and session settings): where the store's address is a pooler's in transaction mode,
        a connection straight to the server; else :meth:`Store.open`'s."""
        return cls.open(address)

    # Run locks: a host's lease holder holds them, one session-level lock per chunk.

    @abstractmethod
    def try_run_locks(self, chunks: Sequence[tuple[str, str]]) -> list[bool]:
        """Take each chunk's run lock for this connection, if nobody holds it."""

    @abstractmethod
    def drop_run_locks(self, chunks: Sequence[tuple[str, str]]) -> None: ...

    @abstractmethod
    def run_locks_held(self, chunks: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        """Those chunks whose run lock a live run's holder holds."""

    # Leases: a run's heartbeat, renewed by its host's lease holder.

    @abstractmethod
    def renew_leases(self, runids: Sequence[int]) -> dict[int, bool]:
        """Renew these runs' heartbeats (a ping when there are none), never waiting for a
        row another transaction holds; returns the runs whose lease was not revoked, each
        True if renewed now (False: its row was held elsewhere)."""

    @abstractmethod
    def release_leases(self, runids: Sequence[int], wait: bool = True) -> set[int]:
        """No process of these runs lives: their leases end now. Without ``wait`` a row
        another transaction holds is not waited for: those still leased are returned."""

    @abstractmethod
    def live_leases(
        self, chunks: Sequence[tuple[str, str]], revoke: bool = False
    ) -> set[tuple[str, str]]:
        """Those chunks a run holds a fresh lease on; with ``revoke`` (in a write
        transaction) the stale leases of the others are revoked."""

    @abstractmethod
    def keep_alive(self) -> None:
        """Make the server end this connection's session once it stops pinging, and name
        it (``application_name``) the lease holder's of this host."""
