-- SQLite: what the store itself reads of its schema.

-- name: indexes_and_triggers
-- Those of a table (a migration that rebuilds it puts its users' ones back).
SELECT name, sql FROM sqlite_master WHERE tbl_name = ? AND sql IS NOT NULL
  AND type IN ('index', 'trigger');
