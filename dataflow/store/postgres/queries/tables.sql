-- PostgreSQL: whole tables, as utility copy-store reads and replaces them.

-- name: rows_of_dataset
SELECT {columns} FROM dataset ORDER BY 1, 2, 3;

-- name: rows_of_job
SELECT {columns} FROM job ORDER BY jobid, ctid;

-- name: rows_of_datastatus
SELECT {columns} FROM datastatus ORDER BY 1, 2, 3;

-- name: rows_of_run
SELECT {columns} FROM run ORDER BY runid;

-- name: rows_of_hold
SELECT {columns} FROM hold ORDER BY 1, 2, 3;

-- name: rows_of_deploy
SELECT {columns} FROM deploy ORDER BY deployid;

-- name: rows_of_runlog
SELECT {columns} FROM runlog ORDER BY runid;

-- name: rows_of_action
SELECT {columns} FROM action ORDER BY actionid;

-- name: delete_rows
DELETE FROM {table};

-- name: copy_rows
-- A million rows in seconds, not one round trip each.
COPY {table} ({columns}) FROM STDIN;

-- name: renumber_runs
-- New runs number on from the copied ones.
SELECT setval(pg_get_serial_sequence('run', 'runid'), GREATEST((SELECT MAX(runid) FROM run), 1));

-- name: renumber_deploys
-- New deploys number on from the copied ones.
SELECT setval(pg_get_serial_sequence('deploy', 'deployid'),
              COALESCE((SELECT MAX(deployid) FROM deploy), 0) + 1, false);

-- name: renumber_actions
-- New actions number on from the copied ones.
SELECT setval(pg_get_serial_sequence('action', 'actionid'),
              COALESCE((SELECT MAX(actionid) FROM action), 0) + 1, false);
