-- SQLite: what the store itself reads and sets of its schema (PRAGMAs take no parameters).

-- name: indexes_and_triggers
-- Those of a table (a migration that rebuilds it puts its users' ones back).
SELECT name, sql FROM sqlite_master WHERE tbl_name = ? AND sql IS NOT NULL
  AND type IN ('index', 'trigger');

-- name: schema_version
PRAGMA user_version;

-- name: set_schema_version
-- {version}: schema.VERSION, a number of ours.
PRAGMA user_version = {version};

-- name: wal
PRAGMA journal_mode = WAL;

-- name: quick_check
-- A damaged file's header may still read as up to date.
PRAGMA quick_check(1);

-- name: changes
-- Rows the last statement changed itself (not our triggers'); stale after DDL.
SELECT changes();
