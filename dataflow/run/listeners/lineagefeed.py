"""OpenLineage run events (docs/lineage.md): each run RunJob starts is told to an
OpenLineage receiver (Marquez, DataHub, ...) as START when its job starts, and COMPLETE,
FAIL or ABORT when it ends, with its job, its input and output datasets and its chunk.

On only where the openlineage-python client is configured
(:func:`.listeners.lineage_configured`); otherwise neither this module nor the client is
imported. Events are sent by a
child process (:mod:`.lineagesend`, started at the first run: an idle RunJob starts
none) fed one JSON line each through a pipe that never blocks: a receiver that is down, slow or hangs never fails a run nor holds it up, and
RunJob waits at most :func:`flush_timeout` for the events still unsent when its drain has
ended. What went wrong is one line, said once, by :meth:`Feed.close`'s caller.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from ... import layout

NAMESPACE_ENV = "OPENLINEAGE_NAMESPACE"  # the jobs' namespace, if not NAMESPACE
NAMESPACE = "opendataflow"
FLUSH_S = 3.0  # at its end, RunJob waits this long at most for the events still unsent
FLUSH_ENV = "DATAFLOW_LINEAGE_TIMEOUT"  # ...or this many seconds (0.5 to 600)
SENDER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "lineagesend.py")
MISSING = "OpenLineage events need: pip install opendataflow[lineage]"
ENDS = {"READY": "COMPLETE", "RESUBMIT": "COMPLETE"}  # any other status a run ends with: FAIL


def flush_timeout() -> float:
    """Seconds RunJob gives its sender at its end: ``DATAFLOW_LINEAGE_TIMEOUT``, else
    :data:`FLUSH_S` (also for a value that is not 0.5 to 600 seconds: lineage never
    fails a run, not even for its own setting)."""
    try:
        seconds = float(os.environ.get(FLUSH_ENV, FLUSH_S))
    except ValueError:
        return FLUSH_S
    return seconds if 0.5 <= seconds <= 600 else FLUSH_S


def dataset_name(datasetid: str, variables: Mapping[str, str], namespace: str) -> list[str]:
    """A dataset as OpenLineage names it, [namespace, name], from its row in table
    ``dataset`` (as the job's variables carry it). A file dataset (its ``database`` a
    format: :func:`.layout.is_file`) by its folder, ``schemaname/tablename``: namespace
    ``file`` and its path, or the scheme and authority of a URL (``s3a://bucket``) and
    the path in it. Any other: namespace its hostname, else the jobs' namespace; name its
    database, schemaname and tablename joined by dots (those set), else its datasetid.
    Never its username nor anything of its password."""
    host, database, schema, table = (
        variables.get(f"{datasetid}_{column}", "") for column in _COLUMNS
    )
    if layout.is_file(database) and (schema or table):
        path = layout.table_path(schema, table)
        if layout.local(path) is None and "://" in path:  # s3a://bucket/..., hdfs://...
            scheme, _, rest = path.partition("://")
            authority, slash, inside = rest.partition("/")
            return [f"{scheme}://{authority}", slash + inside]
        return ["file", layout.local(path) or path]
    parts = (database, schema, table)
    return [host or namespace, ".".join(part for part in parts if part) or datasetid]


_COLUMNS = ("hostname", "database", "schemaname", "tablename")


class Feed:
    """A RunJob's events, fed to its sender: :meth:`watch` a drain's notify, then
    :meth:`close` once the drain has ended."""

    def __init__(self, job: Any, variables: Mapping[str, str], store: str, version: str):
        namespace = os.environ.get(NAMESPACE_ENV) or NAMESPACE
        self.header = {
            "namespace": namespace,
            "name": job.jobid,
            "inputs": [dataset_name(d, variables, namespace) for d in job.inputs],
            "outputs": [dataset_name(d, variables, namespace) for d in job.outputs],
            "store": store,
            "producer": f"urn:opendataflow:{version}",
        }
        self.open: dict[int, Any] = {}  # the runs started and not yet ended: their claims
        self.dropped = 0  # events the pipe could not take (the sender hangs on its input)
        self.process: subprocess.Popen | None = None  # started at the first run: an idle
        self.unstarted: str | None = None  # RunJob (a cron tick) starts none; why not
        self._pending = b""
        self._lock = threading.Lock()  # (a drain tells of events from one thread: in case)

    def _start(self) -> bool:
        """Start the sender and give it the job; False if it cannot start."""
        from ..process.runner import child_environment

        if self.unstarted is not None:
            return False
        try:  # a process group of its own: a ^C to RunJob does not cut its last events
            self.process = subprocess.Popen(
                [sys.executable, "-P", SENDER],
                process_group=0,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=child_environment({}),  # (less the passkey)
            )
            assert self.process.stdin is not None
            os.set_blocking(self.process.stdin.fileno(), False)
        except (OSError, ValueError) as exc:  # no process left: no events, the run goes on
            self.unstarted = f"OpenLineage events not sent: their sender cannot start ({exc})"
            return False
        self._write(self.header)
        return True

    def watch(self, notify: Callable[[Any], None]) -> Callable[[Any], None]:
        """``notify``, which also tells the sender of each run's start and end."""

        def both(event: Any) -> None:
            notify(event)
            try:
                with self._lock:
                    self.see(event)
            except Exception:  # never a reason to stop a drain
                self.dropped += 1

        return both

    def see(self, event: Any) -> None:
        claim = event.claim
        if event.kind == "launch":
            self.open[claim.runid] = claim
            self._event("START", claim)
        elif event.kind in ("ended", "fenced") and claim.runid in self.open:
            del self.open[claim.runid]
            kind = ENDS.get(event.status, "FAIL") if event.kind == "ended" else "ABORT"
            self._event(kind, claim, event.status if event.kind == "ended" else "")

    def _event(self, kind: str, claim: Any, status: str = "") -> None:
        if self.process is None and not self._start():
            return
        fields = {"dataid": claim.dataid, "attempt": claim.attempt, "runid": claim.runid}
        self._write({"type": kind, "time": time.time(), **fields, "status": status})

    def _write(self, fields: dict) -> None:
        """One line to the sender, without ever waiting: what the pipe cannot take now is
        kept for the next write (a line at most: past that, events are dropped)."""
        line = (json.dumps(fields) + "\n").encode("utf-8", "surrogateescape")
        if self._pending:
            self.dropped += 1  # the sender is not reading: this one is lost
        else:
            self._pending = line
        assert self.process is not None and self.process.stdin is not None
        try:
            while self._pending:
                written = os.write(self.process.stdin.fileno(), self._pending)
                self._pending = self._pending[written:]
        except BlockingIOError:
            pass
        except OSError:  # the sender is gone
            self.dropped += 1
            self._pending = b""

    def close(self, bound: float | None = None) -> str | None:
        """Runs started and not seen ending (the drain failed) are told as ABORT; then
        the sender is given ``bound`` seconds to send what is left, and killed past them.
        What went wrong, in one line, or None."""
        for claim in list(self.open.values()):
            self._event("ABORT", claim)
        self.open.clear()
        bound = flush_timeout() if bound is None else bound
        process = self.process
        if process is None:  # no run started (or its sender could not)
            return self.unstarted
        assert process.stdin is not None
        with contextlib.suppress(OSError):
            os.set_blocking(process.stdin.fileno(), True)
        late = False
        try:
            out, _ = process.communicate(self._pending, timeout=bound)
        except subprocess.TimeoutExpired:
            process.kill()  # (what it printed so far is still read)
            out, late = process.communicate()[0], True
        except (OSError, ValueError) as exc:
            return f"OpenLineage events not all sent: {exc}"
        return self._said(out, f"not all sent within {bound:g} s" if late else "")

    def _said(self, out: bytes, late: str) -> str | None:
        """The sender's last counts, in one line (None: all sent)."""
        try:
            report = json.loads(out.decode("utf-8", "replace").strip().splitlines()[-1])
            failed, problem = report["failed"] + self.dropped, report["problem"]
        except (ValueError, IndexError, KeyError, TypeError):
            report, failed, problem = None, self.dropped, None
        if problem == "missing":
            return MISSING
        if late:
            return f"OpenLineage events {late}" + (f" (first error: {problem})" if problem else "")
        if report is None:
            return "OpenLineage events not all sent: their sender failed"
        if failed or problem:
            total = report["sent"] + failed
            return f"OpenLineage events: {failed} of {total} not sent ({problem or 'dropped'})"
        return None


def feed(job: Any, env: Any, store: Any) -> Feed:
    """The feed of a RunJob's drain of ``job`` (its variables in ``env``) on ``store``,
    where OpenLineage is configured (:func:`.listeners.lineage`)."""
    from ... import __version__

    try:
        identity = str(store.identity)  # (a file's device and inode; a server's address)
    except OSError:  # the file is gone from under its path: its runs still get their UUIDs
        identity = "unknown"
    return Feed(job, env.variables, identity, __version__)
