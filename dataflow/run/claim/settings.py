"""A job's settings: the ``job`` rows whose itemtype is a reserved name, parsed and checked.

Checked alike where they are written (``utility set``, ``register-job``, ``import``) and
where a job is read: a value no parse accepts stops the job before anything is claimed.
What the host allows of them (``spark_args``, ``spark_remote``, ``alerts``) is
:mod:`dataflow.policy`'s to say, where each is used.
"""

from __future__ import annotations

from collections import namedtuple

from ...errors import DataflowError, JobConfigError

# job rows whose itemtype is one of these are settings, not environment items
SETTINGS = (
    "retries",
    "max_parallel",
    "timeout",
    "spark_args",
    "spark_remote",
    "alerts",
    "ready_by",
    "retry_delay",
    "batch",
)

# Value types of the run path are named tuples and plain classes, not dataclasses:
# ``dataclasses`` imports ``inspect`` and builds each class with exec, about 20 ms
# of every RunJob's start-up (benchmarks/findings.md).


class Settings(
    namedtuple(
        "Settings",
        "retries max_parallel timeout spark_args spark_remote alerts ready_by retry_delay batch",
    )
):
    """Job settings: ``job`` rows with a reserved itemtype, the value in itemvalue.

    retries: automatic reruns of a FAILED chunk; max_parallel: live runs of the job
    at once, across processes (None: no cap); timeout: seconds before the job is
    killed (None: never); spark_args: extra spark-submit arguments; spark_remote: the
    Spark Connect server (``sc://host:15002``) a ``.py`` job is a client of ("": none);
    alerts: Apprise URLs its alerts go to ("": the store-wide default, see
    :mod:`..listeners.alerts`);
    ready_by: when each period's chunk is due READY, ``HH:MM[+N]`` ("": no promise; see
    ``dataflow.ops.freshness``); retry_delay: (seconds, factor), the wait before the
    first automatic retry and what each later one multiplies it by ((0, 1): none);
    batch: chunks a Spark driver runs as one call of the job's ``run_batch`` (None: the
    driver's default, see ``dataflow.driver.sparkdrain``).
    """

    __slots__ = ()

    def __new__(
        cls,
        retries=0,
        max_parallel=None,
        timeout=None,
        spark_args="",
        spark_remote="",
        alerts="",
        ready_by="",
        retry_delay=(0.0, 1.0),
        batch=None,
    ):
        return super().__new__(
            cls,
            retries,
            max_parallel,
            timeout,
            spark_args,
            spark_remote,
            alerts,
            ready_by,
            retry_delay,
            batch,
        )


MOST = 1_000_000  # runs, chunks or retries a setting may count (beyond: a typo)
LONGEST_DELAY = 1e9  # seconds (about 32 years): a growing delay stops growing there


def _number(
    jobid: str, name: str, value: str, kind: type, least: float, most: float = MOST
) -> float:
    try:
        number = kind(value)
    except ValueError:
        number = None
    # "nan" and "inf" parse as floats; neither is a number of seconds or of runs
    if number is None or not least <= number <= most:
        raise JobConfigError(
            jobid, f"setting {name} must be a number from {least:g} to {most:.0f}, not '{value}'"
        )
    return number


def settings_of(jobid: str, values: dict[str, str]) -> Settings:
    """Parse and check a job's settings."""
    timeout = values.get("timeout")
    cap = values.get("max_parallel")
    batch = values.get("batch")
    return Settings(
        retries=int(_number(jobid, "retries", values.get("retries", "0"), int, 0)),
        max_parallel=int(_number(jobid, "max_parallel", cap, int, 1)) if cap else None,
        timeout=_number(jobid, "timeout", timeout, float, 0.001, LONGEST_DELAY)
        if timeout
        else None,
        spark_args=_spark_args(jobid, values.get("spark_args", "")),
        spark_remote=_spark_remote(jobid, values.get("spark_remote", "")),
        alerts=_alerts(jobid, values.get("alerts", "")),
        ready_by=_due(jobid, values.get("ready_by", "")),
        retry_delay=_retry_delay(jobid, values.get("retry_delay", "")),
        batch=int(_number(jobid, "batch", batch, int, 1)) if batch else None,
    )


DUE = r"([01]?[0-9]|2[0-3]):([0-5][0-9])(?:\+([0-9]{1,2}))?"


def _due(jobid: str, value: str) -> str:
    if not value:
        return value
    import re  # (a job with the setting only: re's import is a tenth of a cron tick's RunJob)

    if not re.fullmatch(DUE, value):
        raise JobConfigError(
            jobid, f"setting ready_by must be HH:MM, or HH:MM+N (N days later), not '{value}'"
        )
    return value


RETRY_DELAY = r"([0-9]+(?:\.[0-9]+)?)(?:x([0-9]+(?:\.[0-9]+)?))?"


def _retry_delay(jobid: str, value: str) -> tuple[float, float]:
    """``SECONDS`` or ``SECONDS`` ``x`` ``FACTOR``: ``60`` waits 60 s before every retry,
    ``60x2`` waits 60 s, then 120 s, 240 s..."""
    if not value:
        return (0.0, 1.0)
    import re

    found = re.fullmatch(RETRY_DELAY, value.replace(" ", ""))
    if found is None or float(found[2] or 1) < 1:
        raise JobConfigError(
            jobid,
            "setting retry_delay must be SECONDS, or SECONDS x FACTOR (FACTOR >= 1, e.g. "
            f"60x2: 60 s, 120 s, 240 s...), not '{value}'",
        )
    return (float(found[1]), float(found[2] or 1))


# A setting a job does not have is not checked: its checker (of Spark, of the alerts) is
# not even imported, as a plain job's RunJob needs neither.


def _spark_args(jobid: str, value: str) -> str:
    if not value:
        return value
    from ..spark.sparksubmit import split_args

    try:
        split_args(value, "the setting spark_args")
    except DataflowError as exc:
        raise JobConfigError(jobid, str(exc)) from None
    return value


def _spark_remote(jobid: str, value: str) -> str:
    if not value:
        return value
    from ..spark.sparkconnect import not_an_address, parse

    if parse(value) is None:
        raise JobConfigError(jobid, f"setting spark_remote: {not_an_address(value)}")
    return value


def _alerts(jobid: str, value: str) -> str:
    if not value:
        return value
    from ..listeners.alerts import invalid

    if why := invalid(value):
        raise JobConfigError(jobid, f"setting alerts must be Apprise URLs: {why}")
    return value
