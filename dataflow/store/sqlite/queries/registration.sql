-- SQLite: registration (tables dataset and job) and stored passwords.

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
