"""A pytest plugin of `make mutation`: credits each test with the functions its
subprocesses reached (see sitecustomize), before mutmut reads what the test reached."""

import os
from pathlib import Path

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    folder = os.environ.get("MUTMUT_HITS")
    if os.environ.get("MUTANT_UNDER_TEST") != "stats" or not folder:
        return
    from mutmut.state import state

    for path in Path(folder).glob("*.hits"):
        state()._stats.update(path.read_text().split())
        path.unlink()
