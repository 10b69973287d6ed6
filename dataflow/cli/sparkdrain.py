"""The one Spark driver of a drain (``RunJob --all ./job.py`` for a job that defines
``def run(spark, job)``): started by RunJob through spark-submit, it claims chunk after
chunk (``--parallel`` of them at once, as concurrent Spark jobs of one application)
with the same rules as RunJob, calls the entry point per chunk and records each end.

Each chunk keeps what a run of its own has: its claim and finish transactions, its
chunk lock (held by this process: if it dies, the chunks are free to be recovered),
its history row, its log (its Python output and exception; Spark's own log goes to
the drain's log), its FAILED on an exception, its timeout (its Spark jobs cancelled).
What happens is written to RunJob's events file (:mod:`dataflow.run.driven`).

Absolute imports only: spark-submit runs it through ``sparkmain.py``.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import traceback
from pathlib import Path

from dataflow.run import lifecycle
from dataflow.run.claims import Claim
from dataflow.run.drain import Drain
from dataflow.run.driven import EventWriter
from dataflow.run.inprocess import ThreadRun, reason_of
from dataflow.run.jobenv import JobEnv
from dataflow.spark.engine import Engine
from dataflow.store import open_store

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _options(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="sparkmain.py drain")
    parser.add_argument("--db", required=True)
    parser.add_argument("--job", required=True)
    parser.add_argument("--parallel", type=int, default=1)
    parser.add_argument("--events", required=True)
    parser.add_argument("--log", default="")
    parser.add_argument("--command", default="")
    parser.add_argument("--validate")
    parser.add_argument("script")
    parser.add_argument("args", nargs=argparse.REMAINDER)
    return parser.parse_args(argv)


def _secrets(job: lifecycle.Job) -> list[str]:
    """The decrypted passwords RunJob put in this environment: masked in chunk logs."""
    names = (f"{dataset}_password" for dataset in job.inputs + job.outputs)
    return [value for name in names if (value := os.environ.get(name))]


def main(argv: list[str]) -> int:
    options = _options(argv)
    events = EventWriter(options.events)
    events.started()
    try:
        engine = Engine(options.script, options.args)  # the job's own import errors show here
        engine.start(f"{options.job} drain")
    except BaseException as exc:  # the job's import, or Spark's start-up: nothing claimed
        traceback.print_exc()
        events.error(f"could not start: {options.script}: {reason_of(exc)}")
        return 2
    with open_store(Path(options.db)) as store:
        job = lifecycle.load_job(store, options.job)
        env = JobEnv({})  # the job's variables are this process's environment already
        env.secrets = _secrets(job)
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
            healthy=engine.alive,
        )
        for number in SIGNALS:
            signal.signal(number, lambda n, _: drain.stop(n))
        summary = drain.run()
    if summary.interrupted:
        return 128 + summary.interrupted
    if not engine.alive():
        events.error("stopped: its Spark session ended (see Spark's messages in the log)")
        return 1
    engine.stop()
    print(
        f"{options.job}: {summary.ready} READY, {summary.failed} FAILED in one Spark driver",
        file=sys.stderr,
    )
    return 0
