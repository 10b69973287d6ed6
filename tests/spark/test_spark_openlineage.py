"""OpenLineage run events of chunks run inside one Spark driver (``def run``) and of
chunks run together by ``def run_batch``: each chunk is a run of its own, with its START
and its end, told by RunJob from the driver's events (tests/test_openlineage.py covers
job processes)."""

from __future__ import annotations

import pytest

from dataflow.layout import chunk_folder
from support import statuses
from support.receivers import lineage_events, lineage_receiver

SPARK_ARGS = (
    "--master local[2] --conf spark.ui.enabled=false --conf spark.ui.showConsoleProgress=false "
    "--conf spark.log.level=ERROR --conf spark.sql.shuffle.partitions=2"
)
EACH = """\
import os
import dataflow.spark as df


def run(spark, job):
    if job.dataid == os.environ.get("POISON_CHUNK"):
        raise ValueError(f"chunk {job.dataid} is poisoned")
    df.write(df.read(spark, job.input()), job.output())
"""
BATCHED = (
    EACH
    + """

def run_batch(spark, batch):
    if os.environ.get("POISON_CHUNK") in batch.dataids:
        raise ValueError("a chunk is poisoned")
    df.write(df.read(spark, batch.input()), batch.output())
"""
)


@pytest.mark.parametrize("entry", ["run", "run_batch"])
def test_chunks_of_a_driver_are_runs_of_their_own(cli, entry):
    data = cli.cwd / "data"
    for dataid in ("1", "2", "3"):
        folder = data / "src" / chunk_folder(dataid)
        folder.mkdir(parents=True)
        (folder / "part-0.csv").write_text(f"n,name\n{dataid},row {dataid}\n")
    cli.ok("createtables")
    cli.ok(
        "dml",
        f"insert into dataset values ('src', '', 'csv', '{data}', 'src', '', ''),"
        f" ('out', '', 'csv', '{data}', 'out', '', '')",
    )
    cli.ok(
        "dml",
        "insert into job (jobid, itemtype, datasetid, itemvalue) values"
        " ('job', 'IN', 'src', null), ('job', 'OUT', 'out', null),"
        f" ('job', 'spark_args', null, '{SPARK_ARGS}')",
    )
    for dataid in ("1", "2", "3"):
        cli.ok(
            "dml",
            f"insert into datastatus values ('src', 'feed', '{dataid}', 'OUT', 'READY', now())",
        )
    (cli.cwd / "job.py").write_text(BATCHED if entry == "run_batch" else EACH)
    with lineage_receiver() as receiver:
        options = ["--batch", "3"] if entry == "run_batch" else ["--all"]
        env = {"OPENLINEAGE_URL": receiver.url, "POISON_CHUNK": "2"}
        env["DATAFLOW_LINEAGE_TIMEOUT"] = "60"  # a sender that works, on a busy machine
        ran = cli.runjob(*options, "./job.py", env=env, timeout=900)
        assert ran.code == 1, ran  # chunk 2 FAILED
        events = lineage_events(receiver)
    assert statuses(cli.cwd, "job") == {"1": "READY", "2": "FAILED", "3": "READY"}
    runs: dict[str, list[dict]] = {}
    for event in events:
        runs.setdefault(event["run"]["runId"], []).append(event)
    ends = {}
    for told in runs.values():
        assert len(told) == 2 and told[0]["eventType"] == "START", told
        chunk = told[1]["run"]["facets"]["opendataflow_chunk"]
        ends[chunk["dataid"]] = told[1]["eventType"]
    assert ends == {"1": "COMPLETE", "2": "FAIL", "3": "COMPLETE"}
    assert {tuple((d["namespace"], d["name"]) for d in e["inputs"]) for e in events} == {
        (("file", f"{data}/src"),)
    }
    assert {tuple((d["namespace"], d["name"]) for d in e["outputs"]) for e in events} == {
        (("file", f"{data}/out"),)
    }
