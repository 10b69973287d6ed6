-- SQLite: a chunk's hold and release (table hold, its outputs' status).

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
