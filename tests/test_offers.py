"""The offer rule is written once (dataflow/store/offers.py) and rendered into both stores'
triggers: the newest migration holding each statement is what the rule writes, the stores
run exactly those, and the three forms of the natural key agree."""

import re
import sqlite3
from importlib import resources

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataflow.dataids import natural_key
from dataflow.store import create_store, offers
from dataflow.store.postgres import connection

FUNCTIONS = {  # PostgreSQL: each function of the rule, and what writes it
    "dataflow_natkey": offers.natkey,
    "dataflow_on_statuses": offers.on_statuses,
    "dataflow_on_job": offers.on_job,
}


def _newest_holding(backend: str, marker: str) -> str:
    """The text of the newest migration of ``backend`` in which ``marker`` appears."""
    folder = resources.files(f"dataflow.store.{backend}") / "migrations"
    files = sorted(path.name for path in folder.iterdir() if path.name.endswith(".sql"))
    holding = [name for name in files if marker in (folder / name).read_text()]
    assert holding, f"no {backend} migration holds {marker!r}"
    return (folder / holding[-1]).read_text()


def _triggers(text: str) -> dict[str, str]:
    """Each CREATE TRIGGER statement of ``text`` (without its ';'), by name."""
    found = re.findall(r"^(CREATE TRIGGER (\w+) .*? END);$", text, re.M | re.S)
    return {name: statement for statement, name in found}


def test_sqlites_newest_rule_migration_is_what_the_rule_writes():
    written = offers.sqlite()
    assert written in _newest_holding("sqlite", "CREATE TRIGGER candidate_on_insert")


def test_postgres_newest_rule_functions_are_what_the_rule_writes():
    for name, write in FUNCTIONS.items():
        assert write() in _newest_holding("postgres", f"CREATE OR REPLACE FUNCTION {name}(")


def test_a_fresh_sqlite_store_runs_the_rules_triggers(tmp_path):
    create_store(tmp_path / "s.db")[0].close()
    with sqlite3.connect(tmp_path / "s.db") as conn:
        stored = dict(conn.execute("select name, sql from sqlite_master where type = 'trigger'"))
    wanted = _triggers(offers.sqlite())
    assert len(wanted) == 6
    assert {name: stored.get(name) for name in wanted} == wanted


def test_a_fresh_postgres_store_runs_the_rules_functions(pg_store):
    with psycopg.connect(connection.conninfo(pg_store)) as conn:
        stored = dict(
            conn.execute("select proname, prosrc from pg_proc where proname ~ '^dataflow_'")
        )
    for name, write in FUNCTIONS.items():
        body = write().split("$$")[1]
        assert stored.get(name) == body, name


DATAIDS = st.one_of(
    st.from_regex(r"[0-9]{1,12}", fullmatch=True),
    st.from_regex(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", fullmatch=True),
    st.from_regex(r"[a-z0-9_.:T-]{0,16}", fullmatch=True),
    st.text(max_size=12),
).filter(lambda dataid: "\0" not in dataid)  # SQLite's functions end a text at a NUL


def _exact_in_plain_sql(dataid: str) -> bool:
    return bool(re.fullmatch(r"[0-9]+|[0-9]{4}-[0-9]{2}-[0-9]{2}", dataid))


@given(st.lists(DATAIDS, max_size=30))
def test_sqlites_plain_key_is_the_natural_key_or_empty(dataids):
    with sqlite3.connect(":memory:") as conn:
        for dataid in dataids:
            (key,) = conn.execute(f"select {offers.plain_key('?1')}", (dataid,)).fetchone()
            assert key == (natural_key(dataid) if _exact_in_plain_sql(dataid) else "")


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(dataids=st.lists(DATAIDS, max_size=30))
def test_postgres_natkey_is_the_natural_key(pg_store, dataids):
    with psycopg.connect(connection.conninfo(pg_store)) as conn:
        for dataid in dataids:
            (key,) = conn.execute("select dataflow_natkey(%s)", (dataid,)).fetchone()
            assert key == natural_key(dataid), dataid


def test_a_fresh_postgres_store_fires_the_rules_functions_on_every_write(pg_store):
    """The rule's functions do nothing unless triggers call them: each write to
    datastatus (per statement, with its rows) and to job (per row) fires one, and no
    other trigger of the rule is there (a migration that drops or rewires one fails)."""
    with psycopg.connect(connection.conninfo(pg_store)) as conn:
        stored = {
            name: " ".join(definition.split())
            for name, definition in conn.execute(
                "select tgname, pg_get_triggerdef(oid) from pg_trigger "
                "where not tgisinternal and tgname like 'candidate_on_%'"
            )
        }
    table = r"ON (\w+\.)?{} "
    wanted = {
        "candidate_on_insert": (r"AFTER INSERT " + table.format("datastatus"),
                                r"REFERENCING NEW TABLE AS written FOR EACH STATEMENT "
                                r"EXECUTE FUNCTION (\w+\.)?dataflow_on_statuses\(\)$"),
        "candidate_on_update": (r"AFTER UPDATE " + table.format("datastatus"),
                                r"REFERENCING NEW TABLE AS written FOR EACH STATEMENT "
                                r"EXECUTE FUNCTION (\w+\.)?dataflow_on_statuses\(\)$"),
        "candidate_on_delete": (r"AFTER DELETE " + table.format("datastatus"),
                                r"REFERENCING OLD TABLE AS gone FOR EACH STATEMENT "
                                r"EXECUTE FUNCTION (\w+\.)?dataflow_on_statuses\(\)$"),
        "candidate_on_job": (r"AFTER INSERT OR DELETE OR UPDATE " + table.format("job"),
                             r"FOR EACH ROW EXECUTE FUNCTION (\w+\.)?dataflow_on_job\(\)$"),
    }  # fmt: skip
    assert set(stored) == set(wanted), stored
    for name, (event, rest) in wanted.items():
        assert re.search(rf"^CREATE TRIGGER {name} {event}{rest}", stored[name]), stored[name]


@pytest.mark.both_stores
def test_an_upsert_of_a_status_that_offers_a_pair_offered_already_is_taken(store, store_kind):
    """A status written by an upsert (``INSERT ... ON CONFLICT DO UPDATE``, as a user
    types it, or as the store's own put_out_status) whose offer was made already: the
    statement is taken, and the pair offered once. (SQLite lets the conflict clause of the
    statement that fires a trigger override the trigger's: an ``INSERT OR IGNORE`` offer
    then failed on candidate's key.)"""
    mark = "?" if store_kind == "sqlite" else "%s"
    upsert = (
        "INSERT INTO datastatus(datasetid, jobid, dataid, locktype, status) "
        f"VALUES ('mid', {mark}, '7', 'OUT', 'READY') ON CONFLICT (datasetid, jobid, dataid) "
        "DO UPDATE SET status = excluded.status, locktype = excluded.locktype"
    )
    with store.transaction():
        for jobid, itemtype, datasetid in [("make", "OUT", "mid"), ("use", "IN", "mid")]:
            store.conn.execute(
                f"INSERT INTO job(jobid, itemtype, datasetid) VALUES ({mark}, {mark}, {mark})",
                (jobid, itemtype, datasetid),
            )
    for jobid in ("make", "make", "other"):  # the first offers; each later one offers again
        with store.transaction():
            store.conn.execute(upsert, (jobid,))
    offered = "SELECT jobid, dataid FROM candidate WHERE dataid = '7'"
    assert [tuple(row) for row in store.conn.execute(offered).fetchall()] == [("use", "7")]
