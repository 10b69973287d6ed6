"""What listens to a RunJob's drain besides its report: its alerts (``alerts``, sent by
the child process ``alertsend``) and its OpenLineage run events (``lineagefeed``, sent by
``lineagesend``), each imported only where it has something to do (this module).

A cron tick that runs one chunk which ends well, or finds nothing to do, is the
toolkit's most common call: it imports nothing of :mod:`.alerts` (until an event may be
news: :func:`news`) nor of :mod:`.lineagefeed` (unless OpenLineage is
configured, which :func:`lineage_configured` reads without it). benchmarks/findings.md
measures what each import costs; tests/test_startup_imports.py checks what is left out.

May import: run.process, store, errors, dataids, layout, policy.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping

TYPE_CHECKING = False  # typing's flag, without importing typing (a run's start)
if TYPE_CHECKING:
    from typing import Any

# where the openlineage-python client reads its configuration file
CONFIG_FILES = ("openlineage.yml", os.path.join("~", ".openlineage", "openlineage.yml"))


def lineage_configured(environ: Mapping[str, str] | None = None) -> bool:
    """Is the openlineage-python client configured, as it reads its configuration:
    ``OPENLINEAGE_URL``, ``OPENLINEAGE_CONFIG``, ``OPENLINEAGE__TRANSPORT...`` variables
    or an ``openlineage.yml`` in the working folder or ``~/.openlineage``; and not
    turned off by ``OPENLINEAGE_DISABLED=true``?"""
    environ = os.environ if environ is None else environ
    if environ.get("OPENLINEAGE_DISABLED", "").strip().lower() == "true":
        return False
    if environ.get("OPENLINEAGE_URL") or environ.get("OPENLINEAGE_CONFIG"):
        return True
    if any(name.startswith("OPENLINEAGE__TRANSPORT") for name in environ):
        return True
    return any(os.path.isfile(os.path.expanduser(path)) for path in CONFIG_FILES)


def news(event: Any) -> bool:
    """May ``event`` be worth an alert? A run abandoned, fenced off or ended FAILED, or a
    retry that ended (a recovery): what :meth:`.alerts.Pager.see` looks at (it skips the
    rest alike); never a first try that ended well."""
    if event.kind in ("abandoned", "fenced"):
        return True
    return event.kind == "ended" and (event.status == "FAILED" or event.claim.attempt != 1)


class Alerts:
    """A drain's pager (:class:`.alerts.Pager`), made at the first event that may be
    news: until then, and for a drain that never has any, nothing is imported."""

    def __init__(self, store: Any, job: Any) -> None:
        self.store, self.job = store, job
        self._pager: Any = None

    def watch(self, notify: Callable[[Any], None]) -> Callable[[Any], None]:
        """``notify``, which also shows each event to the pager."""

        def both(event: Any) -> None:
            notify(event)
            self.see(event)

        return both

    def see(self, event: Any) -> None:
        if self._pager is None:
            if not news(event):
                return
            from .alerts import Pager

            self._pager = Pager(self.store, self.job)
        self._pager.see(event)

    def send(self) -> str | None:
        """What the pager collected, sent (a warning line if it did not reach every
        URL); None where it was never needed. Never raises."""
        return self._pager.send() if self._pager is not None else None


class _Quiet:
    """The lineage feed where OpenLineage is not configured: nothing at all."""

    def watch(self, notify: Callable[[Any], None]) -> Callable[[Any], None]:
        return notify

    def close(self) -> None:
        return None


def lineage(job: Any, env: Any, store: Any) -> Any:
    """The OpenLineage feed of a RunJob's drain (:func:`.lineagefeed.feed`), or one that
    does nothing, its module not imported, where OpenLineage is not configured."""
    if not lineage_configured():
        return _Quiet()
    from .lineagefeed import feed

    return feed(job, env, store)
