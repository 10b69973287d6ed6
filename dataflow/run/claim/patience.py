"""Patience with a store that fails in a way that passes (busy, a connection lost, a
server restarting): a call tried again with backoff, for up to the store's patience."""

from __future__ import annotations

import time
from collections.abc import Callable

from ...errors import RunFenced, StoreUnavailable
from ...store import DRIVER_ERRORS, Store

Failed = Callable[[BaseException, float], None]  # told of a store failure that passed


def patiently(
    store: Store, call: Callable[[], object], patience: float = 1.0, failed: Failed | None = None
) -> object:
    """``call()``, tried again with backoff while the store fails in a way that passes,
    for up to the store's patience (times ``patience``) after the first failure; a
    lasting failure is raised. ``failed(error, seconds)`` is told of one that passed."""
    return retried(call, store.passing, patience * store.patience, failed)


def retried(
    call: Callable[[], object],
    passing: Callable[[BaseException], bool],
    seconds: float,
    failed: Failed | None = None,
) -> object:
    """``call()``, tried again with backoff (0.05 s, doubled up to 2 s) while it fails with
    a store error that is ``passing``, for up to ``seconds`` after the first failure."""
    first: tuple[float, BaseException] | None = None
    delay = 0.05
    while True:
        try:
            done = call()
        except RunFenced:
            raise
        except (StoreUnavailable, *DRIVER_ERRORS) as exc:
            if not passing(exc):
                raise
            first = first or (time.monotonic(), exc)
            if time.monotonic() + delay > first[0] + seconds:
                raise  # one line says it all
            time.sleep(delay)
            delay = min(2 * delay, 2.0)
            continue
        if first and failed is not None:
            failed(first[1], time.monotonic() - first[0])
        return done


def asked(store: Store, call: Callable[[], object]) -> object:
    """``call()`` (a read) in a transaction of its own, tried again as :func:`patiently`
    tries: a session the server ended while it was idle is opened again."""

    def attempt() -> object:
        with store.transaction():
            return call()

    return patiently(store, attempt)
