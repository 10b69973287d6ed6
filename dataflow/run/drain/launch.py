"""What RunJob executes for a script, and which drain runs it: the launch plan.

- a plain script runs as itself, a job process per chunk;
- a ``.py`` job runs through ``spark-submit`` (followed on its cluster if it has one);
- a ``.py`` job that defines ``def run(spark, job)`` is called by the launcher
  (``sparkmain.py``): per chunk, or for a whole drain by one Spark driver;
- with a Spark Connect server (``$SPARK_REMOTE``, else the job's ``spark_remote``
  setting) the same, as a Python client of that server instead of spark-submit.
"""

from __future__ import annotations

import os
from collections import namedtuple
from collections.abc import Callable, Sequence
from functools import partial

from ...store import Store
from ...store.address import Address
from ..claim import claims
from ..claim.jobenv import JobEnv
from ..claim.lifecycle import Job
from ..process.scripts import is_spark_job
from .drain import Drain
from .events import Event

TYPE_CHECKING = False  # typing's flag, without importing typing (a run's start)
if TYPE_CHECKING:
    from ..process.runner import Run
    from .face import Draining


# the launcher spark-submit (or a Connect client's Python) runs to call an entry point:
# a path, never imported here
_DATAFLOW = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAUNCHER = os.path.join(_DATAFLOW, "driver", "sparkmain.py")


class Plan(
    namedtuple(
        "Plan",
        [
            "script",  # str: its resolved path
            "args",  # Sequence[str]
            "spark_args",  # dict[str, str]: the job's spark_args setting, for spark-submit
            "remote",  # str | None: the Spark Connect server it is a client of
            "entry",  # bool: it defines run(spark, job), called in a driver of ours
            "argv",  # list[str]: what runs one chunk
            "run_with",  # Callable[..., Run] | None: what starts that argv (None: a job process,
            # runner.Run, imported once one starts; a SparkRun follows a cluster)
        ],
    )
):
    """How one script is launched. (A named tuple, not a dataclass: ``dataclasses``
    imports ``inspect``, ~5 ms of every RunJob's start.)"""

    __slots__ = ()

    @property
    def role(self) -> str:
        return "Spark Connect client" if self.remote else "Spark driver"

    def driver(self, options: Sequence[str]) -> list[str]:
        """The command of one driver (or Connect client) that drains the job's chunks."""
        from ..spark import sparkconnect, sparksubmit

        launcher = [LAUNCHER, "drain", *options]
        if self.remote:
            return sparkconnect.client_argv(self.script, self.args, launcher)
        return sparksubmit.launcher_argv(launcher, self.script, self.args, self.spark_args)

    def check(self, script: str) -> None:
        """A Spark Connect server that does not answer costs no attempt: refused now."""
        if self.remote:
            from ..spark import sparkconnect

            sparkconnect.check(script, self.remote)


def plan(path: str, args: Sequence[str], job: Job, env: JobEnv) -> Plan:
    """The launch plan of the script at ``path`` for ``job``; a Connect server's URL is
    put in the job's environment, its token among the secrets."""
    spark_args = {"spark_args": job.settings.spark_args}
    if not is_spark_job(path):  # itself, a job process per chunk
        return Plan(path, args, spark_args, None, False, [path, *args], None)
    from ..process.runner import Run
    from ..spark import sparkconnect, sparksubmit

    # a .py job's process: its reason on failure is its Python traceback's, not its
    # stderr's last lines (Spark's log and the JVM's warnings)
    spark_run = partial(Run, words=False)

    remote = sparkconnect.remote({"spark_remote": job.settings.spark_remote}, os.environ, path)
    if remote:  # this Python runs the client, the server does the work
        env.variables[sparkconnect.REMOTE_ENV] = remote
        env.secrets += sparkconnect.secrets(remote)
        entry = sparksubmit.has_entry_point(path)
        launcher = (LAUNCHER, "chunk" if entry else "client")
        argv = sparkconnect.client_argv(path, args, launcher)
        return Plan(path, args, spark_args, remote, entry, argv, spark_run)
    # a .py job runs through spark-submit, followed on its cluster if it has one; with
    # def run(spark, job) its chunks run inside a driver here (client mode)
    argv, submission = sparksubmit.plan(path, args, spark_args)
    entry = bool(submission) and not submission.cluster and sparksubmit.has_entry_point(path)
    if entry:
        argv = sparksubmit.launcher_argv([LAUNCHER, "chunk"], path, args, spark_args)
    run_with: Callable[..., Run] = spark_run
    if submission is not None:
        from ..spark import sparkrun  # only for a .py job

        run_with = sparkrun.runner_for(submission, env.variables)
    return Plan(path, args, spark_args, None, entry, argv, run_with)


def drain(
    launch: Plan,
    store: Store,
    address: Address,
    job: Job,
    env: JobEnv,
    *,
    every: bool,
    parallel: int,
    processes: int | None = None,
    batch: int = 0,
    notify: Callable[[Event], None],
    validate: list[str] | None,
    echo: bool | None = None,
) -> Draining:
    """The drain that runs the job's chunks: one (``every`` false) or all of them;
    ``batch``: chunks a driver claims together for ``run_batch`` (0: the job's setting);
    ``processes``: how many the slots are spread over (None: :func:`.workers.shares`);
    ``echo``: copy the job's output to this process's stdout (None: for one chunk only,
    as RunJob does; a library caller's is False).
    What a run needs on disk is checked first (nothing is claimed on a failure that
    can be foreseen).

    A job with an entry point drains in one Spark driver (or Connect client), started
    only when there is work: a chunk that turns up meanwhile is run by a job process of
    its own, at the cost of a shell job. A job process per chunk: in this process, or
    in worker processes (:mod:`.workers`)."""
    plain = not is_spark_job(launch.script)  # a process per chunk, no Spark
    slots = _shares(store, job, parallel, processes) if every and plain else []
    claims.prepare(store, job.jobid, keeper=not slots)  # the workers' own keepers claim
    if slots:
        from .workers import WorkerDrain

        return WorkerDrain(
            store, address, job, env, launch.argv, slots=slots, notify=notify, validate=validate
        )
    if launch.entry and every and claims.anything_to_do(store, job):
        import shlex

        from .driven import DriverDrain

        return DriverDrain(
            store,
            address,
            job,
            env,
            launch.driver,
            parallel=parallel,
            batch=batch,
            command=shlex.join(launch.driver([])),  # for the history: less the driver's options
            notify=notify,
            validate=validate,
            role=launch.role,
        )
    return Drain(
        store,
        job,
        env,
        launch.argv,
        parallel=parallel,
        limit=None if every else 1,
        echo=not every if echo is None else echo,
        notify=notify,
        validate=validate,
        run_with=launch.run_with,
    )


def _shares(store: Store, job: Job, parallel: int, processes: int | None) -> list[int]:
    """:func:`.workers.shares`, imported only by a drain that may spread (``--all``)."""
    from .workers import shares

    return shares(store, job, parallel, processes)
