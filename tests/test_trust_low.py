"""The low items of "the open store is a trust boundary": each bad input is one
``error: ...`` line, a non-zero exit, no traceback, and the store as it was."""

from __future__ import annotations

import pytest

from support import state

pytestmark = pytest.mark.both_stores


def refused(result, code: int | None = None, says: str = ""):
    """One ``error:`` line on stderr, a non-zero exit (``code`` if given), no traceback."""
    assert result.code != 0 and (code is None or result.code == code), result
    assert result.err.startswith("error: ") and result.err.count("\n") == 1, result
    assert "Traceback" not in result.err and says in result.err, result
    return result


def _chunks(cli):
    cli.ok("createtables")
    cli.ok("register-dataset", "src")
    cli.ok("register-dataset", "dst")
    cli.ok("register-job", "A", "--in", "src", "--out", "dst")
    cli.ok("ready", "src", "1-3")


@pytest.mark.parametrize(
    "args",
    [
        ("runs", "--limit", "-1"),
        ("runs", "--limit", "0"),
        ("runs", "--limit", "99999999999999999999"),
        ("history", "--limit", "-5"),
        ("history", "A", "--limit", "1e9"),
        ("log", "A", "1", "--attempt", "-1"),
    ],
)
def test_a_negative_or_huge_count_is_a_usage_error(cli, tmp_path, args):
    _chunks(cli)
    before = state(tmp_path)
    refused(cli.utility(*args), 2, "must be a whole number from 1 to 1000000")
    assert state(tmp_path) == before
