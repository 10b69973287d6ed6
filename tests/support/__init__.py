"""Test helpers: the real CLIs in subprocesses (``utility`` in this process where that is
not the point), job scripts, the shapes of our output.

Helpers of one subject are modules of this package (``support.hosts``, ``support.lease``,
``support.serving``, ``support.pgserver``...); a test module imports helpers from here,
never from another test module (tests/test_layout.py checks it)."""

from __future__ import annotations

import io
import os
import shutil
import sqlite3
import subprocess
import sys
import time
import traceback
from contextlib import closing, contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BIN = ROOT / "bin"
# `date`-style stamp of the SPEC §8 messages, e.g. "Mon Dec  1 04:08:50 PM CST 2025"
STAMP = r"\w{3} \w{3} [ \d]\d \d\d:\d\d:\d\d [AP]M \S* ?\d{4}"


@dataclass
class Result:
    code: int
    out: str
    err: str

    @property
    def lines(self) -> list[str]:
        return self.out.splitlines()


# the store of each test's tmp_path, when it is not tmp_path/dataflow.db (conftest.address)
ADDRESSES: dict[Path, object] = {}


def base_env(tmp_path: Path, address=None) -> dict[str, str]:
    """A clean environment for the CLIs: our bin/ first on PATH, the store in tmp_path
    (or at ``address``), this host's files of a shared store in tmp_path/state."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PASSKEY", "DATAFLOW_"))}
    env["PATH"] = f"{BIN}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    env["DATAFLOW_DB"] = str(address or tmp_path / "dataflow.db")
    env["DATAFLOW_STATE"] = str(tmp_path / "state")
    env["DATAFLOW_PYTHON"] = sys.executable
    # the host's policy (dataflow.policy): a test writes what its host allows in this file
    env["DATAFLOW_POLICY"] = str(host_policy(tmp_path))
    return env


def host_policy(folder: Path, text: str | None = None) -> Path:
    """The policy file of the test whose folder is ``folder`` (beside it, not in it): its
    text, if given (else as it is: empty, the toolkit's defaults, when not written yet)."""
    path = folder.with_name(f"{folder.name}.policy.toml")
    if text is not None:
        path.write_text(text)
    elif not path.exists():
        path.touch()
    return path


class Cli:
    """Runs ``utility``, ``RunJob`` or any shell line for real, in tmp_path."""

    def __init__(self, tmp_path: Path, address=None):
        self.cwd = tmp_path
        self.address = address or tmp_path / "dataflow.db"
        self.env = base_env(tmp_path, address)

    def __call__(self, *argv: str, env: dict[str, str] | None = None, **kw) -> Result:
        done = subprocess.run(
            list(argv),
            cwd=self.cwd,
            env={**self.env, **(env or {})},
            capture_output=True,
            text=True,
            timeout=kw.pop("timeout", 120),
            **kw,
        )
        return Result(done.returncode, done.stdout, done.stderr)

    def utility(self, *args: str, **kw) -> Result:
        return self(str(BIN / "utility.sh"), *args, **kw)

    def runjob(self, *args: str, **kw) -> Result:
        return self(str(BIN / "RunJob"), *args, **kw)

    def sh(self, line: str, **kw) -> Result:
        return self("bash", "-c", line, **kw)

    def ok(self, *args: str, **kw) -> Result:
        """``utility`` that must succeed."""
        result = self.utility(*args, **kw)
        assert result.code == 0, result
        return result

    def drain(self, script: str, *args: str, env: dict[str, str] | None = None, **options):
        """``RunJob --all SCRIPT ARGS...`` through :func:`dataflow.api.drain`, in this
        process with the CLI's environment (plus ``env``) and working folder (the jobs are
        processes, as RunJob's); its :class:`~dataflow.api.Drained`. For a drain that sets
        a scene or whose rules a test reads from the store: RunJob's own output, exit,
        signals and crashes are a process's (``runjob``)."""
        from dataflow import api

        with _as_its_own_process(self.cwd, {**self.env, **(env or {})}):
            return api.drain(script, args, **options)

    def run_job(self, script: str, *args: str, env: dict[str, str] | None = None, **options):
        """``RunJob SCRIPT ARGS...`` (one chunk) through :func:`dataflow.api.run_job`, in
        this process as :meth:`drain`; its :class:`~dataflow.api.Drained` (``exit_code``:
        the chunk's, ``started == 0``: nothing to do)."""
        from dataflow import api

        with _as_its_own_process(self.cwd, {**self.env, **(env or {})}):
            return api.run_job(script, args, **options)


class InProcessCli(Cli):
    """A :class:`Cli` whose ``utility`` runs in this process, as sqlite-utils tests its CLI
    with click's CliRunner: ``dataflow.cli.utility.main(argv)`` with the CLI's environment,
    working folder and standard input, its output and exit code captured. Milliseconds
    where a process takes a second. RunJob, shell lines and anything about signals,
    crashes, the environment of a process or secrets in its arguments still run as
    processes (``runjob``, ``sh``, ``__call__``); a run that only sets a scene or whose
    rules a test checks may run here too, through the library (``drain``, ``run_job``,
    as on any :class:`Cli`)."""

    def utility(self, *args: str, env: dict[str, str] | None = None, **kw) -> Result:
        kw.pop("timeout", None)  # a call in this process is not bounded from outside
        unknown = set(kw) - {"input"}
        if unknown:  # what only a process has (its own descriptors...): a process
            return super().utility(*args, env=env, **kw)
        return run_utility(args, self.cwd, {**self.env, **(env or {})}, kw.get("input"))


@contextmanager
def _as_its_own_process(cwd: Path, env: dict[str, str]):
    """This process's environment, time zone, working folder and standard streams as a
    process of ``utility`` started with ``env`` in ``cwd`` would have them; all put back
    afterwards, whatever the command changed (it may set PASSKEY, or replace stdout)."""
    saved_env, saved_cwd = dict(os.environ), os.getcwd()
    saved_streams = sys.stdin, sys.stdout, sys.stderr
    os.environ.clear()
    os.environ.update(env)
    time.tzset()
    os.chdir(cwd)
    try:
        yield
    finally:
        sys.stdin, sys.stdout, sys.stderr = saved_streams
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        time.tzset()


def run_utility(argv, cwd: Path, env: dict[str, str], input: str | None = None) -> Result:
    """``utility *argv`` in this process; its exit code and output as a process's."""
    from dataflow.cli import utility

    out, err = io.BytesIO(), io.BytesIO()
    with _as_its_own_process(cwd, env):
        sys.stdin = io.StringIO(input or "")
        sys.stdout = stdout = io.TextIOWrapper(out, encoding="utf-8", write_through=True)
        sys.stderr = stderr = io.TextIOWrapper(err, encoding="utf-8", write_through=True)
        try:
            code = utility.main([str(arg) for arg in argv])
        except SystemExit as exc:  # argparse's --help, --version and usage errors
            if isinstance(exc.code, str):
                print(exc.code, file=sys.stderr)
            code = exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        except BaseException:  # a bug: what Python prints as a process ends with one
            traceback.print_exc()
            code = 1
        for stream in (stdout, stderr):
            with suppress(ValueError):
                stream.flush()
    return Result(
        code, out.getvalue().decode(errors="replace"), err.getvalue().decode(errors="replace")
    )


BOUND = 6  # DATAFLOW_LIVENESS_TIMEOUT of the multi-host tests, in seconds (default 20)


def two_hosts(tmp_path: Path, address, bound: float, own_state: bool = True) -> list[Cli]:
    """Host A and host B of one store, simulated on this machine: their own names
    (DATAFLOW_HOST) and liveness bound, and with ``own_state`` their own folders of logs
    and chunk locks (DATAFLOW_STATE, a shared store's); the same cwd, where the jobs are."""
    found = []
    for name in ("hostA", "hostB"):
        host = Cli(tmp_path, address)
        host.env.update(DATAFLOW_HOST=name, DATAFLOW_LIVENESS_TIMEOUT=str(bound))
        if own_state:
            host.env["DATAFLOW_STATE"] = str(tmp_path / name)
        found.append(host)
    return found


def installed(*names: str, message: str) -> str:
    """The path of the first of programs ``names`` that is installed; without one the test
    is skipped here, and fails on CI (.ci/run installs every program the tests need)."""
    for name in names:
        found = shutil.which(name)
        if found:
            return found
    if os.environ.get("CI", "").lower() not in ("", "0", "false"):
        pytest.fail(message)
    pytest.skip(message)


def script(folder: Path, name: str, body: str) -> Path:
    """Write an executable bash job script."""
    path = folder / name
    path.write_text("#!/usr/bin/env bash\n" + body + "\n")
    path.chmod(0o755)
    return path


def wait_for(predicate, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def process_state(pid: int) -> str:
    """A process's state letter (T: stopped), or "" once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return ""


def on_cue(tmp_path: Path, env: dict[str, str], code: str, *args: str) -> subprocess.Popen:
    """A Python process running ``code`` (with ``args``), once it has printed "ready";
    :func:`cue` then lets it go on (it reads a line)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        cwd=tmp_path,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline() == "ready\n", proc.stderr.read()
    return proc


def cue(proc: subprocess.Popen) -> None:
    proc.stdin.write("\n")
    proc.stdin.flush()


def waiting_for_locks(tmp_path: Path, count: int) -> None:
    """Wait until ``count`` sessions of the test's PostgreSQL database wait for a lock."""
    sql = (
        "select count(*) from pg_stat_activity"
        " where wait_event_type = 'Lock' and datname = current_database()"
    )
    wait_for(lambda: rows(tmp_path, sql) == [(count,)], 20, f"{count} sessions waiting")


def rows(tmp_path: Path, sql: str, *params) -> list[tuple]:
    """Rows of a query on the test's store, read by the backend's own driver."""
    address = ADDRESSES.get(tmp_path, tmp_path / "dataflow.db")
    if isinstance(address, str):  # a PostgreSQL URL
        import psycopg

        with psycopg.connect(address) as conn:
            return conn.execute(sql.replace("?", "%s"), params).fetchall()
    with sqlite3.connect(address) as conn:
        return conn.execute(sql, params).fetchall()


def state(tmp_path: Path) -> list:
    """Everything the test's store holds, to compare before and after: SQLite's SQL dump
    of the file, or every table of a PostgreSQL database with its columns and rows."""
    address = ADDRESSES.get(tmp_path, tmp_path / "dataflow.db")
    if not isinstance(address, str):
        with closing(sqlite3.connect(address)) as conn:  # closed: no -shm left behind
            return list(conn.iterdump())
    import psycopg

    with psycopg.connect(address) as conn:
        tables = conn.execute(
            "SELECT table_name, string_agg(column_name || ' ' || data_type, ', '"
            " ORDER BY ordinal_position) FROM information_schema.columns"
            " WHERE table_schema = 'public' GROUP BY table_name ORDER BY 1"
        ).fetchall()
        found = [
            (name, columns, sorted(conn.execute(f'SELECT * FROM "{name}"').fetchall(), key=repr))
            for name, columns in tables
        ]
        triggers = conn.execute(
            "SELECT tgname, tgrelid::regclass::text FROM pg_trigger WHERE NOT tgisinternal"
            " ORDER BY 1"
        ).fetchall()
        functions = conn.execute(
            "SELECT proname, md5(prosrc) FROM pg_proc"
            " WHERE pronamespace = 'public'::regnamespace ORDER BY 1"
        ).fetchall()
    return [*found, triggers, functions]


def run_is_live(tmp_path: Path, jobid: str, dataid: str) -> bool:
    """Does a process of the chunk's run live, as every RunJob sees it (its local lock
    on SQLite, its keeper's run lock on PostgreSQL)?"""
    from dataflow.run.claim.liveness import is_live
    from dataflow.store import open_store

    with open_store(ADDRESSES.get(tmp_path, tmp_path / "dataflow.db"), readonly=True) as store:
        return is_live(store, jobid, dataid)


def statuses(tmp_path, jobid):
    return dict(
        rows(
            tmp_path,
            "select dataid, status from datastatus where jobid=? and locktype='OUT'",
            jobid,
        )
    )


def in_rows(tmp_path, jobid):
    return rows(tmp_path, "select dataid from datastatus where jobid=? and locktype='IN'", jobid)


def history(tmp_path, jobid):
    return rows(
        tmp_path,
        "select dataid, attempt, status, exitcode, signal, reason from run where jobid=? order by runid",
        jobid,
    )


def setting(cli, name, value):
    cli.ok("dml", f"delete from job where jobid='work' and itemtype='{name}'")
    cli.ok("dml", f"insert into job (jobid,itemtype,itemvalue) values ('work','{name}','{value}')")


def start_runjob(cli, *args, env=None, **kw):
    """RunJob in the background; ``env``: variables added to the CLI's environment."""
    return start(cli, "RunJob", *args, env=env, **kw)


def start(cli, command: str, *args, env=None, **kw):
    """``bin/<command>`` in the background, its output piped; ``env``: variables added to
    the CLI's environment."""
    return subprocess.Popen(
        [str(BIN / command), *args],
        cwd=cli.cwd,
        env={**cli.env, **(env or {})},
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kw,
    )


# another process holding chunk locks of job ``work`` (its store's lock file, or the one
# given first) until a moment (seconds, after them) after the file let-go appears
HOLD_UNTIL_LET_GO = """
import os, sys, time
from pathlib import Path
from dataflow.run.process import locks
from dataflow.store import open_store
from dataflow.store.address import locate
path, moment, *chunks = sys.argv[1:]
lockfile = Path(path) if path else open_store(locate()).lockfile
locks.prepare(lockfile)
held = [locks.ChunkLock(lockfile, "work", dataid) for dataid in chunks]
assert all(lock.try_acquire() for lock in held)
print("held", flush=True)
while not os.path.exists("let-go"):
    time.sleep(0.01)
time.sleep(float(moment))
"""


def chunk_holder(cli, lockfile: str, moment: float, *chunks: str) -> subprocess.Popen:
    """:data:`HOLD_UNTIL_LET_GO` in ``cli``'s folder and environment, once it holds them
    (``lockfile`` empty: the store's)."""
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_UNTIL_LET_GO, lockfile, str(moment), *chunks],
        cwd=cli.cwd,
        env=cli.env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "held"
    return holder


def written(path: Path) -> bool:
    """Has a job written this file whole (a line)? A shell creates the file of
    ``echo $$ > f`` before it writes the line: existing is not enough."""
    try:
        return path.read_text().endswith("\n")
    except OSError:
        return False


# a project's file (dataflow.toml: tests/test_projects.py): two datasets, one job
SALES = """\
[project]
name = "sales"

[datasets.raw]
database = "csv"
schemaname = "/data/lake"
tablename = "raw"

[datasets.clean]
database = "parquet"
schemaname = "/data/lake"
tablename = "clean"

[jobs.load]
in = ["raw"]
out = ["clean"]
retries = 2
ready_by = "06:00"
env = { region = "eu" }
"""


def _admin(tmp_path, sql: str, *params) -> list[tuple]:
    """A statement of any SQL client of the store (DDL included), committed: the store of
    the test whose folder is ``tmp_path``, or the PostgreSQL database at that URL."""
    import psycopg

    from dataflow.dataids import natural_key
    from dataflow.store.postgres import connection

    address = (
        tmp_path if isinstance(tmp_path, str) else ADDRESSES.get(tmp_path, tmp_path / "dataflow.db")
    )
    if isinstance(address, str):
        with psycopg.connect(connection.conninfo(address), autocommit=True) as conn:
            cursor = conn.execute(sql.replace("?", "%s") if params else sql, params or None)
            return cursor.fetchall() if cursor.description is not None else []
    with closing(sqlite3.connect(address)) as conn, conn:
        conn.create_function("dataflow_natkey", 1, natural_key)  # the store's triggers call it
        return conn.execute(sql, params).fetchall()


def dump(tmp_path) -> list[str]:
    """The SQLite store of the test whose folder is ``tmp_path``, as SQL (to compare)."""
    with sqlite3.connect(tmp_path / "dataflow.db") as conn:
        return list(conn.iterdump())


def shell(cli, line: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """A shell line run like a user's, with RunJob from bin/ (a hang fails the test)."""
    return subprocess.run(
        ["bash", "-c", line],
        cwd=cli.cwd,
        env=cli.env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# a job line that says it started, then holds until the test touches ``release``
HOLD = "touch started; while [ ! -e release ]; do sleep 0.05; done"


def started_run(chain, tmp_path, *args):
    """RunJob on ./work.sh (chunk 1 of work), alive until the test touches ``release``."""
    script(tmp_path, "work.sh", f'echo "$dataid" >> starts; [ "$dataid" = 1 ] || exit 0; {HOLD}')
    runjob = start_runjob(chain, *args, "./work.sh")
    wait_for(lambda: (tmp_path / "started").exists(), what="the job to start")
    return runjob


def starts(tmp_path) -> list[str]:
    """What the jobs of started_run (and others) wrote into ``starts``, word by word."""
    return (tmp_path / "starts").read_text().split()


def refused(result, code: int | None = None, says: str = ""):
    """One ``error:`` line on stderr, a non-zero exit (``code`` if given), no traceback."""
    assert result.code != 0 and (code is None or result.code == code), result
    assert result.err.startswith("error: ") and result.err.count("\n") == 1, result
    assert "Traceback" not in result.err and says in result.err, result
    return result


def write(tmp_path, sql: str, *params) -> None:
    """Another client writes into the test's store with its own driver (``?`` placeholders)."""
    address = ADDRESSES.get(tmp_path, tmp_path / "dataflow.db")
    if isinstance(address, str):
        import psycopg

        with psycopg.connect(address) as conn:
            conn.execute(sql.replace("?", "%s"), params)
        return
    with closing(sqlite3.connect(address)) as conn, conn:
        conn.execute(sql, params)


def write_many(tmp_path, sql: str, rows) -> None:
    """Another client writes many rows into the test's store with its own driver."""
    address = ADDRESSES.get(tmp_path, tmp_path / "dataflow.db")
    if isinstance(address, str):
        import psycopg

        with psycopg.connect(address) as conn, conn.cursor() as cursor:
            cursor.executemany(sql.replace("?", "%s"), rows)
        return
    with closing(sqlite3.connect(address)) as conn, conn:
        conn.executemany(sql, rows)


def _chunks(cli):
    """Job A (src -> dst) registered, chunks 1..3 of src READY."""
    cli.ok("createtables")
    cli.ok("register-dataset", "src")
    cli.ok("register-dataset", "dst")
    cli.ok("register-job", "A", "--in", "src", "--out", "dst")
    cli.ok("ready", "src", "1", "2", "3")


def register(cli, jobid, inputs, outputs, extras=()):
    for name in {*inputs, *outputs} - {"today"}:
        cli.ok("dml", f"insert into dataset (datasetid) values ('{name}') on conflict do nothing")
    for itemtype, names in (("IN", inputs), ("OUT", outputs)):
        for name in names:
            cli.ok(
                "dml",
                f"insert into job (jobid,itemtype,datasetid) values ('{jobid}','{itemtype}','{name}')",
            )
    for name, value in extras:
        cli.ok(
            "dml",
            f"insert into job (jobid,itemtype,itemvalue) values ('{jobid}','{name}','{value}')",
        )


def ready(cli, dataset, *dataids):
    for dataid in dataids:
        cli.ok(
            "dml",
            f"insert into datastatus values ('{dataset}','fakejob','{dataid}','OUT','READY',now())",
        )


def old_store(path, version: int) -> sqlite3.Connection:
    """A store as release ``version`` of the schema made it."""
    from dataflow.dataids import natural_key
    from dataflow.store import now
    from dataflow.store.sqlite import schema
    from dataflow.store.sqlite.connection import statements

    conn = sqlite3.connect(path, isolation_level=None)
    conn.create_function("now", 0, now)
    conn.create_function("dataflow_natkey", 1, natural_key)
    for migration in schema.migrations()[:version]:
        for statement in statements(migration):
            conn.execute(statement)
    conn.execute(f"PRAGMA user_version = {version}")
    return conn
