"""A PgBouncer in transaction mode in front of the test session's PostgreSQL server
(tests/support/pgserver.py), started by a test: the ``pgbouncer.ini`` that docs/stores.md shows,
with its own port, files, database lines and trust authentication put in; with ``leases``,
also its second database, in session mode, for the lease holders.

It reaches the server through the server's Unix socket, so that the server tells its
sessions apart: a pooled one has no ``client_addr``, one of ours straight to the server
(over TCP, 127.0.0.1) has one.
"""

from __future__ import annotations

import configparser
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import port_for

DOCS = Path(__file__).parents[2] / "docs" / "stores.md"
POOL_SIZE = 3  # server sessions the pooler lends, per database and role


def documented_ini() -> configparser.ConfigParser:
    """The ``pgbouncer.ini`` of docs/stores.md (its one ``ini`` block)."""
    (block,) = re.findall(r"```ini\n(.*?)```", DOCS.read_text(), re.S)
    ini = configparser.ConfigParser(interpolation=None, inline_comment_prefixes=None)
    ini.optionxform = str  # type: ignore[assignment,method-assign]  (keys as written)
    ini.read_string(block)
    return ini


def _as_root() -> bool:
    return os.getuid() == 0


class Pooler:
    """A PgBouncer process of this test: :meth:`start`, :meth:`kill`, :meth:`stop`."""

    def __init__(self, server, leases: tuple[str, int] | None = None):
        """``leases``: a database's name and the size of its lease pool: the documented
        ``dataflow_leases`` line for it (:meth:`leases_url`)."""
        self.folder = Path(tempfile.mkdtemp(prefix="dataflow-test-pgbouncer-"))
        self.port = 0
        self.process: subprocess.Popen | None = None
        ini = documented_ini()
        ini.remove_option("databases", "dataflow")
        where = f"host={server.unixsocketdir} port={server.port}"
        ini["databases"]["*"] = where
        lease_line = dict(
            item.split("=", 1) for item in ini["databases"]["dataflow_leases"].split()
        )
        ini.remove_option("databases", "dataflow_leases")
        if leases is not None:
            dbname, size = leases
            lease_line.update(dbname=dbname, pool_size=str(size))
            del lease_line["host"], lease_line["port"]
            options = " ".join(f"{name}={value}" for name, value in lease_line.items())
            ini["databases"][f"{dbname}_leases"] = f"{where} {options}"
        ini["pgbouncer"].update(
            listen_addr="127.0.0.1",
            unix_socket_dir="",
            auth_type="trust",
            auth_file=str(self.folder / "userlist.txt"),
            default_pool_size=str(POOL_SIZE),
            admin_users=server.user,  # its console tells when it listens
            logfile=str(self.folder / "pgbouncer.log"),
            pidfile=str(self.folder / "pgbouncer.pid"),
        )
        self.ini = ini
        (self.folder / "userlist.txt").write_text(f'"{server.user}" ""\n')
        if _as_root():  # PgBouncer refuses to run as root: it runs as postgres
            shutil.chown(self.folder, "postgres")
            for path in self.folder.iterdir():
                shutil.chown(path, "postgres")

    def url(self, dbname: str, user: str = "postgres") -> str:
        return f"postgresql://{user}@127.0.0.1:{self.port}/{dbname}"

    def leases_url(self, dbname: str, user: str = "postgres") -> str:
        """The address of the lease pool of ``dbname`` (session mode)."""
        return self.url(f"{dbname}_leases", user)

    def start(self, port: int | None = None) -> None:
        """Start it (on ``port``, else a free one) and wait until it takes connections."""
        import psycopg

        for _ in range(10):
            self.port = port or port_for.select_random()
            self.ini["pgbouncer"]["listen_port"] = str(self.port)
            path = self.folder / "pgbouncer.ini"
            with path.open("w") as out:
                self.ini.write(out)
            if _as_root():
                shutil.chown(path, "postgres")
            self.process = subprocess.Popen(
                [shutil.which("pgbouncer") or "/usr/sbin/pgbouncer", str(path)],
                user="postgres" if _as_root() else None,
                cwd=self.folder,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            deadline = time.monotonic() + 30
            while self.process.poll() is None and time.monotonic() < deadline:
                try:  # the pooler's own console answers once it listens
                    psycopg.connect(self.url("pgbouncer"), autocommit=True).close()
                    return
                except psycopg.OperationalError:
                    time.sleep(0.1)
            self.kill()
            if port:  # the port asked for is not free (yet): try it again
                time.sleep(0.5)
        raise AssertionError(f"PgBouncer did not start: {self.log()}")

    def kill(self) -> None:
        """Kill it at once (SIGKILL): every client's connection is cut."""
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)
        self.process = None

    def log(self) -> str:
        path = self.folder / "pgbouncer.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else "(no log)"

    def stop(self) -> None:
        self.kill()
        shutil.rmtree(self.folder, ignore_errors=True)
