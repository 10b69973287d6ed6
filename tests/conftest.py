"""Shared fixtures: a real store file in tmp_path, and the real CLIs in subprocesses."""

from __future__ import annotations

from pathlib import Path

import pytest

from dataflow.store import create_store
from support import Cli


@pytest.fixture
def cli(tmp_path: Path) -> Cli:
    return Cli(tmp_path)


@pytest.fixture
def store(tmp_path: Path):
    """A fresh store on a real file."""
    created, _ = create_store(tmp_path / "dataflow.db")
    yield created
    created.close()


@pytest.fixture
def chain(cli, tmp_path):
    """Job ``work`` (src -> dst), chunks 1..3 of src READY."""
    cli.ok("createtables")
    cli.ok("dml", "insert into dataset (datasetid) values ('src'), ('dst')")
    cli.ok(
        "dml",
        "insert into job (jobid,itemtype,datasetid) values ('work','IN','src'), ('work','OUT','dst')",
    )
    cli.ok(
        "dml",
        "insert into datastatus select 'src','fakejob',value,'OUT','READY',now() from (select '1' value union select '2' union select '3')",
    )
    return cli
