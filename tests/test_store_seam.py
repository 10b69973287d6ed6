"""The store's seam stays narrow: what a new backend must write (the abstract methods of
``dataflow.store.connector.Connector``) is at most 20 methods, every backend writes each
one itself, every operation is one concrete method of ``Store``, and a backend replaces
an operation only with a docstring that says why. The operations that once were each
backend's own (an insert that returns its id, the records stamped at the store's clock)
run the same on both stores."""

from __future__ import annotations

import inspect
from abc import abstractmethod

import pytest

from dataflow.store.base import Store
from dataflow.store.connector import Connector
from dataflow.store.leases import LeaseStore
from dataflow.store.postgres.store import PostgresStore
from dataflow.store.sqlite.store import SqliteStore

TARGET = 20  # issue 46: what a new backend writes
BACKENDS = {"sqlite": SqliteStore, "postgres": PostgresStore}


def seam(cls: type) -> set[str]:
    """The methods a backend subclassing ``cls`` must write."""
    return set(cls.__abstractmethods__)


def too_wide(cls: type) -> list[str]:
    """What makes ``cls`` a wider seam than the target: its count if above it, and the
    abstract methods declared anywhere but the seam class (a reader finds them there)."""
    wrong = []
    if len(seam(cls)) > TARGET:
        wrong.append(f"{len(seam(cls))} abstract methods (at most {TARGET})")
    for name in sorted(seam(cls)):
        declared = next(c for c in cls.__mro__ if name in vars(c))
        if declared is not Connector:
            wrong.append(f"{name} is declared by {declared.__name__}, not the Connector")
    return wrong


def test_a_new_backend_writes_at_most_twenty_methods_all_on_the_seam():
    assert too_wide(Store) == []
    assert seam(Store) == seam(Connector)


def test_a_backend_with_leases_writes_the_leases_seven_more_and_twenty_in_all():
    assert len(seam(LeaseStore)) <= TARGET
    assert seam(LeaseStore) - seam(Store) == {
        "try_run_locks",
        "drop_run_locks",
        "run_locks_held",
        "renew_leases",
        "release_leases",
        "live_leases",
        "keep_alive",
    }


def test_the_count_can_fail():
    wide = {f"extra{i}": abstractmethod(lambda self: None) for i in range(TARGET + 1)}
    found = too_wide(type("Wide", (Store,), wide))
    assert found[0] == f"{len(seam(Store)) + TARGET + 1} abstract methods (at most {TARGET})"
    assert "extra0 is declared by Wide, not the Connector" in found


@pytest.mark.parametrize("backend", BACKENDS)
def test_each_backend_writes_every_method_of_the_seam_itself(backend):
    cls = BACKENDS[backend]
    assert cls.__abstractmethods__ == frozenset()
    for name in seam(LeaseStore if issubclass(cls, LeaseStore) else Store):
        owner = next(c for c in cls.__mro__ if name in vars(c))
        assert owner.__module__.startswith(f"dataflow.store.{backend}."), name


def _operations() -> dict[str, object]:
    """Store's public methods that are not the seam's: the operations."""
    return {
        name: member
        for name, member in inspect.getmembers(Store, inspect.isfunction)
        if not name.startswith("_") and name not in seam(Store)
    }


def test_every_operation_is_one_documented_concrete_method():
    found = _operations()
    assert {"finish", "history", "add_deploy", "start_run", "purgeable_runs"} <= set(found)
    assert [name for name, method in found.items() if not inspect.getdoc(method)] == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_backend_replaces_an_operation_only_saying_why(backend):
    cls = BACKENDS[backend]
    replaced = {
        name
        for name in _operations()
        for c in cls.__mro__
        if name in vars(c) and c.__module__.startswith(f"dataflow.store.{backend}.")
    }
    if backend == "sqlite":  # SQLite's forms are Store's, but for a write waited a moment
        assert replaced <= {"settling"}
    else:
        assert {"finish", "start_runs", "history"} <= replaced
    undocumented = [
        name
        for name in sorted(replaced)
        if not inspect.getdoc(next(vars(c)[name] for c in cls.__mro__ if name in vars(c)))
    ]
    assert undocumented == []


@pytest.mark.both_stores
def test_shared_inserts_return_the_id_the_store_gave(store):
    with store.transaction():
        first = store.add_deploy("host-a", "/p", "d1", None, "1 added")
        second = store.add_deploy("host-b", "/p", "d2", "abc", "1 changed")
        runid = store.start_run(jobid="work", dataid="1", attempt=1)
    assert second > first
    newest = store.deploys(1)[0]
    assert (newest["deployid"], newest["host"], newest["revision"]) == (second, "host-b", "abc")
    assert store.last_run("work", "1")["runid"] == runid


@pytest.mark.both_stores
def test_an_action_is_stamped_at_the_stores_clock(store):
    action = dict.fromkeys(("host", "who", "client", "action", "jobid", "dataid", "detail"))
    with store.transaction():
        store.add_action(
            **{**action, "host": "a", "who": "ops", "action": "endjob", "jobid": "work"}
        )
    found = store.actions("work")
    assert [(a["who"], a["action"]) for a in found] == [("ops", "endjob")]
    assert found[0]["acted"]  # the store's clock, whoever wrote it
