"""OpenLineage run events (issue 44): real RunJobs, configured as the openlineage-python
client is, tell a real local HTTP receiver of each run's START and COMPLETE or FAIL; every
event is checked against the OpenLineage RunEvent schema (tests/data). A receiver that is
down or hangs never fails a run; a RunJob that is not configured never imports the client."""

from __future__ import annotations

import json
import socket
import sys
import uuid

import pytest
from jsonschema import Draft202012Validator

from dataflow.run.listeners import lineagefeed
from support import ROOT, rows, script, start_runjob, statuses, wait_for
from support.receivers import lineage_events, lineage_receiver

pytestmark = pytest.mark.both_stores

VALIDATOR = Draft202012Validator(
    json.loads((ROOT / "tests" / "data" / "openlineage-runevent.schema.json").read_text()),
    format_checker=Draft202012Validator.FORMAT_CHECKER,
)
PASSKEY, PASSWORD = "k3yOfTheHost", "s3cretPassw0rd"


@pytest.fixture
def receiver():
    with lineage_receiver() as server:
        yield server


@pytest.fixture
def pipeline(cli, tmp_path):
    """Job ``merge``: IN ``orders`` (a table on db1, its password sealed with PASSKEY) and
    ``rates`` (no metadata), OUT ``report`` (a table of warehouse); chunks 1..3 READY of
    both inputs. Its script fails for a chunk whose file ``fail-<dataid>`` exists, and
    waits for file ``go`` for one whose ``wait-<dataid>`` exists."""
    cli.env["HOME"] = str(tmp_path / "home")  # no openlineage.yml of the machine's user
    token = cli.ok("crypt", "-e", PASSWORD, env={"PASSKEY": PASSKEY}).out.strip()
    cli.ok("createtables")
    cli.ok(
        "dml",
        "insert into dataset (datasetid, hostname, database, schemaname, tablename, username,"
        f" encryptedpass) values ('orders', 'db1', 'shop', 'public', 'orders', 'etl', '{token}'),"
        " ('rates', null, null, null, null, null, null),"
        " ('report', null, 'warehouse', null, 'daily_report', null, null)",
    )
    cli.ok(
        "dml",
        "insert into job (jobid, itemtype, datasetid) values ('merge', 'IN', 'orders'),"
        " ('merge', 'IN', 'rates'), ('merge', 'OUT', 'report')",
    )
    for dataset in ("orders", "rates"):
        for dataid in ("1", "2", "3"):
            cli.ok(
                "dml",
                f"insert into datastatus values ('{dataset}', 'load', '{dataid}', 'OUT',"
                " 'READY', now())",
            )
    script(
        tmp_path,
        "merge.sh",
        'test ! -e "fail-$dataid" || { echo "bad $dataid" >&2; exit 3; }\n'
        'test ! -e "wait-$dataid" || while [ ! -e go ]; do sleep 0.05; done',
    )
    cli.env["PASSKEY"] = PASSKEY
    cli.env["DATAFLOW_LINEAGE_TIMEOUT"] = "60"  # a sender that works, on a busy machine
    return cli


def _events(receiver) -> list[dict]:
    return lineage_events(receiver, (PASSWORD, PASSKEY))


def _chunk(event: dict) -> dict:
    return event["run"]["facets"]["opendataflow_chunk"]


def test_schema_checks_the_formats():
    """The formats a RunEvent's schema names are checked, not passed over: a test whose
    validator cannot tell a UUID, a time or a URI from any text could not fail."""
    assert {"uuid", "date-time", "uri"} <= set(VALIDATOR.FORMAT_CHECKER.checkers)
    with pytest.raises(Exception, match="uuid"):
        VALIDATOR.validate(
            {
                "eventTime": "2026-01-01T00:00:00+00:00",
                "producer": "urn:x",
                "schemaURL": "urn:y",
                "run": {"runId": "42"},
                "job": {"namespace": "a", "name": "b"},
            }
        )


@pytest.mark.parametrize(
    ("row", "named"),
    [
        (("db1", "shop", "public", "orders"), ["db1", "shop.public.orders"]),
        (("", "warehouse", "", "daily"), ["etl", "warehouse.daily"]),
        (("", "", "", ""), ["etl", "rates"]),
        (("", "parquet", "/data/lake", "clean"), ["file", "/data/lake/clean"]),
        (("nn", "csv", "file:///srv/in/", "raw"), ["file", "/srv/in/raw"]),
        (("", "orc", "s3a://bucket/lake", "t"), ["s3a://bucket", "/lake/t"]),
        (("", "parquet", "hdfs://nn:8020/x", ""), ["hdfs://nn:8020", "/x"]),
    ],
)
def test_how_datasets_are_named(row, named):
    """A dataset's name in an event, from its row (docs/lineage.md): a table by its host
    and dotted name, a file dataset by its folder."""
    columns = ("hostname", "database", "schemaname", "tablename")
    variables = {f"rates_{column}": value for column, value in zip(columns, row, strict=True)}
    variables["rates_password"] = PASSWORD
    assert lineagefeed.dataset_name("rates", variables, "etl") == named


@pytest.mark.parametrize("fails", [False, True], ids=["complete", "fail"])
def test_a_run_tells_its_start_and_end(pipeline, receiver, tmp_path, fails):
    if fails:
        (tmp_path / "fail-1").touch()
    ran = pipeline.run_job("./merge.sh", env={"OPENLINEAGE_URL": receiver.url})
    assert ran.exit_code == (3 if fails else 0), ran
    assert ran.warnings == ()  # what RunJob would say on stderr (events not sent...)
    start, end = _events(receiver)
    assert (start["eventType"], end["eventType"]) == ("START", "FAIL" if fails else "COMPLETE")
    assert start["run"]["runId"] == end["run"]["runId"]
    assert uuid.UUID(start["run"]["runId"]).version == 5
    for event in (start, end):
        assert event["job"]["namespace"] == "opendataflow"
        assert event["job"]["name"] == "merge"
        assert [(d["namespace"], d["name"]) for d in event["inputs"]] == [
            ("db1", "shop.public.orders"),
            ("opendataflow", "rates"),
        ]
        assert [(d["namespace"], d["name"]) for d in event["outputs"]] == [
            ("opendataflow", "warehouse.daily_report")
        ]
        facet = _chunk(event)
        assert (facet["dataid"], facet["attempt"]) == ("1", 1)
        assert [(facet["runid"],)] == rows(tmp_path, "select runid from run where jobid=?", "merge")
        assert facet["_producer"] and facet["_schemaURL"]
    assert "status" not in _chunk(start)
    assert _chunk(end)["status"] == ("FAILED" if fails else "READY")
    assert start["eventTime"] <= end["eventTime"]


@pytest.mark.long
def test_the_next_run_of_a_chunk_is_another_run(pipeline, receiver, tmp_path):
    """A retry of a chunk is a run of its own: another runId, attempt 2."""
    (tmp_path / "fail-1").touch()
    environ = {"OPENLINEAGE_URL": receiver.url, "OPENLINEAGE_NAMESPACE": "etl-prod"}
    assert pipeline.runjob("./merge.sh", env=environ).code == 3
    (tmp_path / "fail-1").unlink()
    pipeline.ok("resubmit", "merge", "1")
    assert pipeline.runjob("./merge.sh", env=environ).code == 0
    events = _events(receiver)
    assert [e["eventType"] for e in events] == ["START", "FAIL", "START", "COMPLETE"]
    assert {e["job"]["namespace"] for e in events} == {"etl-prod"}
    assert events[0]["run"]["runId"] != events[2]["run"]["runId"]
    assert [_chunk(e)["attempt"] for e in events] == [1, 1, 2, 2]


@pytest.mark.parametrize("workers", [[], ["--workers", "2"]], ids=["runjob", "workers"])
@pytest.mark.long
def test_a_parallel_drain_tells_each_run(pipeline, receiver, tmp_path, workers):
    """--parallel 2, in RunJob (on PostgreSQL: in a worker a core) or in two workers,
    whose events RunJob relays."""
    (tmp_path / "fail-2").touch()
    environ = {"OPENLINEAGE_URL": receiver.url}
    ran = pipeline.runjob("--parallel", "2", *workers, "./merge.sh", env=environ)
    assert ran.code == 1, ran
    events = _events(receiver)
    runs: dict[str, list[dict]] = {}
    for event in events:
        runs.setdefault(event["run"]["runId"], []).append(event)
    assert len(runs) == 3
    ends = {}
    for told in runs.values():
        assert len(told) == 2 and told[0]["eventType"] == "START"
        assert _chunk(told[0])["dataid"] == _chunk(told[1])["dataid"]
        ends[_chunk(told[1])["dataid"]] = told[1]["eventType"]
    assert ends == {"1": "COMPLETE", "2": "FAIL", "3": "COMPLETE"}


def test_a_run_whose_result_is_refused_is_aborted(pipeline, receiver, tmp_path):
    """A run whose chunk was ended by hand while it ran (its result is fenced off) ends
    as ABORT: its job ran, but nothing it made counts."""
    (tmp_path / "wait-1").touch()
    running = start_runjob(pipeline, "./merge.sh", env={"OPENLINEAGE_URL": receiver.url})
    wait_for(lambda: statuses(tmp_path, "merge").get("1") == "RUNNING", 30, "the run")
    pipeline.ok("endjob", "--force", "merge", "1", "READY")
    (tmp_path / "go").touch()
    out, err = running.communicate(timeout=60)
    assert running.returncode == 1, (out, err)
    start, end = _events(receiver)
    assert (start["eventType"], end["eventType"]) == ("START", "ABORT")
    assert start["run"]["runId"] == end["run"]["runId"]


def test_the_client_config_file(pipeline, receiver, tmp_path):
    """Configured by the client's own file (OPENLINEAGE_CONFIG), not OPENLINEAGE_URL."""
    config = tmp_path / "openlineage.yml"
    config.write_text(f"transport:\n  type: http\n  url: {receiver.url}\n")
    ran = pipeline.run_job("./merge.sh", env={"OPENLINEAGE_CONFIG": str(config)})
    assert ran.exit_code == 0, ran
    assert [e["eventType"] for e in _events(receiver)] == ["START", "COMPLETE"]


def _closed_port() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


@pytest.fixture
def hanging():
    """A receiver that takes connections and never answers."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(16)
        yield f"http://127.0.0.1:{server.getsockname()[1]}"


@pytest.mark.parametrize("where", ["down", "hangs"])
@pytest.mark.long  # waits out the events' timeout
def test_a_receiver_down_or_hanging_never_fails_a_run(pipeline, hanging, tmp_path, where):
    url = _closed_port() if where == "down" else hanging
    environ = {"OPENLINEAGE_URL": url, "DATAFLOW_LINEAGE_TIMEOUT": "2"}
    ran = pipeline.runjob("--all", "./merge.sh", env=environ)
    assert ran.code == 0, ran
    assert set(statuses(tmp_path, "merge").values()) == {"READY"}
    said = [line for line in ran.err.splitlines() if "OpenLineage" in line]
    assert len(said) == 1, ran.err
    assert said[0] == "warning: OpenLineage events not all sent within 2 s" or said[0].startswith(
        "warning: OpenLineage events: 6 of 6 not sent ("
    ), said


def test_without_the_client_a_run_goes_on(pipeline, receiver, tmp_path):
    """Configured, but the client cannot be imported (here: hidden by a package of that
    name that fails): one line says how to install it, the run is as always."""
    hidden = tmp_path / "hidden" / "openlineage"
    hidden.mkdir(parents=True)
    (hidden / "__init__.py").write_text("raise ImportError('not installed')\n")
    environ = {"OPENLINEAGE_URL": receiver.url, "PYTHONPATH": str(hidden.parent)}
    ran = pipeline.runjob("./merge.sh", env=environ)
    assert ran.code == 0, ran
    assert statuses(tmp_path, "merge")["1"] == "READY"
    said = [line for line in ran.err.splitlines() if "OpenLineage" in line]
    assert said == ["warning: OpenLineage events need: pip install opendataflow[lineage]"]
    assert receiver.got == []


def test_not_configured_imports_nothing_of_it(pipeline, receiver, tmp_path):
    """Without its configuration RunJob neither imports the client nor starts a sender;
    with it, RunJob itself still does not import the client (its sender does)."""
    command = [sys.executable, "-X", "importtime", "-m", "dataflow.cli.runjob", "./merge.sh"]
    plain = pipeline(*command, env={"PYTHONPATH": str(ROOT)})
    assert plain.code == 0, plain
    imported = [line.split("|")[-1].strip() for line in plain.err.splitlines() if "|" in line]
    assert "dataflow.run.claim.claims" in imported  # (the check sees our modules)
    assert not [name for name in imported if name.startswith("openlineage")]
    told = pipeline(*command, env={"PYTHONPATH": str(ROOT), "OPENLINEAGE_URL": receiver.url})
    assert told.code == 0, told
    assert "openlineage" not in told.err.replace("OPENLINEAGE", "")
    assert [e["eventType"] for e in _events(receiver)] == ["START", "COMPLETE"]
    assert _chunk(_events(receiver)[0])["dataid"] == "2"
