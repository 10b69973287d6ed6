"""Operator commands of issue 25: ``utility set`` / ``unset`` (one setting, validated, all or
nothing) and ``status JOB``."""

from __future__ import annotations

import json

import pytest

from support import host_policy

pytestmark = pytest.mark.both_stores


def items(cli):
    return json.loads(cli.ok("export", "-").out)["jobs"]["load"]


def test_set_and_unset_change_only_the_named_settings(cli):
    host_policy(cli.cwd, '[env]\nallow = ["region"]\n')
    cli.ok("createtables")
    for name in ("src", "mid"):
        cli.ok("register-dataset", name)
    cli.ok("register-job", "load", "--in", "src", "--out", "mid", "--set", "retries=2")
    assert cli.ok("set", "load", "retries=5", "region=eu").out == "job load: retries, region set\n"
    assert items(cli) == [
        {"itemtype": "IN", "datasetid": "src"},
        {"itemtype": "OUT", "datasetid": "mid"},
        {"itemtype": "retries", "itemvalue": "5"},
        {"itemtype": "region", "itemvalue": "eu"},
    ]
    assert cli.ok("unset", "load", "retries").out == "job load: retries removed\n"
    assert [i["itemtype"] for i in items(cli)] == ["IN", "OUT", "region"]

    before = cli.ok("export", "-").out
    for argv, message in [
        (("set", "load", "retries=many"), "retries"),
        (("set", "load", "novalue"), "NAME=VALUE"),
        (("set", "load", "IN=x"), "register-job"),
        (("set", "load", "bad-name=1"), "environment variable"),
        (("unset", "load", "retries"), "has no setting 'retries'"),
        (("set", "nojob", "retries=1"), "unknown job"),
    ]:
        refused = cli.utility(*argv)
        assert refused.code == 2 and refused.out == "", refused
        assert refused.err.startswith("error: ") and message in refused.err, refused
        assert refused.err.count("\n") == 1, refused
    assert cli.ok("export", "-").out == before  # nothing half-written


def test_status_of_one_job(cli):
    cli.ok("createtables")
    for name in ("src", "mid", "out"):
        cli.ok("register-dataset", name)
    cli.ok("register-job", "load", "--in", "src", "--out", "mid")
    cli.ok("register-job", "shape", "--in", "mid", "--out", "out")
    assert [r["jobid"] for r in json.loads(cli.ok("--json", "status").out)] == ["load", "shape"]
    assert [r["jobid"] for r in json.loads(cli.ok("--json", "status", "shape").out)] == ["shape"]
    refused = cli.utility("status", "nojob")
    assert refused.code == 2 and refused.out == "", refused
    assert refused.err.startswith("error: unknown job 'nojob'") and refused.err.count("\n") == 1
