-- SQLite: whole tables, as utility copy-store reads and replaces them.

-- name: rows_of_dataset
SELECT {columns} FROM dataset ORDER BY 1, 2, 3;

-- name: rows_of_job
SELECT {columns} FROM job ORDER BY jobid, rowid;

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

-- name: insert_row
INSERT INTO {table}({columns}) VALUES ({marks});
