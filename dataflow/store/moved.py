"""A retired store: the marker ``copy-store --retire`` leaves in the store it copied.

The marker is a setting of the store-wide pseudo-job ``*`` (table job, item ``retired``,
its value ``{"to": TARGET, "on": DATE}``, the target's address without its password), so
it needs no schema of its own and reads the same on both backends. ``open_store`` refuses
a retired store unless its caller reads it for audit (``retired_ok``).
"""

from __future__ import annotations

from ..errors import StoreMoved
from .base import Store

STORE_WIDE = "*"  # the pseudo-job of the store-wide settings (as in run.listeners.alerts)
RETIRED = "retired"


def moved_to(store: Store) -> tuple[str, str] | None:
    """Where the store moved and when (``copy-store --retire``), or None."""
    for item in store.job_items(STORE_WIDE):
        if item.itemtype == RETIRED and item.itemvalue:
            import json  # only a retired store's marker: not on every open

            try:
                marker = json.loads(item.itemvalue)
                return str(marker["to"]), str(marker["on"])
            except (ValueError, KeyError, TypeError):
                return item.itemvalue, "an unknown date"
    return None


def refuse_if_moved(store: Store) -> None:
    """Raise :class:`StoreMoved` on a retired store."""
    if found := moved_to(store):
        raise StoreMoved(*found)


def retire(store: Store, target: str, on: str) -> None:
    """Mark the store as moved to ``target`` (shown without its password), inside the
    caller's transaction."""
    import json

    kept = [(i.itemtype, i.datasetid, i.itemvalue) for i in _others(store)]
    store.put_job(STORE_WIDE, [*kept, (RETIRED, None, json.dumps({"to": target, "on": on}))])


def unretire(store: Store) -> bool:
    """Remove the marker (inside the caller's transaction); was there one?"""
    items = store.job_items(STORE_WIDE)
    kept = _others(store)
    if len(kept) == len(items):
        return False
    store.put_job(STORE_WIDE, [(i.itemtype, i.datasetid, i.itemvalue) for i in kept])
    return True


def _others(store: Store) -> list:
    return [i for i in store.job_items(STORE_WIDE) if i.itemtype != RETIRED]
