"""Frozen migrations: each schema version is a literal ``.sql`` file of its backend, never
edited once released; the store runs those files and no other DDL; and a store upgraded
from every past version has exactly the schema of a fresh one (SQLite: ``sqlite_schema``
compared as stored, byte for byte; PostgreSQL: ``pg_dump --schema-only`` less the lines
that change with every dump)."""

from __future__ import annotations

import configparser
import hashlib
import re
import shutil
import sqlite3
import subprocess
from contextlib import closing
from fnmatch import fnmatch
from pathlib import Path

import pytest

import dataflow
from dataflow.dataids import natural_key
from dataflow.store import create_store, now
from dataflow.store.postgres import schema as pg_schema
from dataflow.store.sqlite import schema as lite_schema
from dataflow.store.sqlite import store as lite_store
from dataflow.store.sqlite.connection import statements
from support import ROOT
from support.pgserver import database

PACKAGE = Path(dataflow.__file__).parent
FOLDERS = {
    "sqlite": PACKAGE / "store/sqlite/migrations",
    "postgres": PACKAGE / "store/postgres/migrations",
}
VERSIONS = {"sqlite": lite_schema.VERSION, "postgres": pg_schema.VERSION}

# sha256 of every released migration. A released file never changes (a store made by it
# keeps what it made): a schema change is a new file, whose digest is added here.
DIGESTS = {
    "sqlite": [
        "e5157a456d77a1d5a646e15d8c29d75009733a19ed72a66765ad0c4bb8743174",
        "2da41cefb67da3ff0bda356c209f3cc48c5db1e31ba16a0095c80219ebfc3a5b",
        "fefda0ae4fa90de1dac55309e64fa1a50aeac914a541ea1b31ca9b5e29c92390",
        "d379091ef5ca82f39117ce9fa5a685ac3fbc7d31d23c2c17d75c28d538675281",
        "d4ea6bed359a6de7db579d33adc982a565b8356583979f546fd3e0126c92f139",
        "9a1ba19531d0dd8e6366201b74febfdf52115ab65d0d3037522d84e31db3d20f",
        "13b8984ef265d3d83de6add69e4fb66234bf929e63d2da5b9b6561193f4daf2e",
        "04507697f3932af330bc92c684a734de97154e47e3deeef9814580adb0f29f40",
        "a90d5ca497ea5e2444e9525a62c7ec5b0096a3e44aaca427a4ae0f06aaba2dea",
        "7ba47dd8530b50905631916baad70b0321f3f5660ef14f119f92260dfcf454c4",
        "9068aa4441acc210512d2e930d24c51184000e32f04c7473118cd26987ad79b8",
        "e2fe68f877ac04d66fd796812435e0feb1d9e61746037a0dfe6c471df90109e0",
        "3ead7e0ed045b6ba96d0427e4bb110806d51df042992af8d23d2261726627eec",
        "b544cc9f6b81d920586206ec64c0a9eb111f37fde4eb3147fd873fab13a68793",
        "9df15bca7da6cffb14fa605b430fb9eeb63b5db38ca7e6ba3a544ede5366990d",
        "4a327e717eaf789cff0aa6bb41839d97844c490c9bd10bf098d1e7956fdf6069",
    ],
    "postgres": [
        "34c0ddd45c3cd595f41988445699f9280739a6684672f5da5d857ca990695c08",
        "5578f2215a3f495dbd380cd6931b25009bea35657bfdd7188bf1fae9dafd355f",
        "ef0b1f5bdc713d9fd0ae666891d615bcd11f4a56eeca7f8a92bbc3e509dd3e3d",
        "67f42fa2cea8cd7da7223193322185129e4aed8feefb2ef0ea475b70e44fb43d",
        "fc0323f383abbb025e0093ecb8c6444d3269f8e6eaa4c5751913b20b0edaaf04",
        "3d6db44137addea943c73e0bba5f3d42c1d053a919c7da5d1c631ba2ac1c3068",
        "989a82ac314d32bab821fae584b008e712093b575def586f0a87c6cd5ee3aa22",
        "0df13ec90c5ac8479a5ba273ffd4ff65b8340e311996b390e519376dcb69b001",
        "a960834a7797941227a2efa468c438a64876633b765a95c8faef8305fbb4dc05",
        "9d11b65ce2e612cadd697c73165f528c5f92618465c037647819352b50611241",
    ],
}

# schema changes: what only a migration file may hold (a TEMP table is a query's own)
DDL = re.compile(
    r"\b(CREATE\s+(UNIQUE\s+|OR\s+REPLACE\s+)?(TABLE|INDEX|TRIGGER|VIEW|FUNCTION|PROCEDURE)"
    r"|ALTER\s+TABLE|DROP\s+(TABLE|INDEX|TRIGGER|VIEW|FUNCTION))\b",
    re.IGNORECASE,
)


def files(backend: str) -> list[str]:
    """The migration files' text, read from disk, not through the code under test."""
    return [path.read_text(encoding="utf-8") for path in sorted(FOLDERS[backend].glob("*.sql"))]


# -- the files -----------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_released_migrations_never_change(backend):
    names = sorted(path.name for path in FOLDERS[backend].iterdir())
    assert names == [f"{n:04d}.sql" for n in range(1, VERSIONS[backend] + 1)], (
        "schema.VERSION is the number of migration files, numbered 0001.sql on"
    )
    assert len(names) == len(DIGESTS[backend]), "a new migration: add its digest to DIGESTS"
    found = [hashlib.sha256((FOLDERS[backend] / name).read_bytes()).hexdigest() for name in names]
    changed = [
        n
        for n, pair in enumerate(zip(DIGESTS[backend], found, strict=True), 1)
        if len(set(pair)) > 1
    ]
    assert not changed, f"released {backend} migrations {changed} were edited: add a new one"


def test_the_code_reads_the_files_as_they_are():
    assert lite_schema.migrations() == tuple(files("sqlite"))
    assert pg_schema.migrations() == tuple(files("postgres"))
    assert [pg_schema.migration(n) for n in range(1, pg_schema.VERSION + 1)] == files("postgres")


def test_the_files_are_package_data():
    """A wheel ships them: setup.cfg names each backend's folder."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg")
    data = config["options.package_data"]
    for backend, folder in FOLDERS.items():
        patterns = data.get(f"dataflow.store.{backend}", "").split()
        for path in folder.iterdir():
            assert any(fnmatch(f"migrations/{path.name}", p) for p in patterns), path


def test_no_schema_change_is_written_in_python():
    """DDL lives only in the migration files: no f-string helper can rewrite a released
    migration, and no code path changes the schema beside them. (``dataflow.spark`` is
    the jobs' library: its DDL is in the jobs' own databases, a fenced JDBC write's
    staging and fence tables, never in the store. ``store/offers.py`` writes the offer
    rule's statements for a developer to put in a new migration: no store runs them, and
    test_offers checks the newest migrations hold them as written.)"""
    assert all(DDL.search(text) for backend in FOLDERS for text in files(backend))
    rule = PACKAGE / "store" / "offers.py"
    found = [
        f"{path.relative_to(PACKAGE)}: {match.group(0)}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if PACKAGE / "spark" not in path.parents and path != rule
        for match in DDL.finditer(path.read_text())
    ]
    assert not found, found
    writers = re.compile(r"offers\.(sqlite|postgres|natkey|on_statuses|on_job)\(")
    calls = [path for path in PACKAGE.rglob("*.py") if writers.search(path.read_text())]
    assert calls == [], f"the rule's statements are run only from migrations: {calls}"
    jobs_ddl = {m.group(0) for m in DDL.finditer((PACKAGE / "spark/jdbc.py").read_text())}
    assert jobs_ddl == {"CREATE TABLE", "DROP TABLE"}  # the check sees the jobs' library


def test_every_index_and_trigger_of_a_fresh_store_is_ours(tmp_path):
    """A rebuild (schema.REBUILDS) puts back the indexes and triggers that are not ours():
    ours() must name every one a migration made."""
    created, _ = create_store(tmp_path / "dataflow.db")
    created.close()
    with closing(sqlite3.connect(tmp_path / "dataflow.db")) as conn:
        made = {
            name
            for (name,) in conn.execute(
                "SELECT name FROM sqlite_schema WHERE type IN ('index', 'trigger') AND sql > ''"
            )
        }
    assert "candidate_on_insert" in made and made <= lite_schema.ours()


# -- SQLite ---------------------------------------------------------------------------------


def sqlite_schema(path: Path) -> list[tuple]:
    """The schema as stored: each object's own text, compared exactly (nothing to
    normalize: a fresh and an upgraded store ran the same statements)."""
    with closing(sqlite3.connect(path)) as conn:
        found = conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_schema ORDER BY type, name"
        ).fetchall()
        return [*found, ("user_version", conn.execute("PRAGMA user_version").fetchone()[0])]


def traced_create(path: Path, monkeypatch) -> list[str]:
    """Create or upgrade the store at ``path`` as ``utility createtables`` does; the
    statements its connection ran."""
    ran: list[str] = []

    def connect(*args):
        conn = real(*args)
        conn.raw.set_trace_callback(ran.append)
        return conn

    real = lite_store.connect
    with monkeypatch.context() as patch:
        patch.setattr(lite_store, "connect", connect)
        created, _ = create_store(path)
        created.close()
    return ran


def contains_in_order(ran: list[str], expected: list[str]) -> bool:
    remaining = iter(ran)
    return all(any(sql == statement for sql in remaining) for statement in expected)


@pytest.mark.parametrize("version", range(lite_schema.VERSION))
def test_a_sqlite_store_of_every_version_upgrades_to_a_fresh_ones_schema(
    tmp_path, monkeypatch, version
):
    fresh = tmp_path / "fresh.db"
    traced_create(fresh, monkeypatch)

    old = tmp_path / "old.db"
    with closing(sqlite3.connect(old, isolation_level=None)) as conn:
        conn.create_function("now", 0, now)  # versions 1-6 call our functions
        conn.create_function("dataflow_natkey", 1, natural_key)
        for script in files("sqlite")[:version]:
            for statement in statements(script):
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {version}")
    before = sqlite_schema(old)
    ran = traced_create(old, monkeypatch)

    # SQLite runs (and traces) a statement up to its ';', without a comment after it
    expected = [
        re.sub(r";[ \t]*--[^\n]*$", ";", sql)
        for script in files("sqlite")[version:]
        for sql in statements(script)
    ]
    assert contains_in_order(ran, expected), "the upgrade ran the files' statements, in order"
    others = [sql for sql in ran if sql not in expected and DDL.search(sql)]
    assert not others, f"schema changes from outside the migration files: {others}"
    assert before != sqlite_schema(fresh)
    assert sqlite_schema(old) == sqlite_schema(fresh)


# -- PostgreSQL -----------------------------------------------------------------------------


def pg_dump_for(address: str) -> str:
    """The pg_dump of the server's own major version (an older one refuses a newer
    server; a newer one may write the dump differently)."""
    import psycopg

    with psycopg.connect(address) as conn:
        major = conn.info.server_version // 10000
    for found in (f"/usr/lib/postgresql/{major}/bin/pg_dump", shutil.which("pg_dump")):
        if found and Path(found).is_file():
            done = subprocess.run([found, "--version"], capture_output=True, text=True, timeout=30)
            if re.search(rf"\b{major}\.\d+", done.stdout):
                return found
    pytest.fail(f"no pg_dump of PostgreSQL {major}: apt-get install postgresql-client-{major}")


# lines that differ between two dumps of one schema: the versions that made the dump, and
# (pg_dump >= 15.14) the random key of \restrict / \unrestrict
VOLATILE = re.compile(r"^(-- Dumped (from database|by pg_dump) version |\\(un)?restrict )")


def pg_schema_dump(address: str) -> str:
    done = subprocess.run(
        [pg_dump_for(address), "--schema-only", "--dbname", address],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    kept = [line for line in done.stdout.splitlines() if not VOLATILE.match(line)]
    assert any(line.startswith("CREATE TABLE public.datastatus") for line in kept)
    return "\n".join(kept)


def traced_pg_create(address: str, monkeypatch) -> tuple[list[str], list[str]]:
    """Create or upgrade the store; the scripts it ran, and its other statements."""
    from dataflow.store.postgres.connection import Connection

    scripts: list[str] = []
    others: list[str] = []

    def execute_script(self, sql):
        scripts.append(sql)
        return real_script(self, sql)

    def execute(self, sql, params=()):
        others.append(sql)
        return real_execute(self, sql, params)

    real_script, real_execute = Connection.execute_script, Connection.execute
    with monkeypatch.context() as patch:
        patch.setattr(Connection, "execute_script", execute_script)
        patch.setattr(Connection, "execute", execute)
        created, _ = create_store(address)
        created.close()
    return scripts, others


@pytest.mark.parametrize("version", range(1, pg_schema.VERSION))
def test_a_postgresql_store_of_every_version_upgrades_to_a_fresh_ones_schema(
    pg_database, pg_server, monkeypatch, version
):
    import psycopg

    with psycopg.connect(pg_database, autocommit=True) as conn:
        for script in files("postgres")[:version]:
            conn.execute(script)
        conn.execute("INSERT INTO dataflow_schema VALUES (%s)", (version,))
    before = pg_schema_dump(pg_database)
    scripts, others = traced_pg_create(pg_database, monkeypatch)
    assert scripts == files("postgres")[version:]
    assert not [sql for sql in others if DDL.search(sql)]

    with database(pg_server) as fresh:
        scripts, others = traced_pg_create(fresh, monkeypatch)
        assert scripts == files("postgres")
        assert not [sql for sql in others if DDL.search(sql)]
        wanted = pg_schema_dump(fresh)
        with psycopg.connect(fresh) as conn:
            trigger = conn.execute(
                "SELECT pg_get_functiondef('dataflow_on_statuses'::regproc)"
            ).fetchone()[0]
    assert before != wanted
    assert pg_schema_dump(pg_database) == wanted
    with psycopg.connect(pg_database) as conn:
        assert conn.execute("SELECT version FROM dataflow_schema").fetchall() == [
            (pg_schema.VERSION,)
        ]
    # the claim takes the offer lock the triggers take (schema.offer_lock), both frozen
    space, bucket = pg_schema.offer_lock("dataid").split(", ")
    assert f"pg_advisory_xact_lock({space}, b)" in trigger and f"{bucket} AS b" in trigger


def test_postgres_vacuums_the_candidate_queue_by_its_dead_rows_not_its_size(pg_store):
    """Every claim deletes a candidate from the front of the index claims read: autovacuum
    cleans them after a fixed number, not after a fifth of the table (migration 9)."""
    import psycopg

    from dataflow.store.postgres import connection

    with psycopg.connect(connection.conninfo(pg_store)) as conn:
        (options,) = conn.execute(
            "SELECT reloptions FROM pg_class WHERE relname = 'candidate'"
        ).fetchone()
    assert sorted(options) == [
        "autovacuum_vacuum_scale_factor=0",
        "autovacuum_vacuum_threshold=5000",
    ]
