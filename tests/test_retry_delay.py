"""The ``retry_delay`` setting: a FAILED chunk with retries left is not claimed again
before the delay since its last run ended, by any process; then exactly once."""

from __future__ import annotations

import itertools
import re
import time
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from dataflow.errors import JobConfigError
from dataflow.run.claim.lifecycle import Job, retry_wait
from dataflow.run.claim.settings import LONGEST_DELAY, settings_of
from dataflow.store import ChunkRow
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


ENDED = datetime(2026, 12, 1, 12, 0, tzinfo=timezone(timedelta(hours=2)))
STATUSES = st.sampled_from(["FAILED", "READY", "RESUBMIT", "RUNNING", "HOLD"])


def _job(delay: str) -> Job:
    return Job("work", ("src",), ("dst",), settings=settings_of("work", {"retry_delay": delay}))


def _wait(delay: str, outs: list[str], retry, ended, after: float) -> float:
    rows = [ChunkRow("dst", "OUT", s) for s in outs]
    last = {"retry": retry, "ended": ended}
    return retry_wait(_job(delay), rows, last, ENDED + timedelta(seconds=after))


@given(
    seconds=st.integers(1, 10**6),
    factor=st.integers(1, 10),
    retry=st.integers(0, 40) | st.integers(0, 2**31 - 2),  # the first retries, and any count
    after=st.floats(-1e6, 1e10, allow_nan=False),
)
@example(seconds=60, factor=2, retry=0, after=30.0)  # the first retry waits SECONDS
@example(seconds=60, factor=2, retry=1, after=30.0)  # the second SECONDS x FACTOR
def test_a_failed_chunk_waits_its_delay_times_the_factor_per_retry_from_its_end(
    seconds, factor, retry, after
):
    """The wait of a chunk whose outputs are all FAILED, ``after`` seconds after its last run
    ended: SECONDS x FACTOR ** (the last run's retry), never past LONGEST_DELAY, less the
    time gone by; a time written without its offset is this host's local time."""
    try:
        delay = min(float(seconds) * float(factor) ** retry, LONGEST_DELAY)
    except OverflowError:
        delay = LONGEST_DELAY
    expected = max(0.0, delay - after)
    spec = f"{seconds}x{factor}"
    for ended in (ENDED, ENDED.isoformat(), ENDED.astimezone().replace(tzinfo=None).isoformat()):
        assert _wait(spec, ["FAILED"], retry, ended, after) == pytest.approx(expected)
    assert _wait(spec, ["FAILED", "FAILED"], retry, ENDED, after) == pytest.approx(expected)
    assert _wait(spec, ["FAILED"], retry, ENDED, 0.0) == pytest.approx(delay)  # at its end


@given(outs=st.lists(STATUSES, max_size=3), after=st.floats(-1e6, 1e6, allow_nan=False))
def test_only_a_failed_chunk_whose_last_run_ended_ever_waits(outs, after):
    """No wait without the setting, without an end, with an end no run of ours writes, or
    for a chunk not FAILED in every output (a RESUBMIT runs at once)."""
    failed = bool(outs) and set(outs) == {"FAILED"}
    assert (_wait("60x2", outs, 1, ENDED, after) > 0) == (failed and after < 120)
    for delay, ended in (("", ENDED), ("60", None), ("60", ""), ("60", "yesterday")):
        assert _wait(delay, outs, 1, ended, after) == 0.0
    assert retry_wait(_job("60"), [ChunkRow("dst", "OUT", s) for s in outs], None, ENDED) == 0.0


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
