-- PostgreSQL: a chunk's hold and release (table hold, its outputs' status).

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
