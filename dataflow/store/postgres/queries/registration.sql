-- PostgreSQL: registration (tables dataset and job) and stored passwords.

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
