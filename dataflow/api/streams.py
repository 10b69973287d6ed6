"""``utility stream`` as :func:`stream_launch`: the command and environment of a job's
stream (a PySpark script whose micro-batches become READY chunks), for the caller to
run or to take its process's place."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import NamedTuple

from .. import crypto
from ..errors import StreamError, UsageError
from ..run.claim import lifecycle
from ..run.process import runner, scripts
from ..store import locate, open_store
from ..store.address import for_job
from .running import STORE_ENV, environment


class Environ(dict):
    """A process's environment that shows its secrets masked (a printed or logged launch
    names no password); the values themselves are those the process gets."""

    def __init__(self, values: dict[str, str], secrets: Sequence[str], shown: dict[str, str]):
        super().__init__(values)
        self.secrets, self.shown = frozenset(filter(None, secrets)), shown

    def __repr__(self) -> str:
        return repr(
            {
                name: self.shown.get(name, "***" if value in self.secrets else value)
                for name, value in self.items()
            }
        )


class StreamLaunch(NamedTuple):
    """What runs a job's stream: spark-submit's argv and its whole environment (this
    process's, less the passkey and any ``dataid``, plus the job's and its store)."""

    jobid: str
    argv: list[str]
    environ: dict[str, str]


def stream_launch(
    script: str,
    args: Sequence[str] = (),
    *,
    db: str | None = None,
    passkey: str | None = None,
    warn: Callable[[str], None] | None = None,
) -> StreamLaunch:
    """The launch of ``script``'s stream, checked: a ``.py`` script, a job whose IN
    dataset is a landing one (not a clock) and which has one OUT dataset. Secrets
    travel in ``environ`` only, never in ``argv``."""
    from ..run.spark import sparksubmit  # a stream is a Spark job

    jobid = scripts.job_name(script)
    if not sparksubmit.is_spark_job(script):
        raise UsageError(f"{script}: a stream is a PySpark script (.py) that calls stream()")
    path = scripts.resolve(script)
    address = locate(db)
    passkey = crypto.read_passkey() if passkey is None else passkey
    with open_store(address, readonly=True) as store:
        job = lifecycle.load_job(store, jobid)
        if job.clock:
            why = f"its IN dataset is '{job.clock}': a stream reads a landing dataset"
            raise StreamError(jobid, why)
        if len(job.outputs) != 1:
            raise StreamError(jobid, f"it has {len(job.outputs)} OUT datasets; a stream has one")
        env = environment(store, job, passkey, warn or _ignore)
    argv = sparksubmit.job_argv(path, args, {"spark_args": job.settings.spark_args})
    withheld = (*runner.WITHHELD, "dataid")  # no passkey; no chunk: a stream makes its own
    inherited = {k: v for k, v in os.environ.items() if k not in withheld}
    environ = {**inherited, **env.variables, STORE_ENV: str(address)}
    secrets = [*env.secrets, *(v for k, v in environ.items() if k.lower().endswith("password"))]
    return StreamLaunch(jobid, argv, Environ(environ, secrets, {STORE_ENV: for_job(address)}))


def _ignore(message: str) -> None:
    pass
