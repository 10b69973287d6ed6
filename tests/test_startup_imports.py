"""A cron tick's RunJob on SQLite imports only what its run needs (issue 46).

``RunJob ./job.sh`` that runs one chunk which ends well, and ``RunJob`` with nothing to
do, are the toolkit's most common calls: each one pays Python's import of every module
it loads (benchmarks/bench_runjob.py measures it). These runs are real processes,
started as cron starts them (bin/RunJob), with Python's ``-X importtime`` turned on
through its environment variable: every module the process imported is one line of
its stderr. None of PostgreSQL's, Spark's, the alerts', the server's or OpenLineage's
may be among them, nor ``typing``, nor the standard library's ``subprocess``, ``re``
and what imports them (its job is started with ``os.posix_spawn``), nor ``signal``'s and
``queue``'s Python modules (their C cores serve it).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from support import host_policy, script

NOT_FOR_A_PLAIN_RUN = (
    "psycopg",  # PostgreSQL: its driver, our backend and what only its leases need
    "psycopg_pool",
    "dataflow.store.postgres",
    "dataflow.store.leases",
    "dataflow.run.lease",  # (keeper, holder, holderprocess, holdersocket)
    "pyspark",  # Spark: the job side, and launching a .py job
    "dataflow.spark",
    "dataflow.driver",
    "dataflow.run.spark",  # (sparksubmit, sparkconnect, sparkrun, ..., inprocess, inbatch)
    "apprise",  # alerts: a run that ends well has none to send
    "dataflow.run.listeners.alert",  # (alerts, alertsend)
    "starlette",  # utility serve
    "uvicorn",
    "dataflow.serve",
    "openlineage",  # OpenLineage: not configured here
    "dataflow.run.listeners.lineage",  # (lineagefeed, lineagesend)
    "prometheus_client",
    "tabulate",
    "dataflow.ops",  # operator commands
    "dataflow.run.drain.workers",  # a drain spread over processes (--parallel)
    "dataflow.run.drain.driven",  # a drain in one Spark driver
    "argparse",  # a command line of a script and its arguments has no option to parse
    "typing",  # types are for readers and checkers (TYPE_CHECKING = False): ~4 ms a start
    "pathlib",  # its import pulls the three below and six namedtuples: str paths and os.path
    "urllib",
    "ipaddress",
    "fnmatch",
)
# the standard library's, by their exact names: re and what imports it (finding 41);
# signal's and queue's Python modules, whose enums and heap (enum, heapq) cost a run some
# 10M instructions: their C cores (_signal, _queue) serve a run (finding 42)
NOT_EVEN_STANDARD = {"re", "shlex", "locale", "string", "subprocess", "selectors"}
NOT_EVEN_STANDARD |= {"signal", "enum", "queue", "heapq"}
# what only a job process needs: a run with nothing to do (most cron ticks) starts none
ONLY_TO_START_A_JOB = {
    "dataflow.run.process.spawn",
    "dataflow.run.process.runner",
    "dataflow.run.process.watcher",
}


def imported(stderr: str) -> set[str]:
    """The modules a process imported, from its ``-X importtime`` lines."""
    return {
        line.rsplit("|", 1)[1].strip()
        for line in stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }


def unwanted(modules: set[str]) -> list[str]:
    return sorted(
        name
        for name in modules
        if name in NOT_EVEN_STANDARD
        or any(name == prefix or name.startswith(prefix) for prefix in NOT_FOR_A_PLAIN_RUN)
    )


def _runjob(cli, *args: str):
    ran = cli.runjob(*args, env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert ran.code == 0, ran
    return ran, imported(ran.err)


@pytest.fixture
def jobs(chain, tmp_path):
    """Job ``work`` of the chain (3 chunks waiting) and job ``idle``, whose input has no
    chunk: nothing to do."""
    chain.ok("dml", "insert into dataset (datasetid) values ('nothing'), ('idle_out')")
    chain.ok(
        "dml",
        "insert into job (jobid,itemtype,datasetid) values ('idle','IN','nothing'), "
        "('idle','OUT','idle_out')",
    )
    script(tmp_path, "work.sh", "exit 0")
    script(tmp_path, "idle.sh", "exit 0")
    return chain


def test_a_run_that_ends_well_imports_nothing_it_does_not_need(jobs):
    ran, modules = _runjob(jobs, "./work.sh")
    assert "rows updated to READY for work" in ran.out
    assert {
        "dataflow.run.claim.claims",
        "dataflow.store.sqlite",
        "sqlite3",
    } <= modules  # it sees ours
    assert unwanted(modules) == []
    assert modules >= ONLY_TO_START_A_JOB  # the idle run's check below would see them


def test_a_run_with_nothing_to_do_imports_nothing_it_does_not_need(jobs):
    ran, modules = _runjob(jobs, "./idle.sh")
    assert "no suitable data available for job" in ran.out
    assert "dataflow.run.claim.claims" in modules
    assert unwanted(modules) == []
    assert ONLY_TO_START_A_JOB.isdisjoint(modules)


def test_a_failure_with_alerts_set_imports_the_alerts(jobs, tmp_path):
    """The other side: a run that fails, of a job with an ``alerts`` setting, imports the
    alerts (and the check would see them)."""
    script(tmp_path, "work.sh", "exit 3")
    host_policy(tmp_path, '[alerts]\ntargets = ["json://127.0.0.1"]\n')
    jobs.ok("set", "work", "alerts=json://127.0.0.1:9/nowhere")
    ran = jobs.runjob("./work.sh", env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert ran.code == 3, ran
    assert "dataflow.run.listeners.alerts" in unwanted(imported(ran.err))


# The checks a run makes every time, written with str methods so that re stays off its
# path (finding 41): each says exactly what the pattern it replaced said, for any text
# (non-ASCII digits and letters, line separators, a row's hostile name).
TEXT = st.text(alphabet=st.sampled_from("aZ09_+.-:/ \n\u2028é٣²") | st.characters(), max_size=16)


@settings(max_examples=3000)
@given(TEXT)
def test_a_run_without_re_reads_names_digits_and_schemes_as_the_patterns_did(text):
    import re

    from dataflow.dataids import KEY_MARK, KEY_WIDTH, natural_key
    from dataflow.run.claim.envnames import is_variable_name
    from dataflow.store.address import _scheme

    assert is_variable_name(text) == bool(re.match(r"[A-Za-z_][A-Za-z0-9_]*\Z", text))
    scheme = re.match(r"([A-Za-z][A-Za-z0-9+.-]*)://", text)
    assert _scheme(text) == (scheme.group(1) if scheme else None)
    parts = re.split(r"([0-9]+)", text)
    runs = [part.lstrip("0") or "0" for part in parts[1::2]]
    keyed = [f"{chr(KEY_MARK)}{len(run):0{KEY_WIDTH}d}{run}" for run in runs]
    assert natural_key(text) == "".join(
        p for pair in zip(parts[::2], [*keyed, ""], strict=True) for p in pair
    )
