"""No dead ends for the operator: explain says what waits and why, an external drop and a
missed day have a command, status shows only failures that still stand."""

from __future__ import annotations

import json
import re
import subprocess
from datetime import date, datetime, timedelta

import pytest

from support import rows, script, statuses
from support import state as dump


def system_today() -> date:
    out = subprocess.run(
        ["date", "+%F"], env={"TZ": ":/etc/localtime"}, capture_output=True, text=True
    ).stdout
    return date.fromisoformat(out.strip())


def pipeline(cli):
    """up (src -> mid), down (mid -> out), chunk 1 of src READY, both run once."""
    cli.ok("createtables")
    cli.ok("register-dataset", "src")
    cli.ok("register-dataset", "mid")
    cli.ok("register-dataset", "out")
    cli.ok("register-job", "up", "--in", "src", "--out", "mid")
    cli.ok("register-job", "down", "--in", "mid", "--out", "out")
    cli.ok("ready", "src", "1")
    script(cli.cwd, "up.sh", "true")
    script(cli.cwd, "down.sh", "true")
    assert cli.run_job("./up.sh").exit_code == 0
    assert cli.run_job("./down.sh").exit_code == 0


@pytest.mark.both_stores
def test_explain_lists_a_resubmit_waiting_for_an_input_being_rebuilt(cli):
    pipeline(cli)
    cli.ok("resubmit", "up", "1", "--cascade")
    told = cli.ok("explain", "down")
    assert "nothing to do" not in told.out
    assert "WAITING:" in told.out
    assert "1 RESUBMIT: input mid is not READY at 1 (RESUBMIT by up)" in told.out
    assert told.lines[-1] == "will not run: input mid is not READY at 1 (RESUBMIT by up)"
    as_json = json.loads(cli.ok("explain", "down", "--json").out)
    assert as_json["answers"]["waiting"] == [
        "1 RESUBMIT: input mid is not READY at 1 (RESUBMIT by up)"
    ]


@pytest.mark.both_stores
def test_explain_says_why_a_failed_daily_chunk_waits(cli):
    cli.ok("createtables")
    cli.ok("register-dataset", "report")
    cli.ok("register-job", "daily", "--in", "today", "--out", "report")
    script(cli.cwd, "daily.sh", "exit 3")
    assert cli.run_job("./daily.sh").exit_code == 3
    told = cli.ok("explain", "daily")
    today = system_today().isoformat()
    assert f"{today} FAILED: it FAILED and has no automatic retry left; resubmit it" in told.out
    assert "nothing to do" not in told.out


@pytest.mark.both_stores
def test_an_external_drop_is_one_command_checked_and_idempotent(cli, tmp_path):
    cli.ok("createtables")
    cli.ok("register-dataset", "feed")
    cli.ok("register-dataset", "loaded")
    cli.ok("register-job", "load", "--in", "feed", "--out", "loaded")
    before = dump(tmp_path)
    for argv, message in (
        (("ready", "nosuch", "1"), "dataset 'nosuch' is not registered"),
        (("ready", "feed"), "name the chunks"),
        (("ready", "feed", "--from", "2026-11-20"), "give both --from and --to"),
        (("ready", "feed", "--from", "a", "--to", "b"), "two whole numbers or two dates"),
        (("ready", "loaded", "1", "--by", "someone"), "job 'someone' does not produce 'loaded'"),
    ):
        refused = cli.utility(*argv)
        assert refused.code != 0 and message in refused.err, (argv, refused)
        assert refused.err.count("\n") == 1 and "Traceback" not in refused.err
    assert dump(tmp_path) == before

    first = cli.ok("ready", "feed", "--from", "2026-11-19", "--to", "2026-11-20", "--by", "ftp")
    assert first.out == "2 chunks of feed marked READY (0 already READY)\n"
    again = cli.ok("ready", "feed", "2026-11-20", "2026-11-21", "--by", "ftp")
    assert again.out == "1 chunk of feed marked READY (1 already READY)\n"
    assert statuses(tmp_path, "ftp") == dict.fromkeys(
        ["2026-11-19", "2026-11-20", "2026-11-21"], "READY"
    )
    script(tmp_path, "load.sh", 'echo "$dataid" >> loaded')
    assert cli.drain("./load.sh").exit_code == 0
    assert (tmp_path / "loaded").read_text().split() == ["2026-11-19", "2026-11-20", "2026-11-21"]


@pytest.mark.both_stores
def test_a_daily_job_backfills_its_missed_days_oldest_first(cli, tmp_path):
    cli.ok("createtables")
    cli.ok("register-dataset", "report")
    cli.ok("register-job", "late", "--in", "today", "--out", "report")
    today = system_today()
    days = [(today - timedelta(n)).isoformat() for n in (3, 2, 1)]
    refused = cli.utility("resubmit", "late", days[0])
    assert refused.code != 0  # a day that never ran is not a chunk to resubmit...
    changed = cli.ok(
        "resubmit", "late", "--from", days[0], "--to", (today + timedelta(2)).isoformat()
    )
    assert changed.lines[-1] == "4 chunks changed"  # ...but a backfill creates it (not future days)
    assert f"late {days[0]}: none -> RESUBMIT (backfill of a missed day)" in changed.out
    script(tmp_path, "late.sh", 'echo "$dataid" >> ran')
    for _ in range(4):
        assert cli.run_job("./late.sh").exit_code == 0
    assert cli.run_job("./late.sh").started == 0  # nothing left to claim
    assert (tmp_path / "ran").read_text().split() == [*days, today.isoformat()]
    again = cli.ok("resubmit", "late", "--from", days[0], "--to", days[0], "--dry-run")
    assert "backfill" not in again.out  # it ran: a plain resubmit now


@pytest.mark.both_stores
def test_status_shows_only_failures_that_still_stand(cli, tmp_path):
    pipeline(cli)
    cli.ok("ready", "src", "2")
    script(tmp_path, "up.sh", "[ -e fixed ] || exit 4")
    assert cli.run_job("./up.sh").exit_code == 4
    standing = {r["jobid"]: r for r in json.loads(cli.ok("status", "--json").out)}
    assert standing["up"]["last_failure"].startswith("2 at ")
    (tmp_path / "fixed").touch()
    cli.ok("resubmit", "up", "2")
    assert cli.run_job("./up.sh").exit_code == 0
    fixed = {r["jobid"]: r for r in json.loads(cli.ok("status", "--json").out)}
    assert fixed["up"]["last_failure"] == ""
    assert rows(tmp_path, "select count(*) from run where status='FAILED'") == [(1,)]


def test_both_commands_tell_their_version_and_runjob_its_exit_codes(cli):
    from dataflow import __version__

    assert cli.runjob("--version").out == f"RunJob {__version__}\n"
    assert cli.utility("--version").out == f"utility {__version__}\n"
    helped = cli.runjob("--help").out
    for code in ("124", "128+n", "a usage or configuration error"):
        assert code in helped
    # 'runs' lists where chunks stand; 'history' lists the runs: each help says which
    listed = " ".join(cli.utility("--help").out.split())
    assert "chunks list the newest status rows of chunks (OUT rows of datastatus)" in listed
    assert "runs the seed's name for 'chunks', kept" in listed
    assert "see history" in listed
    assert "history list runs (one row per attempt)" in listed


@pytest.mark.both_stores
def test_history_times_carry_their_utc_offset(cli, tmp_path, store_kind):
    pipeline(cli)
    started, ended = rows(tmp_path, "select started, ended from run order by runid limit 1")[0]
    zoned = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}[+-]\d\d:\d\d"
    assert re.fullmatch(zoned, started) and re.fullmatch(zoned, ended), (started, ended)
    (modified,) = rows(tmp_path, "select modified from datastatus where jobid='up'")[0]
    if store_kind == "postgres":  # the seed's column type there: a timestamp, no zone
        assert isinstance(modified, datetime) and modified.tzinfo is None
    else:
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}", modified)  # the seed's format


def test_counts_of_one_read_as_english(cli, tmp_path):
    """'1 chunk waits', '1 row deleted', '1 run purged', '1 job imported': not '1 rows'."""
    pipeline(cli)
    cli.ok("resubmit", "up", "1", "--cascade")
    assert "nothing claimable for down now; 1 chunk waits to rerun" in cli.ok("explain", "down").out
    assert cli.ok("deleterun", "down", "1").out == "1 row deleted for down and 1\n"
    assert cli.run_job("./up.sh").exit_code == 0  # its second attempt: the first may go
    assert cli.ok("purge", "--job", "up").out == "1 run purged\n"
    cli.ok("export", "config.json")
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    cli.ok("--db", str(fresh / "dataflow.db"), "createtables")
    told = cli.ok("--db", str(fresh / "dataflow.db"), "import", "config.json").out
    assert told == "3 datasets and 2 jobs imported\n"
    cli.ok("unregister-job", "down")
    cli.ok("export", "one.json")
    other = tmp_path / "other"
    other.mkdir()
    cli.ok("--db", str(other / "dataflow.db"), "createtables")
    told = cli.ok("--db", str(other / "dataflow.db"), "import", "one.json").out
    assert told == "3 datasets and 1 job imported\n"
