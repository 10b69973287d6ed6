"""Alerts' tests share: the password an alert URL carries (never shown), what a webhook
receiver keeps of a POST, and ``patient``, an autouse fixture a module imports to give
deliveries time on a busy machine and allow this machine's own receivers."""

from __future__ import annotations

import json

import pytest

from support import (
    host_policy,
)

SECRET = "s3cretT0ken"  # a password in an alert URL: it must never be shown


def _taken(path: str, headers, body: bytes) -> dict:
    return {**json.loads(body), "auth": headers.get("Authorization"), "path": path}


LOCAL_TARGETS = """
[alerts]
targets = ["json://127.0.0.1", "mailto://127.0.0.1"]
params = ["mode"]
"""


@pytest.fixture(autouse=True)
def patient(cli):
    """A delivery that works is not given up on a busy machine (the default is 10 s); the
    host allows alerts to this machine's own receivers."""
    cli.env["DATAFLOW_ALERT_TIMEOUT"] = "60"
    host_policy(cli.cwd, LOCAL_TARGETS)
