"""The one Spark driver of a drain (``RunJob --all ./job.py`` for a job that defines
``def run(spark, job)``): started by RunJob through spark-submit, it claims chunk after
chunk (``--parallel`` of them at once, as concurrent Spark jobs of one application)
with the same rules as RunJob, calls the entry point per chunk and records each end.
A job that defines ``def run_batch(spark, batch)`` gets up to ``--batch`` chunks per
call (each claimed in its own transaction, in natural order; :mod:`dataflow.run.spark.inbatch`
splits a batch that fails), and ``--parallel`` counts batches.

Each chunk keeps what a run of its own has: its claim and finish transactions, its
chunk lock (held by this process: if it dies, the chunks are free to be recovered),
its history row, its log (its Python output and exception; Spark's own log goes to
the drain's log), its FAILED on an exception, its timeout (its Spark jobs cancelled).
What happens is written to RunJob's events file (:mod:`dataflow.run.drain.driven`).

Started by plain Python instead, with ``$SPARK_REMOTE`` set, it is a Spark Connect
client: one session on the server for every chunk, a chunk's operations tagged (and
interrupted on its timeout), no more chunks claimed once the server stops answering.

Absolute imports only: spark-submit runs it through ``sparkmain.py``.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import traceback
from collections.abc import Callable

from dataflow.errors import DataflowError
from dataflow.run.claim import jobenv, lifecycle, liveness
from dataflow.run.claim.claims import Claim
from dataflow.run.drain import foreground
from dataflow.run.drain.drain import Drain
from dataflow.run.drain.events import EventWriter
from dataflow.run.spark import sparkconnect
from dataflow.run.spark.inbatch import BatchChunk, BatchRun
from dataflow.run.spark.inprocess import ThreadRun, reason_of
from dataflow.spark.engine import Engine
from dataflow.store import open_store
from dataflow.store.address import locate

# chunks per call of a job's run_batch unless its ``batch`` setting or --batch says: by a
# sweep of K (benchmarks/findings.md, 18)
DEFAULT_BATCH = 20


def batch_size(given: int, setting: int | None, has_batch_entry: bool) -> int:
    """Chunks per call: ``--batch``, else the job's ``batch`` setting, else the default;
    1 for a job without ``run_batch`` (its ``run`` takes one chunk)."""
    if not has_batch_entry:
        return 1
    return max(given or setting or DEFAULT_BATCH, 1)


def _options(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="sparkmain.py drain")
    parser.add_argument("--job", required=True)
    parser.add_argument("--parallel", type=int, default=1)
    parser.add_argument("--batch", type=int, default=0)  # 0: the job's setting, or the default
    parser.add_argument("--events", required=True)
    parser.add_argument("--log", default="")
    parser.add_argument("--command", default="")
    parser.add_argument("--validate")
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    return parser.parse_args(argv)


def main(argv: list[str]) -> int:
    options = _options(argv)
    events = EventWriter(os.open(options.events, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC))
    events.started()
    _start_keeper()
    try:
        engine = Engine(options.script, options.args)  # the job's own import errors show here
        engine.start(f"{options.job} drain")
    except BaseException as exc:  # the job's import, or Spark's start-up: nothing claimed
        traceback.print_exc()
        events.error(f"could not start: {options.script}: {reason_of(exc)}")
        return 2
    with open_store(locate()) as store:  # $DATAFLOW_DB, set by RunJob
        job = lifecycle.load_job(store, options.job)
        env = jobenv.inherited(job)  # the job's variables are this process's environment
        env.secrets += sparkconnect.secrets(os.environ.get(sparkconnect.REMOTE_ENV, ""))
        footer = f"(Spark's own log of this drain: {options.log})" if options.log else None

        def chunk(claim: Claim, variables: dict[str, str]) -> ThreadRun:
            group = f"dataflow-{job.jobid}-{claim.runid}"
            return ThreadRun(
                lambda chunk_variables: engine.call(chunk_variables, group),
                variables,
                cancel=lambda: engine.cancel(group),
                lock_fd=claim.lock.fd,
                log_path=claim.logpath,
                secrets=env.secrets,
                timeout=job.settings.timeout,
                footer=footer,
            )

        def batch(chunks: list[tuple[Claim, dict[str, str]]]) -> BatchRun:
            group = f"dataflow-{job.jobid}-{chunks[0][0].runid}"
            return BatchRun(
                engine.call_batch,
                [
                    BatchChunk(variables, claim.lock.fd, claim.logpath)
                    for claim, variables in chunks
                ],
                group=group,
                cancel=engine.cancel,
                secrets=env.secrets,
                timeout=job.settings.timeout,
                footer=footer,
                entry=engine.entry_for,
            )

        size = batch_size(options.batch, job.settings.batch, engine.batch_entry is not None)
        drain = Drain(
            store,
            job,
            env,
            [options.command or f"{options.script} (Spark driver)"],
            parallel=max(options.parallel, 1),
            echo=False,
            notify=events,
            validate=[options.validate] if options.validate else None,
            in_process=chunk,
            in_batch=batch if size > 1 else None,
            batch=size,
            healthy=_health(engine),
        )
        summary = foreground.run(drain)
    if summary.interrupted:
        if engine.remote:  # nothing of this client's may go on running on the server
            with contextlib.suppress(Exception):
                engine.spark.interruptAll()
        return 128 + summary.interrupted
    if not engine.alive() or (engine.remote and not _server_answers()):
        what = "its Spark Connect server stopped answering" if engine.remote else None
        events.error(f"stopped: {what or 'its Spark session ended'} (see the messages in the log)")
        return 1
    engine.stop()
    where = "one Spark Connect client" if engine.remote else "one Spark driver"
    print(
        f"{options.job}: {summary.ready} READY, {summary.failed} FAILED in {where}", file=sys.stderr
    )
    return 0


def _start_keeper() -> None:
    """Reach what holds this drain's leases (on a shared store: the host's lease holder)
    now, before Spark or gRPC start threads."""
    with open_store(locate()) as store:
        liveness.before_threads(store)


def _server_answers() -> bool:
    """Does this Spark Connect client's server still accept connections?"""
    url = os.environ.get(sparkconnect.REMOTE_ENV, "")
    try:
        return sparkconnect.answers(*sparkconnect.address("server", url))
    except DataflowError:
        return False


def _health(engine: Engine) -> Callable[[], bool]:
    """Before each claim: is the session usable (a client's server up, too)? Else the
    drain claims no more: every chunk would fail (a client retries for minutes first)."""
    if not engine.remote:
        return engine.alive
    return lambda: engine.alive() and _server_answers()
