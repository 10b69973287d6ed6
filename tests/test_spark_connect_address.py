"""The Spark Connect address of a job: which one wins, its token never shown, its host
and port (RunJob's side, no server needed)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dataflow.errors import SparkConnectUnavailable
from dataflow.run.spark import sparkconnect

VALUE = st.text(st.characters(blacklist_characters=";\n\x00", codec="utf-8"), min_size=1)
PARAMS = st.lists(st.tuples(st.sampled_from(["user_id", "use_ssl", "session_id"]), VALUE))


def test_spark_remote_wins_over_the_setting_which_must_name_a_server_the_host_allows(tmp_path):
    setting = {"spark_remote": "sc://stored:15002"}
    policy = tmp_path / "policy.toml"
    policy.write_text('[spark]\nremotes = ["sc://stored:15002"]\n')
    host = {"DATAFLOW_POLICY": str(policy)}
    assert sparkconnect.remote(setting, {**host, "SPARK_REMOTE": "sc://oneoff"}) == "sc://oneoff"
    assert sparkconnect.remote(setting, host) == "sc://stored:15002"
    assert sparkconnect.remote({"spark_remote": ""}, {**host, "SPARK_REMOTE": ""}) is None
    for other in ("sc://stored:15003", "sc://elsewhere:15002", "notaurl"):
        with pytest.raises(SparkConnectUnavailable, match="the job setting spark_remote: "):
            sparkconnect.remote({"spark_remote": other}, host)


@given(token=VALUE, before=PARAMS, after=PARAMS)
def test_the_token_is_masked_wherever_it_stands(token, before, after):
    params = [*before, ("token", token), *after]
    url = "sc://host:15002/;" + ";".join(f"{k}={v}" for k, v in params)
    masked = sparkconnect.masked(url)
    assert sparkconnect.secrets(url) == [token]
    assert masked.count(";token=***") == 1
    # everything but the token is kept as it was
    assert masked == url.replace(f";token={token}", ";token=***", 1)
    assert sparkconnect.address("job.py", url) == ("host", 15002)


@pytest.mark.parametrize(
    ("url", "where"),
    [
        ("sc://spark1", ("spark1", 15002)),
        ("sc://spark1:443/;use_ssl=true", ("spark1", 443)),
        ("sc://[::1]:15003", ("::1", 15003)),
    ],
)
def test_host_and_port(url, where):
    assert sparkconnect.address("job.py", url) == where


@pytest.mark.parametrize("url", ["http://spark1:15002", "sc://", "spark1:15002", "sc://h:port"])
def test_not_an_address(url):
    with pytest.raises(SparkConnectUnavailable, match="is not a Spark Connect address"):
        sparkconnect.address("job.py", url)


def test_getjob_shows_the_address_without_its_token(cli):
    cli.ok("createtables")
    cli.ok("dml", "insert into dataset (datasetid, database) values ('out', 'parquet')")
    cli.ok(
        "dml",
        "insert into job (jobid, itemtype, datasetid, itemvalue) values "
        "('daily', 'IN', 'today', null), ('daily', 'OUT', 'out', null), "
        "('daily', 'spark_remote', null, 'sc://spark1:15002/;token=abc123;user_id=etl')",
    )
    shown = cli.ok("getjob", "daily")
    assert "sc://spark1:15002/;token=***;user_id=etl" in shown.out
    assert "abc123" not in shown.out + shown.err
