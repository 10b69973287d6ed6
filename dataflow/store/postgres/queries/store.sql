-- PostgreSQL: what the store itself asks of the server.

-- name: clock
SELECT now();

-- name: schema_exists
SELECT to_regclass('dataflow_schema') IS NOT NULL;

-- name: schema_version
SELECT max(version) FROM dataflow_schema;

-- name: one_creator
-- One createtables at a time, whoever runs it.
SELECT pg_advisory_xact_lock(0, 0);

-- name: clear_schema_version
DELETE FROM dataflow_schema;
-- name: add_schema_version
INSERT INTO dataflow_schema VALUES (%s);

-- name: server_identity
-- Which server and database a session reached: a pooler's and the server's own address
-- of one store agree.
SELECT current_database(), pg_postmaster_start_time(), to_regclass('dataflow_schema')::oid;

-- name: ping
SELECT 1;

-- name: unhurried
-- This transaction may idle inside (the connection's options end a session that does).
SELECT set_config('idle_in_transaction_session_timeout', '0', true);
