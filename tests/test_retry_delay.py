"""The ``retry_delay`` setting: a FAILED chunk with retries left is not claimed again
before the delay since its last run ended, by any process; then exactly once."""

from __future__ import annotations

import itertools
import re
import time
from datetime import datetime

import pytest

from dataflow.errors import JobConfigError
from dataflow.run.claim.settings import settings_of
from support import rows, script, setting, start_runjob, statuses

pytestmark = pytest.mark.both_stores


@pytest.mark.parametrize(
    ("value", "parsed"),
    [("", (0.0, 1.0)), ("60", (60.0, 1.0)), ("60x2", (60.0, 2.0)), ("1.5 x 3", (1.5, 3.0))],
)
def test_retry_delay_syntax(value, parsed):
    assert settings_of("work", {"retry_delay": value}).retry_delay == parsed


@pytest.mark.parametrize("value", ["-1", "60*2", "60x0.5", "x2", "1e3", "nan", "60s"])
def test_retry_delay_refuses_what_is_not_a_delay(value):
    with pytest.raises(JobConfigError, match="retry_delay must be SECONDS"):
        settings_of("work", {"retry_delay": value})


def test_a_bad_retry_delay_is_one_line(chain):
    refused = chain.utility("set", "work", "retry_delay=soon")
    assert refused.code != 0 and refused.err.startswith("error: ")
    assert "retry_delay must be SECONDS" in refused.err and "Traceback" not in refused.err


@pytest.mark.long
def test_explain_says_when_the_retry_comes(chain, tmp_path):
    script(tmp_path, "work.sh", "exit 3")
    setting(chain, "retries", "1")
    setting(chain, "retry_delay", "3600")
    chain.runjob("--all", "./work.sh")  # each chunk fails once: its retry waits an hour
    assert set(statuses(tmp_path, "work").values()) == {"FAILED"}
    assert "no suitable data" in chain.runjob("./work.sh").out
    assert rows(tmp_path, "select count(*) from run")[0][0] == 3
    told = chain.ok("explain", "work")
    seconds = [int(n) for n in re.findall(r"retry in (\d+) s", told.out)]
    assert len(seconds) >= 3 and all(3000 < n <= 3600 for n in seconds), told.out
    assert "will not run: it FAILED; automatic retry 1 of 1: retry in" in told.out
    one = chain.ok("explain", "work", "2").out
    assert "automatic retry 1 of 1: retry in" in one and "will not run" in one
    # a RESUBMIT is an operator's order: no delay
    chain.ok("resubmit", "work", "2")
    again = chain.runjob("./work.sh")
    assert "with dataid 2" in again.out
    # without the setting the retry is due at once
    chain.ok("unset", "work", "retry_delay")
    assert "with dataid 1" in chain.runjob("./work.sh").out


def _stamp(text: str) -> datetime:
    return datetime.fromisoformat(str(text))


@pytest.mark.long  # waits out the delays: only a lower bound
def test_racing_drains_wait_for_the_delay_then_retry_once(chain, tmp_path):
    """Two RunJob drains at a time, again and again, like cron on two hosts: each chunk
    fails twice and succeeds on its third attempt; every retry starts no earlier than its
    delay (1 s, then 2 s: ``1x2``) after the attempt before it ended, by the store's
    recorded times, and each attempt runs exactly once."""
    script(
        tmp_path,
        "work.sh",
        'echo "$dataid" >> ran\n[ "$(grep -cx "$dataid" ran)" -ge 3 ] || exit 1',
    )
    setting(chain, "retries", "2")
    setting(chain, "retry_delay", "1x2")
    deadline = time.monotonic() + 90
    while (
        set(statuses(tmp_path, "work").values()) != {"READY"} or len(statuses(tmp_path, "work")) < 3
    ):
        assert time.monotonic() < deadline, statuses(tmp_path, "work")
        drains = [start_runjob(chain, "--all", "./work.sh") for _ in range(2)]
        for drain in drains:
            _, err = drain.communicate(timeout=60)
            assert "error:" not in err and "Traceback" not in err, err
        time.sleep(0.2)  # the next cron tick: not a timing assertion
    ran = (tmp_path / "ran").read_text().split()
    assert sorted(ran) == ["1", "1", "1", "2", "2", "2", "3", "3", "3"]
    history = rows(
        tmp_path,
        "select dataid, attempt, retry, status, started, ended from run order by dataid, attempt",
    )
    assert [(d, a, r, s) for d, a, r, s, _, _ in history] == [
        (d, a, a - 1, "READY" if a == 3 else "FAILED") for d in "123" for a in (1, 2, 3)
    ]
    for before, after in itertools.pairwise(history):
        if before[0] != after[0]:
            continue
        delay = 1.0 * 2 ** (after[2] - 1)  # retry 1 waits 1 s, retry 2 waits 2 s
        waited = (_stamp(after[4]) - _stamp(before[5])).total_seconds()
        assert waited >= delay, (before, after, waited)
