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
