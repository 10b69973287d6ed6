"""The environment a job receives: its chunk, its datasets' metadata and passwords.

Values go straight into the child's environment (no shell ever sees them), so
``$(...)``, quotes or newlines in metadata arrive byte for byte and run nothing.
"""

from __future__ import annotations

import os

from ... import crypto
from ...errors import JobConfigError, PasskeyMissing
from ...policy import load
from ...store import Row
from .envnames import is_variable_name, refusal, unsafe, why
from .lifecycle import Job

FIELDS = ("datasetid", "hostname", "database", "schemaname", "tablename", "username")


class JobEnv:
    """Variables for the child, the secrets among them (to mask in logs), and why rows
    that were not taken were left out (one warning line each)."""

    def __init__(self, variables: dict[str, str]) -> None:
        self.variables = variables
        self.secrets: list[str] = []
        self.ignored: list[str] = []

    def for_chunk(self, dataid: str) -> dict[str, str]:
        return {**self.variables, "dataid": dataid}


def inherited(job: Job) -> JobEnv:
    """The environment of a drain in a process of its own (a Spark driver, a drain's
    worker), to which RunJob gave the job's variables: only ``dataid`` to add; the
    decrypted passwords among them, to mask in logs."""
    env = JobEnv({})
    names = (f"{dataset}_password" for dataset in job.inputs + job.outputs)
    env.secrets = [value for name in names if (value := os.environ.get(name))]
    return env


def _set(env: dict[str, str], name: str, value: str | None) -> None:
    """Both spellings: ``bobin_hostname`` (PostgreSQL examples) and ``bobin_HOSTNAME`` (H2)."""
    prefix, _, suffix = name.rpartition("_")
    env[name] = env[f"{prefix}_{suffix.upper()}"] = value or ""


def build(job: Job, datasets: dict[str, Row], passkey: str | None) -> JobEnv:
    """Everything but ``dataid``: built before the claim, so a bad passkey or a bad
    name is reported while the store is still untouched."""
    result = JobEnv({"jobid": job.jobid})
    env = result.variables
    for itemtype, names in (("IN", job.inputs), ("OUT", job.outputs)):
        for datasetid in names:
            if not is_variable_name(datasetid):
                raise JobConfigError(
                    job.jobid,
                    f"dataset name '{datasetid}' cannot be an environment variable "
                    "(use letters, digits and _, not starting with a digit)",
                )
            if unsafe(f"{datasetid}_hostname"):
                raise JobConfigError(job.jobid, f"dataset '{datasetid}': {why(datasetid + '_...')}")
            row = datasets.get(datasetid)
            if row is None:
                raise JobConfigError(job.jobid, f"dataset '{datasetid}' is not in table dataset")
            for column in FIELDS:
                _set(env, f"{datasetid}_{column}", _text(row[column]))
            _set(env, f"{datasetid}_encryptedpass", _text(row["encryptedpass"]))
            _set(env, f"{datasetid}_itemtype", itemtype)
            if row["encryptedpass"]:
                password = _password(job.jobid, row, passkey)
                _set(env, f"{datasetid}_password", password)
                if password:
                    result.secrets.append(password)
    if job.extras:
        policy = load()
        for name, value in job.extras:
            if why_not := refusal(name, policy):  # a row another client wrote
                result.ignored.append(f"job '{job.jobid}': its row {why_not}; not set")
            else:
                env[name] = value
    for name, value in env.items():  # a value no process can be given
        if "\0" in value:
            raise JobConfigError(job.jobid, f"the value of {name} holds a NUL character")
    return result


def _text(value: object) -> str | None:
    return None if value is None else str(value)


def _password(jobid: str, row: Row, passkey: str | None) -> str:
    """The dataset's password; one sealed to its address opens only for that address."""
    what = f"the password of dataset '{row['datasetid']}'"
    if passkey is None:
        raise PasskeyMissing(f"job '{jobid}' uses {what}, so it")
    return crypto.decrypt(str(row["encryptedpass"]), passkey, what, crypto.seal_of(row))
