"""``RunJob --all FOLDER`` as :func:`drain_folder`: one call for a whole pipeline. Every
script of the folder that names a registered job is drained by a RunJob of its own (a
process, so with every guarantee of a separate RunJob), producers before consumers,
round after round until a round starts nothing."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any, NamedTuple

from ..errors import UsageError
from ..run.process import runner, scripts, suspend
from ..store import locate, open_store

MAX_ROUNDS = 100  # a pipeline whose producers never stop producing still ends
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
RUNJOB = "dataflow.cli.runjob"  # the module each job's RunJob process runs


class FolderDrained(NamedTuple):
    """What :func:`drain_folder` did."""

    exit_code: int  # the worst of its RunJobs' (128+n: stopped by signal n)
    jobs: list[str]  # the jobs it drained, in the order it ran them
    skipped: list[str]  # scripts that name no registered job (each is a warning)
    rounds: int  # rounds started
    interrupted: int | None  # the signal that stopped it


def drain_folder(
    folder: str,
    *,
    db: str | None = None,
    parallel: int | None = None,
    workers: int | None = None,
    batch: int | None = None,
    output: int | IO[Any] | None = subprocess.DEVNULL,
    warn: Callable[[str], None] | None = None,
) -> FolderDrained:
    """Drain every job whose script is in ``folder``, in lineage order, round after
    round until nothing new runs (at most :data:`MAX_ROUNDS`). ``output``: where the
    RunJobs' lines go (None: this process's stdout and stderr); their runs are in the
    store's history either way. ``warn`` is told of each script skipped (also in
    ``skipped``) before any runs. SIGINT, SIGTERM and SIGHUP reach the RunJob under way
    and stop the drain (``interrupted``); call it from the main thread."""
    by_job = _scripts(Path(folder))
    with open_store(locate(db)) as store:
        from ..ops import lineage  # only a folder's drain orders jobs

        order = lineage.pipeline_order(store.job_rows())
    jobs = [job for job in order if job in by_job]
    skipped = [f"{by_job[name]}: no job '{name}' is registered; skipped"
               for name in sorted(set(by_job) - set(order))]  # fmt: skip
    for problem in skipped if warn else ():
        warn(problem)
    if not jobs:
        raise UsageError(f"no script in {folder} names a registered job")
    command = [*runner.python_command(RUNJOB), "--all"]
    command += ["--db", db] if db else []
    command += ["--parallel", str(parallel)] if parallel else []
    command += ["--batch", str(batch)] if batch else []
    spread = ["--workers", str(workers)] if workers else []
    argvs = {  # (a job run through Spark has no workers)
        job: [*command, *([] if scripts.is_spark_job(str(path)) else spread), str(path)]
        for job, path in by_job.items()
    }
    rounds = _Rounds(output)
    code = rounds.run([argvs[job] for job in jobs], db)
    stopped = rounds.stopped[0] if rounds.stopped else None
    return FolderDrained(code, jobs, skipped, rounds.count, stopped)


class _Rounds:
    """The rounds of a folder's drain, one RunJob at a time; a signal stops them."""

    def __init__(self, output: int | IO[Any] | None):
        self.output = output
        self.stopped: list[int] = []
        self.child: list[subprocess.Popen] = []
        self.told: list[subprocess.Popen] = []
        self.count = 0

    def pass_on(self, number: int) -> None:  # to the RunJob under way
        for process in self.child:
            process.send_signal(number)

    def stop(self, number: int, _frame: object) -> None:
        self.stopped.append(number)
        self.pass_on(number)
        self.told.extend(self.child)

    def run(self, argvs: list[list[str]], db: str | None) -> int:
        previous = {number: signal.signal(number, self.stop) for number in SIGNALS}
        previous.update(suspend.install(self.pass_on))
        try:
            return self._rounds(argvs, db)
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)

    def _rounds(self, argvs: list[list[str]], db: str | None) -> int:
        worst = 0
        for _ in range(MAX_ROUNDS):
            self.count += 1
            before = _newest(db)
            for argv in argvs:
                if self.stopped:  # between two RunJobs: none more starts
                    return 128 + self.stopped[0]
                code = self._one(argv)
                if self.stopped:
                    return 128 + self.stopped[0]
                worst = max(worst, code)
            if _newest(db) == before:
                break
        return worst

    def _one(self, argv: list[str]) -> int:
        out = {"stdout": self.output, "stderr": self.output} if self.output is not None else {}
        with suspend.starting():
            process = runner.start_in_own_group(argv, **out)
            self.child[:] = [process]
        if self.stopped and process not in self.told:  # it came while it was starting
            process.send_signal(self.stopped[0])
        return process.wait()


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
