"""Spark tests: one local SparkSession for the whole test session, a standalone Spark
cluster for the cluster tests, and a throwaway PostgreSQL server for the JDBC tests
(skipped, with the reason, when none can be had).

Every test in this folder is marked ``spark``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from dataflow.spark.datasets import Dataset
from support import host_policy

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SANDBOX = ROOT / "examples" / "migration" / "pg_sandbox.sh"
POSTGRES_JAR = Path(os.environ.get("POSTGRES_JDBC_JAR", "/usr/share/java/postgresql.jar"))

os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # local mode needs no network


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.spark)


# What the tests' host lets a job's settings use: the tests set masters, JVM options, jars,
# any Spark conf, and servers on this machine (tests/test_host_policy.py checks the rule)
LAB_POLICY = """
[spark]
options = { "--master" = "*", "--driver-java-options" = "*", "--jars" = "*" }
confs = ["spark.*"]
remotes = ["sc://127.0.0.1", "sc://localhost"]
"""


@pytest.fixture(autouse=True)
def lab_policy(tmp_path: Path) -> Path:
    """The Spark lab's policy for this test's host (and for argv built with ``homes``)."""
    return host_policy(tmp_path, LAB_POLICY)


@pytest.fixture
def cli(cli, quick_jvm: str):
    """The ``cli`` of tests/conftest.py, its spark-submits starting quicker: RunJob's,
    and those of a Spark session a tool starts in its own process (an example's report)."""
    cli.env["DATAFLOW_SPARK_ARGS"] = quick_jvm
    cli.env["PYSPARK_SUBMIT_ARGS"] = f"{quick_jvm} pyspark-shell"
    return cli


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory):
    """The one SparkSession of the test session: local[1], no UI, quiet."""
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master("local[1]")
        .appName("dataflow tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("warehouse")))
    )
    if POSTGRES_JAR.is_file():
        builder = builder.config("spark.jars", str(POSTGRES_JAR))
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


class Postgres:
    """The sandbox server: its libpq environment, and psql to run SQL on it."""

    def __init__(self, env: dict[str, str]):
        self.env = env
        self.hostname = f"{env['PGHOST']}:{env['PGPORT']}"

    def dataset(self, table: str, dataid: str, column: str = "shard", **more) -> Dataset:
        """Chunk ``dataid`` of table ``public.<table>`` on this server, chunked by
        ``column`` (``more``: other fields, e.g. ``itemtype``)."""
        return Dataset(
            table,
            dataid,
            hostname=self.hostname,
            database=self.env["PGDATABASE"],
            schemaname="public",
            tablename=table,
            username=self.env["PGUSER"],
            password=self.env["PGPASSWORD"],
            chunk_column=column,
            **more,
        )

    def sql(self, statement: str) -> str:
        """Run SQL as the login role; returns psql's unaligned, tuples-only output."""
        done = subprocess.run(
            [f"{self.env['PGBIN']}/psql", "-qXAt", "-v", "ON_ERROR_STOP=1", "-c", statement],
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        return done.stdout


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """A throwaway PostgreSQL server (examples/migration/pg_sandbox.sh)."""
    if not POSTGRES_JAR.is_file():
        pytest.skip(f"PostgreSQL JDBC driver not at {POSTGRES_JAR} (libpostgresql-jdbc-java)")
    started = subprocess.run(
        [str(SANDBOX), "start"], capture_output=True, text=True, timeout=120, check=False
    )
    if started.returncode == 3:
        pytest.skip(started.stderr.strip())
    assert started.returncode == 0, started.stderr
    folder = started.stdout.strip()
    env = dict(line.split("=", 1) for line in Path(folder, "env").read_text().splitlines())
    try:
        yield Postgres(env)
    finally:
        subprocess.run([str(SANDBOX), "stop", folder], timeout=60, check=False)


class Standalone:
    """A Spark standalone master and one worker on 127.0.0.1, and the master's JSON view."""

    def __init__(self, port: int, webui: int):
        self.url = f"spark://127.0.0.1:{port}"
        self.webui = f"http://127.0.0.1:{webui}"

    def state(self) -> dict:
        with urllib.request.urlopen(f"{self.webui}/json/", timeout=10) as answer:
            return json.load(answer)

    def app(self, app_id: str) -> tuple[str, dict] | None:
        """Where the master lists application ``app_id`` (``activeapps`` or
        ``completedapps``), and what it says of it."""
        state = self.state()
        for kind in ("activeapps", "completedapps"):
            for app in state[kind]:
                if app["id"] == app_id:
                    return kind, app
        return None

    def active(self, name: str) -> list[dict]:
        """The running applications called ``name``."""
        return [app for app in self.state()["activeapps"] if app["name"] == name]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _stop(process: subprocess.Popen) -> None:
    """Stop a daemon started in its own session, and whatever it started."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


@pytest.fixture(scope="session")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    """A real standalone cluster from pyspark's own ``bin/spark-class``: a master and a
    worker (1 core, 1 GB for executors, 256 MB heaps for the daemons), always stopped."""
    from dataflow.run.spark import sparksubmit

    spark_class = Path(sparksubmit.find_spark_submit("tests", os.environ)).with_name("spark-class")
    folder = tmp_path_factory.mktemp("standalone")
    port, webui = _free_port(), _free_port()
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_DAEMON_MEMORY": "256m"}
    env["SPARK_MASTER_OPTS"] = "-Dspark.master.rest.enabled=false"  # no fixed port 6066
    env["SPARK_HOME"] = str(spark_class.parent.parent)
    host = ["--host", "127.0.0.1"]
    commands = {
        "master": [
            *("org.apache.spark.deploy.master.Master", *host),
            *("--port", str(port), "--webui-port", str(webui)),
        ],
        "worker": [
            *("org.apache.spark.deploy.worker.Worker", *host),
            *("--cores", "1", "--memory", "1g", "--webui-port", str(_free_port())),
            *("--work-dir", str(folder / "work"), f"spark://127.0.0.1:{port}"),
        ],
    }
    cluster, started = Standalone(port, webui), []
    try:
        for name, command in commands.items():
            with open(folder / f"{name}.log", "wb") as log:
                started.append(
                    subprocess.Popen(
                        [str(spark_class), *command],
                        env=env,
                        stdin=subprocess.DEVNULL,
                        stdout=log,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                    )
                )
            _wait_until(cluster, name, folder / f"{name}.log", started[-1])
        yield cluster
    finally:
        for process in reversed(started):
            _stop(process)


def _wait_until(cluster: Standalone, name: str, log: Path, process: subprocess.Popen) -> None:
    """Until the master answers (``master``) or counts one live worker (``worker``)."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        assert process.poll() is None, f"the {name} exited:\n{log.read_text()[-3000:]}"
        with contextlib.suppress(OSError, ValueError):
            state = cluster.state()
            if name == "master" or state.get("aliveworkers") == 1:
                return
        time.sleep(0.5)
    raise AssertionError(f"the {name} did not start in 180 s:\n{log.read_text()[-3000:]}")


class ConnectServer:
    """A Spark Connect server on 127.0.0.1: its ``sc://`` address, and its Spark UI's
    REST view (to see what still runs there)."""

    def __init__(self, port: int, webui: int):
        self.url = f"sc://127.0.0.1:{port}"
        self.port = port
        self.webui = f"http://127.0.0.1:{webui}"

    def running_jobs(self) -> list[dict] | None:
        """The Spark jobs running on the server now (every session's); None when its UI
        did not answer in time (a machine busy with other tests' JVMs): neither "none"
        nor "some", for a wait to ask again."""
        found = []
        try:
            with urllib.request.urlopen(f"{self.webui}/api/v1/applications", timeout=10) as got:
                apps = json.load(got)
            for app in apps:
                url = f"{self.webui}/api/v1/applications/{app['id']}/jobs?status=running"
                with urllib.request.urlopen(url, timeout=10) as got:
                    found += json.load(got)
        except TimeoutError:
            return None
        except urllib.error.URLError as exc:  # (a timeout as it connected)
            if isinstance(exc.reason, TimeoutError):
                return None
            raise
        return found


@pytest.fixture(scope="session")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ConnectServer]:
    """A real Spark Connect server started by pyspark's own ``sbin/start-connect-server.sh``
    (local[2], its logs and pid file in a tmp folder), stopped at the end of the session
    by ``sbin/stop-connect-server.sh`` (else killed)."""
    from dataflow.run.spark import sparksubmit

    home = Path(sparksubmit.find_spark_submit("tests", os.environ)).parent.parent
    folder = tmp_path_factory.mktemp("connect")
    port, webui = _free_port(), _free_port()
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": "127.0.0.1"}
    env.update(SPARK_LOG_DIR=str(folder), SPARK_PID_DIR=str(folder), SPARK_IDENT_STRING="tests")
    env.pop("SPARK_REMOTE", None)
    options = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    confs = {
        "spark.connect.grpc.binding.address": "127.0.0.1",
        "spark.connect.grpc.binding.port": str(port),
        "spark.ui.port": str(webui),
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.log.level": "WARN",
    }
    command = [str(home / "sbin" / "start-connect-server.sh"), "--master", "local[2]"]
    command += ["--driver-memory", "768m", "--driver-java-options", options]
    if POSTGRES_JAR.is_file():  # the JDBC driver is the server's, as for spark-submit
        command += ["--jars", str(POSTGRES_JAR)]
    for key, value in confs.items():
        command += ["--conf", f"{key}={value}"]
    started = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert started.returncode == 0, started.stdout + started.stderr
    server = ConnectServer(port, webui)
    try:
        _wait_for_connect(server, folder)
        yield server
    finally:
        stop = home / "sbin" / "stop-connect-server.sh"
        subprocess.run([str(stop)], env=env, capture_output=True, timeout=120, check=False)
        for pidfile in folder.glob("*.pid"):  # left if the script could not stop it
            with contextlib.suppress(ValueError, OSError):
                pid = int(pidfile.read_text())
                if b"SparkConnectServer" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    os.kill(pid, signal.SIGKILL)


def _wait_for_connect(server: ConnectServer, folder: Path) -> None:
    """Until the server's gRPC port accepts connections (it is bound last)."""
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        logs = "".join(log.read_text(errors="replace") for log in folder.glob("*.out"))
        with contextlib.suppress(OSError):
            socket.create_connection(("127.0.0.1", server.port), timeout=2).close()
            return
        pids = list(folder.glob("*.pid"))
        if pids and not Path(f"/proc/{pids[0].read_text().strip()}").exists():
            raise AssertionError(f"the Spark Connect server exited:\n{logs[-3000:]}")
        time.sleep(0.5)
    raise AssertionError(f"the Spark Connect server did not start in 180 s:\n{logs[-3000:]}")
