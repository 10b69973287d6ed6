"""Shared fixtures: a real store (an SQLite file in tmp_path, or a database on a real
PostgreSQL server of this session's own), and the real CLIs in subprocesses.

A module or test marked ``both_stores`` runs once per backend: its ``cli`` (and
``address``) point at an SQLite file, then at a PostgreSQL database (that case marked
``second_store``: ``make test`` runs it, ``make test-fast`` does not). That database holds
the store's schema already (a copy of a template made once a session), as ``utility
createtables`` would have made it; a test marked ``empty_store`` gets an empty database
instead (a test of creation, or of what a command says where no store is), as an SQLite
test gets a file that is not there yet. ``cli.utility`` calls the CLI's main in the
test's process (see support.InProcessCli), unless the test is marked ``utility_process``.

The fixtures that hand out a store (``store``, ``chain``) start from a copy of a store
made once a session on either backend, as PostgreSQL's ``pg_store`` does: running every
migration again costs a test a tenth of a second on SQLite, and it is what
``createtables``' own tests check, not what the others are about.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from dataflow.store import create_store
from support import ADDRESSES, BOUND, Cli, InProcessCli, jvm, pgserver, two_hosts
from support.alerts import SECRET, _taken
from support.receivers import http_receiver

STORES = ("sqlite", "postgres")

# The suite shares two cores with Spark's JVMs and many processes: hypothesis's timing
# checks (an example's deadline, a draw too slow) would judge the machine's load, not the
# code. A test that sets its own suppress_health_check names too_slow again (a list
# given to @settings replaces the profile's).
settings.register_profile("suite", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("suite")


def _names(argnames) -> list[str]:
    if isinstance(argnames, str):
        return [name.strip() for name in argnames.split(",")]
    return list(argnames)


def pytest_generate_tests(metafunc):
    chosen = any(  # a test that names its store itself, in a module marked both_stores
        "store_kind" in _names(mark.args[0])
        for mark in metafunc.definition.iter_markers("parametrize")
    )
    if (
        metafunc.definition.get_closest_marker("both_stores")
        and "store_kind" in metafunc.fixturenames
        and not chosen
    ):
        sqlite, postgres = STORES
        second = pytest.param(postgres, marks=pytest.mark.second_store)
        metafunc.parametrize("store_kind", [sqlite, second], indirect=True)


@pytest.fixture
def store_kind(request) -> str:
    return getattr(request, "param", "sqlite")


@pytest.fixture(scope="session")
def pg_server():
    """This session's PostgreSQL server (see tests/support/pgserver.py): its own port and folder."""
    with pgserver.own_server() as server:
        yield server


@pytest.fixture(scope="session")
def pg_template(pg_server) -> str:
    """The name of a database that holds a fresh store: what pg_store copies."""
    return pgserver.make_template(pg_server)


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory) -> Path:
    """An SQLite file that holds a fresh store (``createtables``' work), made once a
    session (on each xdist worker): what :func:`made` copies."""
    path = tmp_path_factory.mktemp("template") / "dataflow.db"
    created, _ = create_store(path)
    created.close()  # the last connection: SQLite folds its WAL into the file
    return path


@pytest.fixture(scope="session")
def quick_jvm(tmp_path_factory: pytest.TempPathFactory, worker_id: str):
    """spark-submit's ``--driver-java-options`` that start a Spark test's JVM quicker (see
    tests/support/jvm.py), in a folder pytest's workers share."""
    base = tmp_path_factory.getbasetemp()
    shared = (base if worker_id == "master" else base.parent) / "jvm"
    with jvm.quick_jvm(shared, worker_id) as found:
        yield found


def made(address, request) -> None:
    """The store at ``address`` made as ``createtables`` makes it: on SQLite a copy of the
    session's template where no file is yet (a PostgreSQL ``pg_store`` is one already)."""
    if isinstance(address, Path) and not address.exists():
        shutil.copyfile(request.getfixturevalue("sqlite_template"), address)


@pytest.fixture
def pg_database(pg_server) -> str:
    """A fresh, empty database on the session's PostgreSQL server; its URL."""
    with pgserver.database(pg_server) as found:
        yield found


@pytest.fixture(scope="session")
def pg_spares(pg_server, pg_template):
    """Copies of the template made ahead, and databases dropped after, in a thread."""
    spares = pgserver.Spares(pg_server, pg_template)
    yield spares
    spares.close()


@pytest.fixture
def pg_store(pg_spares) -> str:
    """A fresh database that holds a fresh store (a copy of the template); its URL."""
    with pg_spares.database() as found:
        yield found


@pytest.fixture
def address(store_kind, tmp_path, request):
    """The store's address: a file in tmp_path, or a PostgreSQL database's URL."""
    if store_kind == "postgres":
        empty = request.node.get_closest_marker("empty_store")
        found = request.getfixturevalue("pg_database" if empty else "pg_store")
    else:
        found = tmp_path / "dataflow.db"
    ADDRESSES[tmp_path] = found
    yield found
    ADDRESSES.pop(tmp_path, None)


@pytest.fixture
def cli(tmp_path: Path, address, request) -> Cli:
    """The CLIs in tmp_path: ``utility`` runs in this process unless the test is marked
    ``utility_process`` (RunJob and shell lines always run as processes)."""
    as_process = request.node.get_closest_marker("utility_process") is not None
    return (Cli if as_process else InProcessCli)(tmp_path, address)


@pytest.fixture
def store(address, request):
    """A fresh store."""
    made(address, request)
    created, _ = create_store(address)
    yield created
    created.close()


@pytest.fixture
def chain(cli, tmp_path, request):
    """Job ``work`` (src -> dst), chunks 1..3 of src READY."""
    made(cli.address, request)
    cli.ok("createtables")
    cli.ok("dml", "insert into dataset (datasetid) values ('src'), ('dst')")
    cli.ok(
        "dml",
        "insert into job (jobid,itemtype,datasetid) values ('work','IN','src'), ('work','OUT','dst')",
    )
    cli.ok(
        "dml",
        "insert into datastatus select 'src','fakejob',value,'OUT','READY',now() from (select '1' value union select '2' union select '3') AS chunks",
    )
    return cli


@pytest.fixture
def pair(store_kind, tmp_path, request):
    """Host A and host B on the store (on SQLite: two names on this one host; on PostgreSQL
    each its own state folder), with the liveness bound BOUND."""
    address = request.getfixturevalue("pg_database") if store_kind == "postgres" else None
    address = address or tmp_path / "dataflow.db"
    found = two_hosts(tmp_path, address, BOUND, own_state=store_kind == "postgres")
    ADDRESSES[tmp_path] = address
    yield found
    ADDRESSES.pop(tmp_path, None)


@pytest.fixture
def hosts(tmp_path, pg_store):
    """Two hosts sharing a PostgreSQL store: their own folders and names, the same cwd
    (jobs), the liveness bound BOUND."""
    a, b = two_hosts(tmp_path, pg_store, BOUND)
    ADDRESSES[tmp_path] = pg_store
    yield a, b
    ADDRESSES.pop(tmp_path, None)


@pytest.fixture
def hook():
    """A webhook receiver on 127.0.0.1; ``hook.got``: the JSON bodies it received."""
    with http_receiver(_taken) as server:
        server.url = f"json://user:{SECRET}@127.0.0.1:{server.server_address[1]}/hook"  # type: ignore[attr-defined]
        yield server
