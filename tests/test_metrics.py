"""``GET /metrics`` of ``utility serve``: the store's chunks, late chunks, runs, run
durations, claim latency and the items the server landed, in Prometheus' text format,
read from the store at each scrape; parsed by ``prometheus_client``'s own parser, and
scraped by a real Prometheus server (the Debian package) with the bearer token."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from datetime import date, timedelta

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from support import installed, run_is_live, script, start_runjob, wait_for, written
from support.serving import Server, client, token_file

pytestmark = [pytest.mark.both_stores, pytest.mark.filterwarnings("ignore::ResourceWarning")]

TWO_HOURS_AGO = {  # now() - 2 h, in each backend's own SQL, as its now() writes it
    "sqlite": "datetime('now', 'localtime', '-2 hours')",
    "postgres": "localtimestamp - interval '2 hours'",
}
STATUSES = ("RUNNING", "READY", "FAILED", "RESUBMIT", "HOLD")


def _pipeline(cli, tmp_path, store_kind) -> None:
    """Job ``work`` (src -> dst, ready_by 00:00) over three past days, src READY two hours
    ago: the first day's run READY, the second's FAILED (exit 3), the third's killed
    (RunJob and job, -9) and recovered as abandoned. And a landing dataset."""
    today = date.today()
    ready, failed, killed = [(today - timedelta(days=n)).isoformat() for n in (3, 2, 1)]
    cli.ok("createtables")
    cli.ok("register-dataset", "src")
    cli.ok("register-dataset", "dst")
    cli.ok("register-dataset", "landing", "--database", "json", "--schemaname",
           str(tmp_path / "data"), "--tablename", "landing")  # fmt: skip
    cli.ok("register-job", "work", "--in", "src", "--out", "dst")
    cli.ok("set", "work", "ready_by=00:00")
    cli.ok("ready", "src", ready, failed, killed)
    cli.ok("dml", f"update datastatus set modified = {TWO_HOURS_AGO[store_kind]} "
           "where datasetid = 'src'")  # fmt: skip
    script(tmp_path, "work.sh", "\n".join([
        "sleep 1.1",  # every finished run takes more than a second
        f'[ "$dataid" = {failed} ] && {{ echo "bad amount" >&2; exit 3; }}',
        f'[ "$dataid" = {killed} ] && {{ echo "$$" > job.pid; exec sleep 60; }}',
        'echo "did $dataid"',
    ]))  # fmt: skip
    assert cli.run_job("./work.sh").exit_code == 0
    assert cli.run_job("./work.sh").exit_code == 3
    runjob = start_runjob(cli, "./work.sh", start_new_session=True)
    wait_for(lambda: written(tmp_path / "job.pid"), what="the job to start")
    os.kill(runjob.pid, signal.SIGKILL)  # RunJob, then the job's group: a power cut
    runjob.wait()
    os.killpg(int((tmp_path / "job.pid").read_text()), signal.SIGKILL)
    wait_for(lambda: not run_is_live(tmp_path, "work", killed), what="the killed run to die")
    assert "1 abandoned chunk recovered" in cli.ok("recover").out


def _samples(text: str) -> dict[tuple[str, frozenset], float]:
    """Each sample of a scrape: (name, its labels) -> value."""
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


@pytest.mark.long
def test_metrics_tell_the_stores_chunks_runs_durations_latency_and_the_items_landed(
    cli, tmp_path, store_kind
):
    _pipeline(cli, tmp_path, store_kind)
    token_path, token = token_file(tmp_path)
    server = Server(cli, token_path, "--landing-root", str(tmp_path)).start()
    try:
        with client(server, None) as http:
            refused = http.get("/metrics")
        with client(server, token) as http:
            assert http.post("/stream/landing", json=[{"n": 1}, {"n": 2}, {"n": 3}]).is_success
            for _ in range(2):  # a retry lands nothing, and is not counted again
                again = http.post("/stream/landing", json=[{"n": 4}, {"n": 5}],
                                  headers={"Idempotency-Key": "order-4-5"})  # fmt: skip
                assert again.is_success
            answer = http.get("/metrics")
    finally:
        assert server.stop() == 0
    assert refused.status_code == 401  # like every read, without --open-read
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    got = _samples(answer.text)

    def value(name: str, **labels: str) -> float:
        return got[(name, frozenset(labels.items()))]

    chunks = {status: value("dataflow_chunks", job="work", status=status) for status in STATUSES}
    assert chunks == {"RUNNING": 0, "READY": 1, "FAILED": 2, "RESUBMIT": 0, "HOLD": 0}
    assert value("dataflow_late_chunks", job="work") == 2  # the two FAILED days
    assert value("dataflow_runs_started_total", job="work") == 3
    assert value("dataflow_runs_failed_total", job="work") == 2
    assert value("dataflow_runs_abandoned_total", job="work") == 1
    # the two runs that ended, each over a second; the abandoned one has no duration
    duration = "dataflow_run_duration_seconds"
    assert value(f"{duration}_count", job="work") == 2
    assert value(f"{duration}_bucket", job="work", le="1.0") == 0
    assert value(f"{duration}_bucket", job="work", le="+Inf") == 2
    assert value(f"{duration}_sum", job="work") >= 2.2
    # each chunk's first run started over two hours after src was READY
    latency = "dataflow_claim_latency_seconds"
    assert value(f"{latency}_count", job="work") == 3
    assert value(f"{latency}_bucket", job="work", le="7200.0") == 0
    assert value(f"{latency}_bucket", job="work", le="21600.0") == 3
    assert value(f"{latency}_sum", job="work") >= 3 * 7200
    assert value("dataflow_items_landed_total", dataset="landing") == 5


def _needed(name: str) -> str:
    why = f"{name} is needed to test /metrics with a real Prometheus: apt-get install {name}"
    return installed(name, message=why)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.long
def test_a_real_prometheus_scrapes_the_metrics_with_the_token_and_answers_a_query(
    cli, tmp_path, store_kind
):
    binary = _needed("prometheus")
    _pipeline(cli, tmp_path, store_kind)
    token_path, _ = token_file(tmp_path)
    server = Server(cli, token_path).start()
    port = _free_port()
    config = tmp_path / "prometheus.yml"  # JSON is YAML
    config.write_text(json.dumps({
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [{
            "job_name": "dataflow",
            "scrape_interval": "1s",
            "scrape_timeout": "1s",
            "honor_labels": True,  # our label job is the dataflow job's, not the target's
            "authorization": {"type": "Bearer", "credentials_file": str(token_path)},
            "static_configs": [{"targets": [f"127.0.0.1:{server.port}"]}],
        }],
    }))  # fmt: skip
    log = tmp_path / "prometheus.log"
    with open(log, "wb") as out:
        prometheus = subprocess.Popen(
            [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{port}"],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    query = 'dataflow_chunks{job="work",status="FAILED"}'
    seen = "nothing"
    try:
        deadline = time.monotonic() + 60
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            while time.monotonic() < deadline:
                assert prometheus.poll() is None, f"prometheus exited: {log.read_text()}"
                try:
                    answer = http.get("/api/v1/query", params={"query": query})
                    seen = answer.text
                    result = answer.json()["data"]["result"] if answer.is_success else []
                except httpx.TransportError as exc:  # not listening yet
                    seen, result = repr(exc), []
                if result:
                    break
                time.sleep(0.5)
            else:
                targets = http.get("/api/v1/targets").text if seen.startswith("{") else ""
                pytest.fail(f"Prometheus never answered {query}: {seen} {targets}")
    finally:
        os.killpg(prometheus.pid, signal.SIGKILL)
        prometheus.wait(30)
        assert server.stop() == 0
    [series] = result
    assert series["value"][1] == "2"
    assert series["metric"]["instance"] == f"127.0.0.1:{server.port}"  # scraped, token and all
