"""The toolkit as a library: what ``RunJob`` and ``utility`` do, called from Python (a
notebook, an Airflow task, a Dagster op) without a subprocess. docs/api.md tells each
function's arguments, result and errors.

Every function opens the store it is given (``db``: a file's path or a ``postgresql://``
URL; None: ``$DATAFLOW_DB``, else ``./dataflow.db``), does one thing and returns what it
did as a small value. It prints nothing and never exits: a problem a user can fix is a
:class:`~dataflow.errors.DataflowError` (its message the one line the CLIs print), a
store that fails is its driver's error. The CLIs parse, call these and print.

May import: run, ops, store, errors, crypto, dataids, policy, landing.

RunJob imports this package on every cron tick: the operator commands (``ops``), Spark
and the alerts are imported inside the functions that use them, never at the top of a
module here (tests/test_startup_imports.py checks a plain run's imports).
"""

from __future__ import annotations

from .running import Drained, JobRun, Preview, check_options, drain, preview, run_job

TYPE_CHECKING = False  # typing's flag, without importing typing (a run's start)
if TYPE_CHECKING:
    from typing import Any

    from .folders import FolderDrained, drain_folder
    from .operations import (
        Checked,
        Lineage,
        apply,
        check,
        endjob,
        explain,
        hold,
        lineage,
        mark_ready,
        plan,
        purge,
        recover,
        release,
        resubmit,
        status,
    )
    from .streams import StreamLaunch, stream_launch

# the names of the modules RunJob's cron tick does not need, imported at their first use
_LATER = {
    "folders": ("FolderDrained", "drain_folder"),
    "operations": (
        "Checked", "Lineage", "apply", "check", "endjob", "explain", "hold", "lineage",
        "mark_ready", "plan", "purge", "recover", "release", "resubmit", "status",
    ),
    "streams": ("StreamLaunch", "stream_launch"),
}  # fmt: skip
_MODULE_OF = {name: module for module, names in _LATER.items() for name in names}


def __getattr__(name: str) -> Any:
    """A name of :mod:`.folders`, :mod:`.operations` or :mod:`.streams`, their module
    imported at its first use (~0.1 ms each that a cron tick's RunJob does not pay)."""
    module = _MODULE_OF.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if module == "folders":
        from . import folders as found
    elif module == "operations":
        from . import operations as found
    else:
        from . import streams as found
    globals()[name] = value = getattr(found, name)
    return value


__all__ = [
    "Checked",
    "Drained",
    "FolderDrained",
    "JobRun",
    "Lineage",
    "Preview",
    "StreamLaunch",
    "apply",
    "check",
    "check_options",
    "drain",
    "drain_folder",
    "endjob",
    "explain",
    "hold",
    "lineage",
    "mark_ready",
    "plan",
    "preview",
    "purge",
    "recover",
    "release",
    "resubmit",
    "run_job",
    "status",
    "stream_launch",
]
