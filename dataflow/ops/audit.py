"""Who changes chunks by hand, and the store's audit of it (table ``action``): the CLI
acts for the OS user, the live board for the label of a write token and the client's
address. An action's rows are written in the transaction that makes its change, so the
audit holds every change made by hand and nothing that did not happen."""

from __future__ import annotations

import getpass
import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from ..store import Store
from ..store.address import host_name


class Changed(Protocol):
    jobid: str
    dataid: str
    before: str
    after: str
    note: str


@dataclass(frozen=True)
class Actor:
    """Who acts: ``who`` (an OS user, a token's label) and, for a request, ``client``
    (its address)."""

    who: str
    client: str | None = None

    def record(
        self, store: Store, action: str, jobid: str | None, dataid: str | None, detail: str
    ) -> None:
        """One row of the audit (inside the caller's transaction, if any)."""
        store.add_action(
            host=host_name(), who=self.who, client=self.client, action=action, jobid=jobid,
            dataid=dataid, detail=detail,
        )  # fmt: skip

    def record_changes(self, store: Store, action: str, changes: Iterable[Changed]) -> None:
        """A row for each chunk ``changes`` changed (one left unchanged is no action)."""
        for change in changes:
            if change.after != "unchanged":
                self.record(store, action, change.jobid, change.dataid, describe(change))


def describe(change: Changed) -> str:
    """A change in words: ``FAILED -> RESUBMIT (downstream of clean)``."""
    note = f" ({change.note})" if change.note else ""
    return f"{change.before} -> {change.after}{note}"


def operator() -> Actor:
    """The OS user running this process: who the CLI's actions are recorded for."""
    try:
        return Actor(getpass.getuser())
    except (KeyError, OSError):  # a uid without a name (a container's)
        return Actor(f"uid {os.getuid()}")
