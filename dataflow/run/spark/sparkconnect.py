"""A ``.py`` job run as a thin Spark Connect client: no ``spark-submit``, no Java here.

When ``$SPARK_REMOTE`` or the job's ``spark_remote`` setting names a Spark Connect
server (``sc://host:15002``), RunJob runs the job with its own Python; the child has
``SPARK_REMOTE`` in its environment, so ``SparkSession.builder.getOrCreate()`` (and
``dataflow.spark``'s ``context().session()``) connect to that server. The operator's
``$SPARK_REMOTE`` wins over the stored setting, as ``$DATAFLOW_SPARK_ARGS`` does over
``spark_args``.

The address may carry a bearer token (``sc://host:15002/;token=...``): it travels in
the child's environment only, and is masked wherever RunJob shows the address.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence

from ...errors import SparkConnectUnavailable

REMOTE_ENV = "SPARK_REMOTE"
REMOTE_SETTING = "spark_remote"
DEFAULT_PORT = 15002
# the parameters of an sc:// address a store row may give (pyspark's own; any other one
# becomes a header of every request to the server)
REMOTE_PARAMS = ("token", "use_ssl", "user_id", "user_agent", "session_id")
PROBE_TIMEOUT_S = 5.0
_MASKED_PARAM = r"(;token=)[^;]*"
# ``re`` is imported by the functions that use it: RunJob's start-up does not pay for it


def remote(
    settings: Mapping[str, str], environ: Mapping[str, str], script: str = "the job"
) -> str | None:
    """The Spark Connect server the job is a client of: ``$SPARK_REMOTE``, else the
    ``spark_remote`` setting; None when neither is set (the job runs through spark-submit).
    The setting is a row of the store: only a server the host's policy names."""
    own = (environ.get(REMOTE_ENV) or "").strip()
    if own:
        return own
    stored = (settings.get(REMOTE_SETTING) or "").strip()
    if stored and (why := refusal(stored, environ)):
        raise SparkConnectUnavailable(script, f"the job setting {REMOTE_SETTING}: {why}")
    return stored or None


def refusal(url: str, environ: Mapping[str, str] | None = None) -> str | None:
    """Why a store row may not name ``url`` as a job's server here, or None."""
    from ...policy import load

    found = parse(url)
    if found is None:
        return not_an_address(url)
    params = url.split("/;", 1)[1] if "/;" in url else ""
    for param in (part.partition("=")[0] for part in params.split(";") if part):
        if param not in REMOTE_PARAMS:  # pyspark sends others to the server as headers
            return f"the Spark Connect parameter '{param}' is not one of {', '.join(REMOTE_PARAMS)}"
    return load(environ).remote_refusal(*found)


def masked(url: str) -> str:
    """The address with its token hidden: ``sc://host:15002/;token=***``."""
    import re

    return re.sub(_MASKED_PARAM, r"\1***", url, flags=re.IGNORECASE)


def secrets(url: str) -> list[str]:
    """The token of the address (to mask in logs), if it has one."""
    import re

    return [value for value in re.findall(r";token=([^;]*)", url, re.IGNORECASE) if value]


def parse(url: str) -> tuple[str, int] | None:
    """``(host, port)`` of an ``sc://host[:port][/;param=value...]`` address, or None."""
    import re

    match = re.fullmatch(r"sc://(\[[^\]]+\]|[^:/;]+)(?::(\d+))?(?:/.*)?", url, re.DOTALL)
    if match is None:
        return None
    return match.group(1).strip("[]"), int(match.group(2) or DEFAULT_PORT)


def not_an_address(url: str) -> str:
    return f"'{masked(url)}' is not a Spark Connect address (sc://host:{DEFAULT_PORT})"


def address(script: str, url: str) -> tuple[str, int]:
    """``(host, port)`` of an ``sc://host[:port][/;param=value...]`` address."""
    found = parse(url)
    if found is None:
        raise SparkConnectUnavailable(script, not_an_address(url))
    return found


def check(script: str, url: str, timeout: float = PROBE_TIMEOUT_S) -> None:
    """Does the server accept connections? Checked before a chunk is claimed, so an
    unreachable server costs no attempt (the client itself would retry for minutes)."""
    host, port = address(script, url)
    if not answers(host, port, timeout):
        raise SparkConnectUnavailable(
            script,
            f"the Spark Connect server {masked(url)} does not answer (nothing accepts "
            f"connections at {host}:{port}): start it (sbin/start-connect-server.sh), or "
            f"correct ${REMOTE_ENV} / the job setting {REMOTE_SETTING}",
        )


def answers(host: str, port: int, timeout: float = PROBE_TIMEOUT_S) -> bool:
    """A TCP connection to the server's port: cheap, and enough to tell down from up."""
    import socket  # only for a Spark Connect job: RunJob starts without it

    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def client_argv(script: str, args: Sequence[str], launcher: Sequence[str] = ()) -> list[str]:
    """``python [launcher...] script args...``: the job (or the launcher that calls its
    entry point) run by the Python that runs RunJob, which has ``dataflow`` installed."""
    return [sys.executable, *launcher, script, *args]


def describe(url: str) -> str:
    """How ``--dry-run`` names the server: the token masked."""
    return f"as a Spark Connect client of {masked(url)}"
