"""The process that sends a RunJob's OpenLineage run events with the openlineage-python
client: ``python -P .../lineagesend.py``, started by :mod:`.lineagefeed`.

It reads JSON lines on stdin: first the job (``{"namespace", "name", "inputs",
"outputs", "store", "producer"}``, each dataset ``[namespace, name]``), then one line
an event (``{"type": "START" | "COMPLETE" | "FAIL" | "ABORT", "time": epoch seconds,
"runid", "dataid", "attempt", "status"}``), and sends each as it comes, in order. It
prints its counts as a JSON line, ``{"sent": n, "failed": n, "problem": why}``, after
each event that failed and at the end of its input. It reads its input in a thread of its own, so that a receiver that hangs never
fills the pipe its RunJob writes to. Its RunJob bounds it in time once its drain has
ended, and kills it past the bound; it bounds itself too from the end of its input (a
RunJob that died with no time to kill it).

The client is configured as it always is (``OPENLINEAGE_URL``, ``OPENLINEAGE_CONFIG``,
``openlineage.yml``, ``OPENLINEAGE__...``): this process is the only one that imports it.
"""

from __future__ import annotations

import json
import logging
import queue
import signal
import sys
import threading
import uuid
from datetime import UTC, datetime

AFTER_END_S = 10.0  # once its input has ended (its RunJob is done, or died), at most this
FACET = "opendataflow_chunk"  # the custom run facet that names the chunk
FACET_SCHEMA = "urn:opendataflow:facets:chunk:1-0-0"  # described in docs/lineage.md
INTEGRATION = "OPENDATAFLOW"  # the jobType facet's integration


def run_uuid(store: str, runid: int) -> str:
    """The run's OpenLineage runId: the same for its START and its end, from the store's
    identity (never its password) and the run's number in it."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"opendataflow:{store}:{runid}"))


def _why(exc: BaseException) -> str:
    """One line of an error: its type and the start of its message."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}"[:200] if text else type(exc).__name__


def _builder(job: dict):
    """A function from an event line to the client's RunEvent (imports the client)."""
    import attr
    from openlineage.client.event_v2 import (
        InputDataset,
        Job,
        OutputDataset,
        Run,
        RunEvent,
        RunState,
    )
    from openlineage.client.facet_v2 import job_type_job
    from openlineage.client.generated.base import RunFacet

    @attr.define
    class ChunkRunFacet(RunFacet):
        """The chunk a run ran on (dataid), its attempt and run number in the store, and
        the chunk's status once it ended."""

        dataid: str
        attempt: int
        runid: int
        status: str | None = attr.field(default=None)

        @staticmethod
        def _get_schema() -> str:
            return FACET_SCHEMA

    producer = job["producer"]
    kind = job_type_job.JobTypeJobFacet(
        processingType="BATCH", integration=INTEGRATION, jobType="JOB", producer=producer
    )
    of_job = Job(namespace=job["namespace"], name=job["name"], facets={"jobType": kind})
    inputs = [InputDataset(namespace=ns, name=name) for ns, name in job["inputs"]]
    outputs = [OutputDataset(namespace=ns, name=name) for ns, name in job["outputs"]]

    def build(event: dict) -> RunEvent:
        facet = ChunkRunFacet(
            dataid=event["dataid"],
            attempt=event["attempt"],
            runid=event["runid"],
            status=event.get("status") or None,
            producer=producer,
        )
        when = datetime.fromtimestamp(event["time"], UTC)
        return RunEvent(
            eventType=RunState[event["type"]],
            eventTime=when.isoformat(),
            run=Run(runId=run_uuid(job["store"], event["runid"]), facets={FACET: facet}),
            job=of_job,
            inputs=inputs,
            outputs=outputs,
            producer=producer,
        )

    return build


def _read(lines: queue.Queue) -> None:
    """Every line of stdin into ``lines``, then None; from the end of its input on, the
    process has :data:`AFTER_END_S` left (its RunJob may have died)."""
    try:
        for line in sys.stdin:
            lines.put(line)
    finally:
        signal.alarm(int(AFTER_END_S))
        lines.put(None)


def _ended(_signal: int, _frame: object) -> None:
    raise SystemExit(0)


def main() -> int:
    signal.signal(signal.SIGALRM, _ended)
    for name in ("openlineage", "urllib3", "requests"):  # no log line of theirs on stderr
        logging.getLogger(name).addHandler(logging.NullHandler())
        logging.getLogger(name).propagate = False
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_read, args=(lines,), daemon=True).start()
    counts = {"sent": 0, "failed": 0, "problem": None}
    try:
        _send(lines, counts)
    finally:
        print(json.dumps(counts), flush=True)
    return 0


def _send(lines: queue.Queue, counts: dict) -> None:
    """Send each event line as it comes, counting what was sent and what failed."""
    client = build = None
    first = lines.get()
    if first is not None:
        try:
            from openlineage.client import OpenLineageClient

            client, build = OpenLineageClient(), _builder(json.loads(first))
        except ImportError:
            counts["problem"] = "missing"
        except Exception as exc:  # a bad configuration
            counts["problem"] = f"the client cannot start: {_why(exc)}"
    while (line := lines.get()) is not None:
        try:
            if client is None or build is None:
                raise LookupError("no client")
            client.emit(build(json.loads(line)))
            counts["sent"] += 1
        except Exception as exc:  # the receiver is down, refuses, times out...
            counts["failed"] += 1
            counts["problem"] = counts["problem"] or _why(exc)
            print(json.dumps(counts), flush=True)  # read by a RunJob that cannot wait more


if __name__ == "__main__":
    sys.exit(main())
