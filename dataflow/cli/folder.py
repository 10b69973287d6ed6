"""``RunJob --all FOLDER``: one cron line for a whole pipeline. Every script of the folder
that names a registered job is drained (``RunJob --all SCRIPT``, a process of its own,
so with every guarantee of a separate RunJob), producers before consumers, round after
round until a round starts nothing."""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path

from ..errors import UsageError
from ..ops import lineage
from ..run import runner, scripts, sparksubmit, suspend
from ..store import locate, open_store
from . import warn

MAX_ROUNDS = 100  # a pipeline whose producers never stop producing still ends


def drain(options: argparse.Namespace) -> int:
    if options.dry_run or options.validate or options.args:
        raise UsageError(
            "a folder takes --all [--parallel N] [--workers W] [--batch K] only: "
            "name a script for the rest"
        )
    folder = Path(options.script)
    by_job = _scripts(folder)
    with open_store(locate(options.db)) as store:
        order = lineage.pipeline_order(store.job_rows())
    jobs = [job for job in order if job in by_job]
    for name in sorted(set(by_job) - set(order)):
        warn(f"{by_job[name]}: no job '{name}' is registered; skipped")
    if not jobs:
        raise UsageError(f"no script in {folder} names a registered job")
    command = [*runner.python_command("dataflow.cli.runjob"), "--all"]
    command += ["--db", options.db] if options.db else []
    command += ["--parallel", str(options.parallel)] if options.parallel else []
    command += ["--batch", str(options.batch)] if options.batch else []
    spread = ["--workers", str(options.workers)] if options.workers else []
    worst, stopped, child, told = 0, [], [], []

    def pass_on(number: int) -> None:  # to the RunJob under way
        for process in child:
            process.send_signal(number)

    def stop(number: int, _frame: object) -> None:
        stopped.append(number)
        pass_on(number)
        told.extend(child)

    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, stop)
    suspend.install(pass_on)
    for _ in range(MAX_ROUNDS):
        before = _newest(options.db)
        for job in jobs:
            if stopped:  # between two RunJobs: none more starts
                return 128 + stopped[0]
            script = str(by_job[job])  # (a job run through Spark has no workers)
            workers = [] if sparksubmit.is_spark_job(script) else spread
            with suspend.starting():
                process = runner.start_in_own_group([*command, *workers, script])
                child[:] = [process]
            if stopped and process not in told:  # it came while the RunJob was starting
                process.send_signal(stopped[0])
            code = process.wait()
            if stopped:
                return 128 + stopped[0]
            worst = max(worst, code)
        if _newest(options.db) == before:
            break
    return worst


def _scripts(folder: Path) -> dict[str, Path]:
    """The job scripts of a folder by job name: executable files, and ``.py`` jobs."""
    found = {}
    for path in sorted(folder.iterdir()):
        if (
            path.is_file()
            and not path.name.startswith(".")
            and (path.suffix == ".py" or os.access(path, os.X_OK))
        ):
            found.setdefault(scripts.job_name(path.name), path)
    return found


def _newest(db: str | None) -> tuple | None:
    """The newest run of the store: a round that changes it started something."""
    with open_store(locate(db)) as store:
        rows = store.history(None, None, 1)
    return tuple(rows[0])[:3] if rows else None  # job, dataid, attempt
