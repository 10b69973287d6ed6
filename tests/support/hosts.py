"""Simulated hosts on one machine, for the multi-host tests and benchmarks: a TCP proxy
to the store that can stop forwarding without closing anything (a network partition),
and the processes of a host (those whose environment names its DATAFLOW_HOST and
DATAFLOW_STATE)."""

from __future__ import annotations

import os
import select
import socket
import threading
import time
from collections.abc import Mapping

from support import (
    script,
)

COMMITTED = b"C\x00\x00\x00\x0bCOMMIT\x00"  # the server's answer to a COMMIT done


class Proxy:
    """A TCP proxy to the PostgreSQL server that can stop forwarding without closing, or
    cut a connection as the answer of a COMMIT done comes back (``lose_commits``), or
    forward each new connection ``delay`` seconds late (a slow network's or a busy
    server's connect)."""

    delay = 0.0

    def __init__(self, port: int):
        self.target = ("127.0.0.1", port)
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.flowing = threading.Event()
        self.flowing.set()
        self.stopped = False
        self.lost: list[bytes] = []  # the statements whose COMMIT's answer is to be lost
        self.lost_count = 0  # answers lost so far
        self.partition = False  # stop flowing as the last answer to lose is lost
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stopped:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._forward, args=(client,), daemon=True).start()

    def _forward(self, client: socket.socket) -> None:
        time.sleep(self.delay)
        self._pump(client, socket.create_connection(self.target))

    def lose_commits(self, times: int, after: bytes) -> None:
        """The next ``times`` transactions that send ``after`` (a part of a statement's
        text) and commit: done at the server, their connection cut before its answer."""
        self.lose_in_turn(*[after] * times)

    def lose_in_turn(self, *afters: bytes, partition: bool = False) -> None:
        """As :meth:`lose_commits`, a transaction that sends each of ``afters`` in turn;
        with ``partition``, every connection stops flowing (nothing read, nothing closed)
        as the last one is cut, until ``flowing`` is set again."""
        self.lost = list(afters)
        self.partition = partition

    def _pump(self, one: socket.socket, other: socket.socket) -> None:
        peers = {one: other, other: one}
        marked = False  # the client sent a statement whose COMMIT's answer is to be lost
        while not self.stopped:
            self.flowing.wait()
            readable = select.select(list(peers), [], [], 0.1)[0]
            if not self.flowing.is_set():
                continue  # partitioned: read nothing, close nothing
            for sock in readable:
                data = sock.recv(65536)
                if sock is one and self.lost and self.lost[0] in data:
                    marked = True
                if not data or (sock is other and marked and self.lost and COMMITTED in data):
                    if data:  # done at the server, and its answer lost
                        self.lost.pop(0)
                        self.lost_count += 1
                        if self.partition and not self.lost:
                            self.flowing.clear()
                    one.close()
                    other.close()
                    return
                peers[sock].sendall(data)

    def close(self) -> None:
        self.stopped = True
        self.flowing.set()
        self.server.close()


def processes_of(env: Mapping[str, str]) -> list[int]:
    """Every process of a simulated host, given its environment: those whose environment
    names both its host (DATAFLOW_HOST) and its own folder (DATAFLOW_STATE), so that a
    host of the same name in another test or test run is never one of them."""
    markers = {name.encode(): env[name].encode() for name in ("DATAFLOW_HOST", "DATAFLOW_STATE")}
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit() and int(pid) != os.getpid():
            try:
                environ = environ_of(int(pid))
            except OSError:
                continue
            if all(environ.get(name) == value for name, value in markers.items()):
                found.append(int(pid))
    return found


def environ_of(pid: int) -> dict[bytes, bytes]:
    """A process's environment (OSError once it is gone)."""
    with open(f"/proc/{pid}/environ", "rb") as file:
        return dict(v.split(b"=", 1) for v in file.read().split(b"\0") if b"=" in v)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as file:
            return file.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


RUN_LOCKERS = (  # sessions of the store's database holding a run lock (keepers')
    "SELECT DISTINCT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 "
    "AND granted AND pid <> pg_backend_pid() "
    "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
)


def keeper_backends(address: str) -> list[int]:
    """Sessions of the store's database holding a run lock (keepers')."""
    import psycopg

    with psycopg.connect(address, autocommit=True) as conn:
        found = conn.execute(RUN_LOCKERS).fetchall()
    return [pid for (pid,) in found]


def end_keeper_sessions(conn) -> int:
    """End every session holding a run lock, in one statement over ``conn`` (a
    connection of the test's: a new one each time would give them time); how many."""
    query = f"SELECT pg_terminate_backend(pid) FROM ({RUN_LOCKERS}) AS lockers"
    return len(conn.execute(query).fetchall())


def _one_job(cli, tmp_path, body, chunks=1):
    cli.ok("createtables")
    cli.ok("dml", "insert into dataset (datasetid) values ('src'), ('dst')")
    cli.ok(
        "dml",
        "insert into job (jobid,itemtype,datasetid) values ('work','IN','src'), ('work','OUT','dst')",
    )
    cli.ok("ready", "src", *[str(i) for i in range(1, chunks + 1)])
    script(tmp_path, "work.sh", body)


def _children(pid: int) -> list[int]:
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as file:
            found += [int(child) for child in file.read().split()]
    return found


def holder_of(state) -> int | None:
    """The pid of the live lease holder whose files are in a host's state folder
    (DATAFLOW_STATE): the one holding a ``*-holder-*.lock`` file, its pid inside."""
    import fcntl
    from pathlib import Path

    for lock in Path(state).glob("*-holder-*.lock"):
        with open(lock) as file:
            try:
                fcntl.flock(file, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:  # held: its holder lives
                text = file.read().strip()
                return int(text) if text.isdigit() else None
    return None


def holder_sessions(address: str, host: str | None = None) -> list[int]:
    """Server sessions of lease holders (of ``host``, else of any host): their
    application_name (``dataflow/MS holder HOST``) says whose they are."""
    import psycopg

    with psycopg.connect(address, autocommit=True) as conn:
        found = conn.execute(
            "SELECT pid, application_name FROM pg_stat_activity"
            " WHERE datname = current_database() AND application_name LIKE 'dataflow/%% holder %%'"
        ).fetchall()
    return [pid for pid, name in found if host is None or name.split(" ", 1)[1] == f"holder {host}"]
