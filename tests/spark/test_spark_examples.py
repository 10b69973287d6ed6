"""The examples, run from their shell scripts as a user would: each must tell its story."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parent.parent.parent / "examples"
DAYS = ["2025-11-01", "2025-11-02", "2025-11-03", "2025-11-04"]


def section(out: str, title: str) -> str:
    """The output of the run.sh section whose heading starts with ``title``."""
    return out.split(f"\n== {title}", 1)[1].split("\n== ", 1)[0]


def test_daily_pipeline_catches_up_after_a_failure_and_rebuilds_one_day(cli, tmp_path):
    result = cli(
        str(EXAMPLES / "daily_pipeline" / "run.sh"),
        env={"DEMO_DIR": str(tmp_path / "daily")},
        timeout=1500,
    )
    assert result.code == 0, result.out[-3000:] + result.err[-3000:]
    out = result.out
    assert "4 transformations: 4 ok, 0 failed, 0 untested" in out

    first = section(out, "Each job catches up")
    # one Spark driver per job, the days batched: each day still ends on its own, and
    # the bad file, split out of its batch, fails alone with its own reason
    ended = re.findall(r": (\w+) (\S+) (READY|FAILED) \(attempt 1, [\d.]+ s\)(.*)", first)
    assert [e[0] for e in ended] == ["extract"] * 4 + ["clean"] * 3 + ["aggregate"] * 3
    assert sorted(e[1:3] for e in ended if e[0] == "extract") == [
        (d, "FAILED" if d == "2025-11-03" else "READY") for d in DAYS
    ]
    for job in ("clean", "aggregate"):  # every job goes on with the days it can do
        assert sorted(e[1:3] for e in ended if e[0] == job) == [
            (d, "READY") for d in DAYS if d != "2025-11-03"
        ]
    (reason,) = [e[3] for e in ended if e[2] == "FAILED"]
    assert reason.startswith(" extract: the landing file of 2025-11-03 has columns"), reason
    assert "extract: 3 READY, 1 FAILED" in first and "Launching" not in first

    redelivered = section(out, "The feed redelivers")
    assert re.findall(r"Launching \./(\w+)\.py with dataid (\S+)", redelivered) == [
        ("extract", "2025-11-03"),
        ("clean", "2025-11-03"),
        ("aggregate", "2025-11-03"),
    ]

    rebuilt = section(out, "Late orders")
    assert re.findall(r"Launching \./(\w+)\.py with dataid (\S+)", rebuilt) == [
        ("extract", "2025-11-02"),
        ("clean", "2025-11-02"),
        ("aggregate", "2025-11-02"),
    ]
    for day in DAYS:
        state = "rebuilt" if day == "2025-11-02" else "untouched"
        assert f"daily_totals {day}: {state}" in rebuilt

    final = section(out, "Final state")
    assert final.count("READY") == 12 and "FAILED" not in final
    # the feed sends 40 orders a day (50 with the late ones): 2 invalid, 1 sent twice
    orders = dict(re.findall(r"^(2025-\d\d-\d\d)\s+(\d+)\s", final, re.MULTILINE))
    assert orders == {
        "2025-11-01": "38",
        "2025-11-02": "48",
        "2025-11-03": "38",
        "2025-11-04": "38",
    }


def run_migration(cli, tmp_path: Path, source: str, shards: int, rows: int, chaos: int):
    return cli(
        str(EXAMPLES / "migration" / "run.sh"),
        env={
            "DEMO_DIR": str(tmp_path / "migration"),
            "MIGRATION_SOURCE": source,
            "SHARDS": str(shards),
            "ROWS": str(rows),
            "CHAOS_SHARD": str(chaos),
        },
        timeout=1500,
    )


def check_migration(out: str, shards: int, rows: int, chaos: int, folder: Path) -> None:
    total = shards * rows
    logs = folder / "migration" / "dataflow.db.d" / "logs"
    # one Spark driver per drain (two drains of load: the first, and the retry)
    assert len(list((logs / "extract").glob("driver.*.log"))) == 1
    assert len(list((logs / "load").glob("driver.*.log"))) == 2
    assert len(list((logs / "load").glob("[0-9]*.log"))) == shards + 1  # a log per run
    assert re.search(rf": extract: {shards} READY, 0 FAILED in ", out), out
    assert re.search(rf": load: {shards - 1} READY, 1 FAILED in ", out), out
    assert "-- load: some shards failed" in out
    assert f"load: shard {chaos}: simulated failure (CHAOS_SHARD)" in out
    assert (
        f"reconciliation: {shards} shards, {shards - 1} match, 1 differ "
        f"(source {total} rows, lake {total - rows} rows)\n"
        f"  shard {chaos}: source {rows} rows, lake 0 rows"
    ) in out
    retry = section(out, "Retry it")
    assert f"1 row updated to RESUBMIT for load and {chaos}\n" in retry
    assert re.search(r": load: 1 READY, 0 FAILED in ", retry), retry
    final = section(out, "Reconcile again").strip().splitlines()
    assert final[2] == (
        f"reconciliation: {shards} shards, {shards} match, 0 differ "
        f"(source {total} rows, lake {total} rows)"
    )


def test_migration_from_postgresql(cli, tmp_path):
    result = run_migration(cli, tmp_path, "postgres", shards=24, rows=25, chaos=2)
    if result.code == 3:
        pytest.skip(f"PostgreSQL cannot be had here: {result.err.strip()}")
    assert result.code == 0, result.out[-3000:] + result.err[-3000:]
    assert re.search(r"^PostgreSQL at 127\.0\.0\.1:\d+, database source", result.out, re.MULTILINE)
    check_migration(result.out, shards=24, rows=25, chaos=2, folder=tmp_path)


def test_migration_from_the_embedded_source(cli, tmp_path):
    result = run_migration(cli, tmp_path, "embedded", shards=24, rows=10, chaos=17)
    assert result.code == 0, result.out[-3000:] + result.err[-3000:]
    assert "embedded CSV source in" in result.out
    check_migration(result.out, shards=24, rows=10, chaos=17, folder=tmp_path)


def test_streaming_items_become_chunks_a_batch_job_consumes(cli, tmp_path):
    result = cli(
        str(EXAMPLES / "streaming" / "run.sh"),
        env={"DEMO_DIR": str(tmp_path / "streaming")},
        timeout=900,
    )
    assert result.code == 0, result.out[-3000:] + result.err[-3000:]
    out = result.out
    assert "clean_stream: watching the landing folder" in section(out, "Start the stream")
    one = section(out, "One incoming order")
    assert "1 item dropped into landing" in one
    assert "clean_stream: batch 0 -> chunk 0 of clean, 1 clean order, READY" in one
    three = section(out, "Three more orders")
    assert "3 items dropped into landing" in three
    # one of the three has no sku: 2 clean orders, in one micro-batch (or two)
    written = re.findall(r"-> chunk (\d+) of clean, (\d+) clean orders?, READY", three)
    assert [d for d, _ in written] == [str(n) for n in range(1, len(written) + 1)]
    assert sum(int(n) for _, n in written) == 2
    consumed = section(out, "The downstream batch job")
    assert re.search(rf": store_totals: {len(written) + 1} READY, 0 FAILED in ", consumed)
    assert "store_totals: chunk 1: " in consumed
    late = section(out, "A late order")
    last = str(len(written) + 1)
    assert f"-> chunk {last} of clean, 1 clean order, READY" in late
    assert re.search(rf": store_totals {last} READY \(attempt 1", late)
    assert re.search(r": store_totals: 1 READY, 0 FAILED in ", late)
    final = re.findall(r"^(\w+)\s+(\d+)\s+(\w+)$", section(out, "Final state"), re.MULTILINE)
    chunks = [str(n) for n in range(int(last) + 1)]
    assert final == [(job, d, "READY") for job in ("clean_stream", "store_totals") for d in chunks]


def test_streaming_over_http_orders_posted_with_curl_become_chunks(cli, tmp_path):
    result = cli(
        str(EXAMPLES / "streaming" / "serve.sh"),
        env={"DEMO_DIR": str(tmp_path / "serve")},
        timeout=900,
    )
    assert result.code == 0, result.out[-3000:] + result.err[-3000:]
    out = result.out
    assert re.search(r"^serving http://127\.0\.0\.1:\d+: ", section(out, "Start the server"), re.M)
    one = section(out, "One order POSTed")
    assert '"items": 1,' in one and '"duplicate": false' in one
    assert "clean_stream: batch 0 -> chunk 0 of clean, 1 clean order, READY" in one
    three = section(out, "Three orders in one CSV body")
    answers = re.findall(r'"items": 3, "file": "(key-\w+\.csv)", "duplicate": (\w+)', three)
    assert [d for _, d in answers] == ["false", "true"] and answers[0][0] == answers[1][0]
    written = re.findall(r"-> chunk (\d+) of clean, (\d+) clean orders?, READY", three)
    assert sum(int(n) for _, n in written) == 2  # one order without a sku, cleaned away
    consumed = section(out, "The downstream batch job")
    assert re.search(rf": store_totals: {len(written) + 1} READY, 0 FAILED in ", consumed)
    refused = section(out, "A mistake is refused")
    assert '{"error": "the body is not JSON: ' in refused and '{"error": "a valid token' in refused
    assert len(re.findall(r"^(item|key)-\S+\.csv$", refused, re.M)) == 2  # nothing more landed
    status = section(out, "The same status")
    assert f"clean_stream {len(written) + 1} READY" in status
    log = section(out, "The server's log")
    assert re.search(
        r"^127\.0\.0\.1 POST /stream/landing 202 3 items \(duplicate\) \d+ ms$", log, re.M
    )
    assert "1002" not in log and "Bearer" not in log  # no body, no token
