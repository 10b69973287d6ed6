"""The tables a store is made of, with their columns (re-exported by :mod:`.base`)."""

from __future__ import annotations

DATASET_COLUMNS = (
    *("datasetid", "hostname", "database", "schemaname", "tablename", "username"),
    "encryptedpass",
)
# The tables a store is made of, with their columns, as ``utility copy-store`` copies
# them (``candidate`` is not copied: the target's triggers rebuild it from these).
TABLES = {
    "dataset": DATASET_COLUMNS,
    "job": ("jobid", "itemtype", "datasetid", "itemvalue", "modified"),
    "datastatus": ("datasetid", "jobid", "dataid", "locktype", "status", "modified"),
    "run": (
        *("runid", "jobid", "dataid", "attempt", "retry", "status", "started", "ended"),
        *("duration", "exitcode", "signal", "pid", "host", "command", "logpath", "reason"),
        *("validation", "rerun", "token"),
    ),
    "hold": ("jobid", "dataid", "datasetid", "previous", "since"),
    "deploy": ("deployid", "deployed", "host", "project", "digest", "revision", "changes"),
    "runlog": ("runid", "updated", "size", "kept", "done", "body"),  # after run: its key
    "action": (
        *("actionid", "acted", "host", "who", "client", "action", "jobid", "dataid"),
        "detail",
    ),
}
