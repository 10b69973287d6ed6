-- SQLite: registration (tables dataset and job), whole tables, hold/release.

-- name: job_items
SELECT itemtype, datasetid, itemvalue FROM job WHERE jobid = ? ORDER BY rowid;

-- name: datasets
SELECT * FROM dataset ORDER BY 1;

-- name: datasets_of
-- Dataset rows of {marks} datasetids.
SELECT * FROM dataset WHERE datasetid IN ({marks}) ORDER BY 1;

-- name: put_dataset
INSERT OR REPLACE INTO dataset(datasetid, hostname, database, schemaname, tablename,
                               username, encryptedpass)
VALUES (?, ?, ?, ?, ?, ?, ?);

-- name: delete_dataset
DELETE FROM dataset WHERE datasetid = ?;

-- name: put_job_item
INSERT INTO job(jobid, itemtype, datasetid, itemvalue, modified) VALUES (?, ?, ?, ?, now());

-- name: delete_job
DELETE FROM job WHERE jobid = ?;

-- name: jobs
SELECT jobid, itemtype, datasetid, itemvalue, modified FROM job ORDER BY jobid, rowid;

-- name: job_rows
SELECT jobid, itemtype, datasetid, itemvalue FROM job WHERE jobid <> '*'
ORDER BY jobid, rowid;

-- name: passwords
SELECT datasetid, encryptedpass FROM dataset
WHERE encryptedpass IS NOT NULL AND encryptedpass <> '' ORDER BY 1;

-- name: set_password
UPDATE dataset SET encryptedpass = ? WHERE datasetid = ?;

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

-- name: delete_rows
DELETE FROM {table};

-- name: insert_row
INSERT INTO {table}({columns}) VALUES ({marks});

-- name: held
SELECT datasetid, previous, since FROM hold WHERE jobid = ? AND dataid = ?;

-- name: hold
INSERT INTO hold(jobid, dataid, datasetid, previous, since) VALUES (?, ?, ?, ?, now());

-- name: hold_output
INSERT INTO datastatus(datasetid, jobid, dataid, locktype, status, modified)
VALUES (?, ?, ?, 'OUT', 'HOLD', now()) ON CONFLICT(datasetid, jobid, dataid)
DO UPDATE SET status = 'HOLD', modified = now();

-- name: unhold
DELETE FROM hold WHERE jobid = ? AND dataid = ?;
