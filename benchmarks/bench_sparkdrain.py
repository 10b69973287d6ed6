"""A drain of many small Spark chunks in one driver, and through one Spark Connect
client, against the same chunks each through its own spark-submit.

The job defines ``def run(spark, job)``: ``RunJob --all ./sparkdrain.py`` runs every
chunk in one Spark driver; with ``$SPARK_REMOTE`` set, in one Spark Connect client of a
server started once before the rounds (its start-up not counted: the server is
long-lived); ``RunJob ./sparkdrain.py`` runs one chunk through a spark-submit of its
own (what every chunk of a drain cost before). The figures are the per-chunk wall time
of each drain (its one driver or client start-up included) ÷ the per-chunk wall time
of the one-submit runs, measured in rotating rounds of the same run. The one-submit
baseline runs fewer chunks: each costs the same JVM start-up.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import stores
from measure import (
    BIN,
    VENV_BIN,
    Config,
    Dist,
    Row,
    Section,
    base_env,
    ms,
    paired,
    run_once,
    times,
    verdict,
    write_script,
)

TARGET = 0.1
CONNECT_TARGET = 0.2
JOB = "sparkdrain"
SPARK_ARGS = "--master local[1] --conf spark.ui.enabled=false --conf spark.log.level=ERROR"

SPARK_JOB = """\
def run(spark, job):
    total = spark.range(1000).selectExpr("sum(id)").collect()[0][0]
    assert total == 499500, total
"""


def _store(folder: Path, chunks: int) -> Path:
    folder.mkdir(parents=True)
    path = folder / "dataflow.db"
    store = stores.single_job(path, JOB, chunks=chunks)
    with store.transaction():
        store.conn.execute(
            "INSERT INTO job(jobid, itemtype, itemvalue) VALUES (?, 'spark_args', ?)",
            (JOB, SPARK_ARGS),
        )
    store.close()
    write_script(folder / f"{JOB}.py", SPARK_JOB)
    return path


def _count_ready(path: Path) -> int:
    import sqlite3

    with sqlite3.connect(path) as conn:
        return conn.execute(
            "SELECT count(*) FROM run WHERE jobid = ? AND status = 'READY'", (JOB,)
        ).fetchone()[0]


@contextlib.contextmanager
def connect_server(folder: Path) -> Iterator[str]:
    """A Spark Connect server (pyspark's ``sbin/start-connect-server.sh``, local[1] like
    the spark-submit runs), up and answering; stopped on exit. Yields its address."""
    import importlib.util

    home = Path(next(iter(importlib.util.find_spec("pyspark").submodule_search_locations)))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    folder.mkdir(parents=True)
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1"}
    env.update(SPARK_LOG_DIR=str(folder), SPARK_PID_DIR=str(folder), SPARK_IDENT_STRING="bench")
    env.pop("SPARK_REMOTE", None)
    command = [str(home / "sbin" / "start-connect-server.sh"), *SPARK_ARGS.split()]
    command += ["--conf", "spark.connect.grpc.binding.address=127.0.0.1"]
    command += ["--conf", f"spark.connect.grpc.binding.port={port}"]
    subprocess.run(command, env=env, check=True, capture_output=True, timeout=120)
    try:
        deadline = time.monotonic() + 180
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"no Connect server on port {port}: see {folder}") from None
                time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}"
    finally:
        stop = home / "sbin" / "stop-connect-server.sh"
        subprocess.run([str(stop)], env=env, capture_output=True, timeout=120, check=False)
        for pidfile in folder.glob("*.pid"):
            with contextlib.suppress(ValueError, OSError):
                os.kill(int(pidfile.read_text()), signal.SIGKILL)


def _connect_available() -> bool:
    try:
        import pyspark.sql.connect.session  # noqa: F401  (the 'connect' extra)
    except ImportError:
        return False
    return True


def bench(config: Config, work: Path) -> Section:
    section = Section("sparkdrain", "Spark chunks in one driver")
    if not (VENV_BIN / "spark-submit").exists() or not shutil.which("java"):
        section.skip("drain ÷ one submit per chunk", "spark-submit or java not found")
        return section
    with contextlib.ExitStack() as stack:
        remote = None
        if _connect_available():
            remote = stack.enter_context(connect_server(work / "connect-server"))
        _bench(config, work, section, remote)
    return section


def _bench(config: Config, work: Path, section: Section, remote: str | None) -> None:
    drained, alone = (10, 2) if config.quick else (50, 5)
    rounds = 1 if config.quick else 3
    kinds = ["drain", "submit", *(["connect"] if remote else [])]
    per_chunk: dict[str, list[float]] = {kind: [] for kind in kinds}
    for i in range(rounds):
        order = kinds[i % len(kinds) :] + kinds[: i % len(kinds)]
        for kind in order:
            chunks = alone if kind == "submit" else drained
            folder = work / f"{kind}{i}"
            path = _store(folder, chunks)
            env = base_env(path)
            env.update(PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
            env.pop("SPARK_REMOTE", None)
            if kind == "connect":
                env["SPARK_REMOTE"] = remote
            drain = kind != "submit"
            argv = [str(BIN / "RunJob"), *(["--all"] if drain else []), f"./{JOB}.py"]
            seconds = 0.0
            for _ in range(1 if drain else chunks):
                run = run_once(argv, folder, env)
                if run.code != 0:
                    raise RuntimeError(f"{' '.join(argv)} exited {run.code} in {folder}")
                seconds += run.seconds
            if _count_ready(path) != chunks:
                raise RuntimeError(f"{kind}: {_count_ready(path)} of {chunks} chunks READY")
            per_chunk[kind].append(seconds / chunks)
            print(f"  round {i + 1} {kind}: {chunks} chunks, {seconds / chunks:.2f} s per chunk")

    ratio = paired(per_chunk["drain"], per_chunk["submit"], lambda a, b: a / b)
    drain, submit = Dist.of(per_chunk["drain"]), Dist.of(per_chunk["submit"])
    section.add(
        Row(
            section.title,
            f"per chunk: `RunJob --all` ({drained} chunks, one driver) ÷ one spark-submit per chunk",
            times(ratio.median),
            times(ratio.p95),
            f"≤ {TARGET:g}×",
            verdict(ratio.median <= TARGET),
            f"one driver {ms(drain.median)} per chunk (p95 {ms(drain.p95)}); "
            f"one submit each {ms(submit.median)} (p95 {ms(submit.p95)}); {rounds} rounds",
        )
    )
    if remote:
        ratio = paired(per_chunk["connect"], per_chunk["submit"], lambda a, b: a / b)
        connect = Dist.of(per_chunk["connect"])
        section.add(
            Row(
                section.title,
                f"per chunk: `RunJob --all` ({drained} chunks, one Spark Connect client, "
                "server already up) ÷ one spark-submit per chunk",
                times(ratio.median),
                times(ratio.p95),
                f"≤ {CONNECT_TARGET:g}×",
                verdict(ratio.median <= CONNECT_TARGET),
                f"one client {ms(connect.median)} per chunk (p95 {ms(connect.p95)}); "
                f"one submit each {ms(submit.median)}; {rounds} rounds",
            )
        )
    else:
        section.skip("Spark Connect drain ÷ one submit per chunk", "pyspark[connect] missing")
    section.text(
        f"{rounds} rounds, rotating which runs first. The job `{JOB}.py` defines "
        "`run(spark, job)`, which sums a 1,000-row range: per round, `RunJob --all` drains "
        f"{drained} chunks in one Spark driver (its start-up included in the per-chunk "
        f"figure), `RunJob --all` with `$SPARK_REMOTE` drains {drained} chunks in one "
        "Spark Connect client of a server started before the rounds (the client's start-up "
        f"included, the server's not), and {alone} chunks each run through their own "
        f"spark-submit (`RunJob ./{JOB}.py` once per chunk). Spark arguments for the "
        f"submits and for the Connect server: `{SPARK_ARGS}`.",
    )
