"""A stream: Structured Streaming micro-batches as chunks (``foreachBatch``).

``utility stream ./clean_stream.py`` submits a script that calls :func:`stream`; every
micro-batch of its source (by default new files in the landing folder of the job's IN
dataset) goes through the same transformations a batch job uses, is written as ONE
chunk of the job's OUT dataset and is recorded READY in the store at once, the
stream's job as its producer, so downstream batch jobs consume it like any chunk.

- **dataid = batch id** (``0``, ``1``, ``2``...): chunks are claimed in natural order.
- **Replay**: Spark's checkpoint replays a batch that was under way when the stream
  died, with the same id and the same files. A chunk not yet recorded is rewritten
  (its folder overwritten, so no duplicate rows) and recorded; a chunk the store
  already has (READY, or set by an operator since) is left exactly as it is, so a
  downstream job reading it never sees it change.
- **Empty micro-batches** make no chunk.
- **The checkpoint is the stream's memory**: started without its checkpoint while the
  job already has chunks, a stream would number its batches from 0 again and skip
  them as replays; it refuses to start instead.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import StreamError
from .chunks import READ_DEFAULTS, read, write
from .context import JobContext

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

READY = "READY"  # the status a chunk is recorded with (as ``utility ready`` records it)
STREAMS = "streams"  # in the store's local folder: each stream's default checkpoint and lock
CHECKPOINT_ITEM = "checkpoint"  # a job item naming the checkpoint folder
DEFAULT_TRIGGER = "1 second"
_locks: dict[str, int] = {}  # jobid -> descriptor of its stream lock, held while we live


@dataclass(frozen=True)
class StreamChunk:
    """One micro-batch that became a chunk. ``written`` is False for a replayed batch
    whose chunk the store already had: it was left as it was, and ``rows`` is 0."""

    jobid: str
    datasetid: str
    batch_id: int
    dataid: str
    rows: int
    written: bool
    path: str


def stream(
    transform: Any,
    *,
    schema: Any = None,
    options: Mapping[str, str] | None = None,
    source: Callable[[SparkSession], DataFrame] | None = None,
    trigger: str = DEFAULT_TRIGGER,
    checkpoint: str | None = None,
    on_chunk: Callable[[StreamChunk], None] | None = None,
    spark: SparkSession | None = None,
    environ: Mapping[str, str] | None = None,
) -> StreamingQuery:
    """Start the job's stream and return its running query (``.awaitTermination()`` it).

    ``transform``: a :class:`~dataflow.pipeline.Pipeline` or a function of one DataFrame,
    applied to each micro-batch. The source is the job's only IN dataset, a file dataset
    whose folder (``<base>/<table>``) is the landing folder where items are dropped,
    read with ``schema`` (required by Spark's file source) and reader ``options``; or
    ``source(spark)`` returning any streaming DataFrame (Kafka: see docs/spark.md).
    ``trigger``: Spark's processing-time trigger. ``checkpoint``: the folder of Spark's
    checkpoint (default: the job item ``checkpoint``, else ``<store>.d/streams/<jobid>``).
    ``on_chunk(StreamChunk)`` is called after each chunk is recorded (or skipped as a
    replay), e.g. to print a line of progress: the library itself prints nothing.
    """
    from ..store import locate, open_store

    env = dict(os.environ if environ is None else environ)
    jobid = env.get("jobid", "")
    if not jobid:
        raise StreamError("?", "$jobid is not set: start the stream with 'utility stream SCRIPT'")
    if env.get("dataid"):  # RunJob claimed a chunk for it: a stream makes its own chunks
        raise StreamError(
            jobid,
            f"it runs for chunk {env['dataid']} under RunJob: start a stream with "
            "'utility stream SCRIPT', which runs until stopped",
        )
    run = transform.run if hasattr(transform, "run") else transform
    if not callable(run):
        raise StreamError(jobid, "transform must be a Pipeline or a function of a DataFrame")
    job = JobContext.from_environ({**env, "dataid": "0"})
    output = job.output()
    address = locate(None if environ is None else env.get("DATAFLOW_DB"))
    with open_store(address) as store:
        folder = Path(store.files) / STREAMS
        chunks = store.dataids_of_job(jobid)
    checkpoint = checkpoint or job.item(CHECKPOINT_ITEM) or str(folder / jobid)
    _check_checkpoint(jobid, checkpoint, chunks)
    _lock(jobid, folder)
    try:
        if spark is None:
            from pyspark.sql import SparkSession

            spark = SparkSession.builder.appName(f"{jobid} stream").getOrCreate()
        frames = source(spark) if source is not None else _landing(spark, job, schema, options)
    except BaseException:
        os.close(_locks.pop(jobid))  # nothing started: another try may take the lock
        raise

    def each_batch(batch: DataFrame, batch_id: int) -> None:
        chunk = _chunk(
            address, jobid, replace(output, dataid=str(batch_id), attempt=""), batch, run
        )
        if chunk is not None and on_chunk is not None:
            on_chunk(replace(chunk, batch_id=batch_id))

    writer = frames.writeStream.foreachBatch(each_batch).queryName(f"{jobid}")
    writer = writer.option("checkpointLocation", checkpoint)
    return writer.trigger(processingTime=trigger).start()


def _landing(
    spark: SparkSession, job: JobContext, schema: Any, options: Mapping[str, str] | None
) -> DataFrame:
    landing = job.input()
    if landing.kind != "file":
        raise StreamError(
            job.jobid,
            f"its IN dataset '{landing.datasetid}' is not a file dataset: give source= "
            "to read another kind of stream (Kafka...)",
        )
    if schema is None:
        raise StreamError(
            job.jobid,
            f"give schema= for the items of '{landing.datasetid}' (Spark's file "
            "source does not guess the columns of a stream)",
        )
    folder = landing.table_path
    if "://" not in folder or folder.startswith("file:"):  # a local landing: made if new
        Path(folder.removeprefix("file://").removeprefix("file:")).mkdir(
            parents=True, exist_ok=True
        )
    reader = spark.readStream.format(landing.format).schema(schema)
    reader = reader.options(**READ_DEFAULTS.get(landing.format, {}), **(options or {}))
    return reader.load(folder)


def _chunk(address: Any, jobid: str, dataset: Any, batch: DataFrame, run: Callable) -> Any:
    """Make micro-batch ``batch`` chunk ``dataset.dataid`` and record it READY; None for
    an empty batch. A chunk the store already has is a replay: left as it is."""
    from ..store import open_store

    path = dataset.chunk_path if dataset.kind == "file" else dataset.table
    found = StreamChunk(jobid, dataset.datasetid, 0, dataset.dataid, 0, False, path)
    with open_store(address) as store:
        if dict(store.out_status(jobid, dataset.dataid)).get(dataset.datasetid) is not None:
            return found
    if batch.isEmpty():
        return None
    write(run(batch), dataset)  # the chunk's folder (or rows) overwritten: a replay rewrites it
    rows = read(batch.sparkSession, dataset).count()  # as downstream will read it
    with open_store(address) as store, store.transaction():
        store.put_out_status(jobid, dataset.dataid, [dataset.datasetid], READY)
    return replace(found, rows=rows, written=True)


def _lock(jobid: str, folder: Path) -> None:
    """One stream per job at a time: a lock held by this process until it ends."""
    if jobid in _locks:
        raise StreamError(jobid, "this process already runs its stream")
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / f"{jobid}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise StreamError(
            jobid,
            f"its stream is already running (another process holds {folder / (jobid + '.lock')})",
        ) from None
    _locks[jobid] = fd


def _check_checkpoint(jobid: str, checkpoint: str, chunks: list[str]) -> None:
    """Refuse a lost checkpoint (a local one: a remote one is Spark's to read)."""
    if "://" in checkpoint and not checkpoint.startswith("file:"):
        return
    local = checkpoint.removeprefix("file://").removeprefix("file:")
    if chunks and not (Path(local) / "offsets").is_dir():
        raise StreamError(
            jobid,
            f"it has {len(chunks)} chunks but no checkpoint at {local}: its batches would be "
            "numbered from 0 again and skipped as replays. Restore the checkpoint, or "
            "delete the job's chunks ('utility deleterun JOB DATAID') to start over",
        )
