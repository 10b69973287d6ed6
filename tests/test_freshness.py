"""Freshness (issue 25 item 2): ``ready_by`` promises, ``utility check`` on a fixed clock
(``--at``, in the host's zone) and on the store's own clock, alerts once per late chunk,
late cells on the board."""

from __future__ import annotations

import json

import pytest

from support import script
from support.alerts import patient  # noqa: F401 (an autouse fixture: alerts to this host)

DAY = "2030-01-02"


def _late(cli, at: str) -> tuple[int, list[dict]]:
    checked = cli.utility("--json", "check", "--at", f"{DAY} {at}")
    assert checked.code in (0, 1) and checked.err == "", checked
    found = json.loads(checked.out)
    assert checked.code == (1 if found else 0), checked
    return checked.code, found


@pytest.fixture
def promised(cli, tmp_path):
    """load (raw -> clean, READY by 06:00) and shape (clean -> agg, by 07:00); raw READY
    at DAY; both promises made at DAY 00:00; load's script fails until ``fixed`` exists."""
    cli.ok("createtables")
    for name in ("raw", "clean", "agg"):
        cli.ok("register-dataset", name)
    cli.ok("register-job", "load", "--in", "raw", "--out", "clean", "--set", "ready_by=06:00")
    cli.ok("register-job", "shape", "--in", "clean", "--out", "agg", "--set", "ready_by=07:00")
    cli.ok("dml", f"update job set modified = '{DAY} 00:00:00'")
    cli.ok("ready", "raw", DAY)
    script(tmp_path, "load.sh", "[ -e fixed ] || exit 4")
    script(tmp_path, "shape.sh", "exit 0")
    return cli


@pytest.mark.long
def test_check_lists_what_is_late_and_what_blocks_it(promised, tmp_path):
    cli = promised
    assert _late(cli, "05:59") == (0, [])
    assert cli.utility("check", "--at", f"{DAY} 05:59").out == "nothing is late\n"
    _, found = _late(cli, "06:01")
    assert found == [
        {
            "jobid": "load",
            "dataid": DAY,
            "due": f"{DAY} 06:00",
            "status": "no chunk yet",
            "blocked": "nothing: the job's next RunJob runs it (is it in cron?)",
        }
    ]
    assert cli.runjob("./load.sh").code == 4
    _, found = _late(cli, "07:30")
    assert [(f["jobid"], f["status"], f["blocked"]) for f in found] == [
        ("load", "FAILED", "it FAILED and has no automatic retry left; resubmit it to rerun"),
        ("shape", "no chunk yet", f"input clean is not READY at {DAY} (FAILED by load)"),
    ]
    (tmp_path / "fixed").write_text("")
    cli.ok("resubmit", "load", DAY)
    assert cli.runjob("./load.sh").code == 0
    _, found = _late(cli, "07:30")
    assert [(f["jobid"], f["blocked"]) for f in found] == [
        ("shape", "nothing: the job's next RunJob runs it (is it in cron?)")
    ]
    assert cli.runjob("./shape.sh").code == 0
    assert _late(cli, "07:30") == (0, [])
    # the next day's chunk is due by the next day's 06:00; its input never came
    following = cli.utility("--json", "check", "--at", "2030-01-03 06:30")
    assert following.code == 1, following
    assert [(f["jobid"], f["dataid"], f["blocked"]) for f in json.loads(following.out)] == [
        ("load", "2030-01-03", "input raw has no chunk 2030-01-03 yet")
    ]


@pytest.mark.long
def test_check_on_the_store_clock_alerts_each_late_chunk_once_and_the_board_marks_it(
    cli,
    tmp_path,
    hook,
):
    from dataflow.dataids import today

    day = today()  # due at its midnight, so late now, by the store's clock
    cli.ok("createtables")
    for name in ("raw", "clean", "agg"):
        cli.ok("register-dataset", name)
    cli.ok("register-job", "load", "--in", "raw", "--out", "clean", "--set", "ready_by=00:00")
    cli.ok("register-job", "shape", "--in", "clean", "--out", "agg", "--set", "ready_by=00:00")
    cli.ok("dml", "update job set modified = '2000-01-01 00:00:00'")
    cli.ok("ready", "raw", day)
    script(tmp_path, "load.sh", "exit 4")
    cli.ok("set", "*", f"alerts={hook.url}")
    assert cli.runjob("./load.sh").code == 4
    assert [body["title"] for body in hook.got] == [f"dataflow: load {day} FAILED"]  # RunJob's
    checked = cli.utility("check")
    assert checked.code == 1 and [line.split()[:2] for line in checked.out.splitlines()[2:]] == [
        ["load", day],
        ["shape", day],
    ]
    assert [body["title"] for body in hook.got][1:] == ["dataflow: 2 chunks late"]
    lines = hook.got[1]["message"].splitlines()
    assert lines[0].startswith(f"load {day}: due {day} 00:00, FAILED; blocked by it FAILED")
    assert lines[1].startswith(f"shape {day}: due {day} 00:00, no chunk yet; blocked by input")
    assert cli.utility("check").code == 1
    assert len(hook.got) == 2  # still late: told once

    board = json.loads(cli.ok("board", "--json").out)
    assert {(c["jobid"], c["dataid"]) for c in board["late"]} == {("load", day), ("shape", day)}
    cli.ok("board", "--html", "board.html")
    page = (tmp_path / "board.html").read_text()
    assert page.count('class="cell s-FAILED late"') == 1  # load: FAILED, late
    assert page.count('class="cell blocked late"') == 1  # shape: no chunk, blocked by load, late


def test_a_bad_promise_or_time_is_refused(promised):
    refused = promised.utility("set", "load", "ready_by=25:00")
    assert refused.code == 2 and "ready_by must be HH:MM" in refused.err, refused
    bad_at = promised.utility("check", "--at", "tomorrow")
    assert bad_at.code == 2 and bad_at.err.startswith("error: --at takes"), bad_at
