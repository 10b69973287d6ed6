-- PostgreSQL: registration (tables dataset and job), whole tables, hold/release.
-- ctid orders a table's rows as they were inserted (SQLite's rowid).

-- name: job_items
SELECT itemtype, datasetid, itemvalue FROM job WHERE jobid = %s ORDER BY ctid;

-- name: datasets
SELECT * FROM dataset ORDER BY 1;

-- name: datasets_of
-- Dataset rows of {marks} datasetids.
SELECT * FROM dataset WHERE datasetid IN ({marks}) ORDER BY 1;

-- name: put_dataset
INSERT INTO dataset(datasetid, hostname, database, schemaname, tablename, username,
                    encryptedpass)
VALUES (%s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (datasetid) DO UPDATE SET hostname = excluded.hostname,
    database = excluded.database, schemaname = excluded.schemaname,
    tablename = excluded.tablename, username = excluded.username,
    encryptedpass = excluded.encryptedpass;

-- name: delete_dataset
DELETE FROM dataset WHERE datasetid = %s;

-- name: put_job_item
INSERT INTO job(jobid, itemtype, datasetid, itemvalue, modified) VALUES (%s, %s, %s, %s, now());

-- name: delete_job
DELETE FROM job WHERE jobid = %s;

-- name: jobs
SELECT jobid, itemtype, datasetid, itemvalue, modified FROM job ORDER BY jobid, ctid;

-- name: job_rows
SELECT jobid, itemtype, datasetid, itemvalue FROM job WHERE jobid <> '*'
ORDER BY jobid, ctid;

-- name: passwords
SELECT datasetid, encryptedpass FROM dataset
WHERE encryptedpass IS NOT NULL AND encryptedpass <> '' ORDER BY 1;

-- name: set_password
UPDATE dataset SET encryptedpass = %s WHERE datasetid = %s;

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

-- name: delete_rows
DELETE FROM {table};

-- name: copy_rows
-- A million rows in seconds, not one round trip each.
COPY {table} ({columns}) FROM STDIN;

-- name: renumber_runs
-- New runs number on from the copied ones.
SELECT setval(pg_get_serial_sequence('run', 'runid'), GREATEST((SELECT MAX(runid) FROM run), 1));

-- name: held
SELECT datasetid, previous, since FROM hold WHERE jobid = %s AND dataid = %s;

-- name: hold
INSERT INTO hold(jobid, dataid, datasetid, previous, since) VALUES (%s, %s, %s, %s, now());

-- name: hold_output
INSERT INTO datastatus(datasetid, jobid, dataid, locktype, status, modified)
VALUES (%s, %s, %s, 'OUT', 'HOLD', now()) ON CONFLICT (datasetid, jobid, dataid)
DO UPDATE SET status = 'HOLD', modified = now();

-- name: unhold
DELETE FROM hold WHERE jobid = %s AND dataid = %s;
