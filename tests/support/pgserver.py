"""The test session's own PostgreSQL server, and its databases: empty, or cloned from a
template that holds the store's schema already.

The server is never shared with another test run. Its port is held for the whole
session by a lock that every run of these tests takes (so two runs never pick the same
port while one of them is still starting), and its data folder lives outside pytest's
temporary folders: another pytest run makes ``/tmp/pytest-of-<user>`` private (user
postgres, the server's owner, may not pass) and deletes all but its last three numbered
folders, and a server whose data folder (its ``postmaster.pid``) is gone shuts itself
down within a minute.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import port_for
from mirakuru.exceptions import AlreadyRunning
from pytest_postgresql.executors import PostgreSQLExecutor

PG_CTL = Path(__file__).parent.parent / "postgres" / "pg_ctl"  # runs pg_ctl as user postgres
OPTIONS = "-c fsync=off -c synchronous_commit=off"
MAX_CONNECTIONS = 300  # the session's server: every test at once, on both cores
PORTS = Path(tempfile.gettempdir()) / "dataflow-test-ports"  # one lock file a port


def _hold_a_port() -> tuple[int, int]:
    """A free port, and the descriptor of its lock (held until closed)."""
    PORTS.mkdir(mode=0o777, exist_ok=True)
    while True:
        port = port_for.select_random()
        fd = os.open(PORTS / str(port), os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # another test run's
            os.close(fd)
            continue
        return port, fd


@contextlib.contextmanager
def own_server(max_connections: int = MAX_CONNECTIONS) -> Iterator[PostgreSQLExecutor]:
    """A PostgreSQL server of this session (or of one test: a fleet's smaller
    ``max_connections``) alone: its own port and data folder."""
    folder = Path(tempfile.mkdtemp(prefix="dataflow-test-pg-"))
    server, lock = None, None
    try:
        for _ in range(10):
            port, lock = _hold_a_port()
            server = PostgreSQLExecutor(
                executable=str(PG_CTL),
                host="127.0.0.1",
                port=port,
                datadir=str(folder / "data"),
                unixsocketdir=str(folder),
                logfile=str(folder / "server.log"),
                startparams="-w",
                dbname="tests",
                postgres_options=f"{OPTIONS} -c max_connections={max_connections}",
                timeout=120,  # a loaded machine starts it slowly
            )
            try:
                server.start()
                break
            except AlreadyRunning:  # something that is not one of our runs has the port
                os.close(lock)
                server = lock = None
        assert server is not None, "no free port for the test's PostgreSQL server"
        _wait_until_ready(server, folder / "data")
        yield server
    finally:
        if server is not None:
            with contextlib.suppress(Exception):
                server.stop()
        if lock is not None:
            os.close(lock)
        shutil.rmtree(folder, ignore_errors=True)


def _wait_until_ready(server, datadir: Path, timeout: float = 120) -> None:
    """Until the server accepts sessions (it answers "starting up" before), and is ours."""
    import psycopg

    deadline = time.monotonic() + timeout
    while True:
        try:
            with psycopg.connect(admin_url(server), autocommit=True) as conn:
                (found,) = conn.execute("SHOW data_directory").fetchone()
            break
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    assert Path(found).resolve() == datadir.resolve(), f"port {server.port}: not our server"


def admin_url(server) -> str:
    return f"postgresql://{server.user}@{server.host}:{server.port}/postgres"


def url(server, name: str) -> str:
    return f"postgresql://{server.user}@{server.host}:{server.port}/{name}"


def make_template(server) -> str:
    """A database that holds a fresh store (``createtables``'s work): the template of
    :func:`database`; its name."""
    import psycopg

    from dataflow.store import create_store

    name = f"store_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url(server), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    created, _ = create_store(url(server, name))
    created.close()
    with psycopg.connect(admin_url(server), autocommit=True) as conn:
        conn.execute(f"ALTER DATABASE {name} WITH ALLOW_CONNECTIONS false")
    return name


@contextlib.contextmanager
def database(server, template: str | None = None) -> Iterator[str]:
    """A new database on ``server``, empty or a copy of ``template``; its URL."""
    name = _create(server, template)
    try:
        yield url(server, name)
    finally:
        _drop(server, name)


@contextlib.contextmanager
def login_role(address: str, role: str, rights: str, limit: int = -1) -> Iterator[str]:
    """A role of the store's server that may log in (``limit`` sessions at once; -1: no
    limit), with ``rights`` in the store's database: "all" (what RunJob needs) or
    "select" (a role that may only read); the store's address as that role. Dropped at
    the end, with what it was granted."""
    import psycopg

    if rights == "all":
        grants = ["all tables in schema", "all sequences in schema", "schema"]
        grants = [f"grant all on {grant} public to {role}" for grant in grants]
        grants.append(f"grant all on all functions in schema public to {role}")
    else:
        grants = [f"grant {rights} on all tables in schema public to {role}"]
    with psycopg.connect(address, autocommit=True) as conn:
        conn.execute(f"create role {role} login connection limit {limit}")
        for grant in grants:
            conn.execute(grant)
    try:
        yield f"postgresql://{role}@{address.split('@', 1)[1]}"
    finally:
        with psycopg.connect(address, autocommit=True) as conn:
            conn.execute(f"drop owned by {role}")
            conn.execute(f"drop role {role}")


def _create(server, template: str | None) -> str:
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin_url(server), autocommit=True) as conn:
        create = f"CREATE DATABASE {name}" + (f" TEMPLATE {template}" if template else "")
        for attempt in range(50):
            try:
                conn.execute(create)
                break
            except psycopg.errors.ObjectInUse:  # a session of the template is still ending
                if attempt == 49:
                    raise
                time.sleep(0.1)
    return name


def _drop(server, name: str) -> None:
    import psycopg

    with psycopg.connect(admin_url(server), autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


class Spares:
    """Copies of ``template`` made ahead of the tests that take them, and the databases
    tests are done with dropped, by a thread of the session: a test waits for neither
    (each is 50-300 ms of the server's work, done while tests wait on their processes),
    only for the end of its database's sessions.
    The thread alone copies the template (two copies at once wait for each other), a
    copy before a drop; its sessions are short, on the ``postgres`` database, and one
    that fails (a test restarted the server) is tried again a moment later."""

    def __init__(self, server, template: str, ahead: int = 2):
        import queue

        self.server, self.template, self.ahead = server, template, ahead
        self.ready: queue.Queue[str] = queue.Queue()
        self.done: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._work, daemon=True)
        self.thread.start()

    @contextlib.contextmanager
    def database(self) -> Iterator[str]:
        """A copy of the template made ahead; its URL. Dropped after, by the thread."""
        name = self.ready.get(timeout=120)
        try:
            yield url(self.server, name)
        finally:
            self._shut(name)
            self.done.put(name)

    def _shut(self, name: str) -> None:
        """The database's sessions ended now: one a test left (a keeper's) must not reach
        the next test."""
        import psycopg

        with (
            contextlib.suppress(psycopg.Error),
            psycopg.connect(admin_url(self.server), autocommit=True) as conn,
        ):
            conn.execute(f"ALTER DATABASE {name} WITH ALLOW_CONNECTIONS false")
            conn.execute(
                "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity"
                " WHERE datname = %s AND pid <> pg_backend_pid()",
                (name,),
            )

    def close(self) -> None:
        self.done.put(None)
        self.thread.join(timeout=30)

    def _work(self) -> None:
        import queue

        import psycopg

        while True:
            name = ""
            try:
                if self.ready.qsize() < self.ahead:
                    self.ready.put(_create(self.server, self.template))
                    continue
                try:
                    name = self.done.get(timeout=0.05)
                except queue.Empty:
                    continue
                if name is None:
                    return
                _drop(self.server, name)
            except psycopg.Error:  # the server restarted under a test: a moment later
                if name:
                    self.done.put(name)
                time.sleep(0.5)


def _restart(server, down: float = 0.0) -> None:
    """Restart the server (fast shutdown); ``down``: seconds it stays stopped first."""
    log = str(Path(server.datadir).parent / "restart.log")
    if not down:
        _pg_ctl(server, "restart", "-m", "fast", "-l", log)
        return
    # the options it was started with (its port...): pg_ctl restart reads them there too
    started = shlex.split((Path(server.datadir) / "postmaster.opts").read_text())[1:]
    at = started.index("-D")
    options = shlex.join(started[:at] + started[at + 2 :])
    _pg_ctl(server, "stop", "-m", "fast")
    time.sleep(down)
    _pg_ctl(server, "start", "-l", log, "-o", options)


def _pg_ctl(server, action: str, *options: str) -> None:
    subprocess.run(
        [server.executable, action, "-D", server.datadir, *options, "-w"],
        check=True,
        stdout=subprocess.DEVNULL,  # the server inherits them: nothing may wait for their end
        stderr=subprocess.DEVNULL,
        timeout=120,
    )
