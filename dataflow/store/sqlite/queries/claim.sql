-- SQLite: the claim and finish of a chunk (placeholders: ? and :name).

-- name: candidates
-- The job's first candidates in natural order.
SELECT sortkey, dataid FROM candidate WHERE jobid = ?
ORDER BY sortkey, dataid LIMIT ?;

-- name: candidates_after
-- The job's candidates past a (sortkey, dataid) pair, bound as stored.
SELECT sortkey, dataid FROM candidate WHERE jobid = ?
  AND (sortkey, dataid) > (CAST(? AS TEXT), CAST(? AS TEXT))
ORDER BY sortkey, dataid LIMIT ?;

-- name: put_candidate
INSERT OR IGNORE INTO candidate(jobid, sortkey, dataid) VALUES (?, ?, ?);

-- name: drop_candidate
DELETE FROM candidate WHERE jobid = ? AND sortkey = ? AND dataid = ?;

-- name: count_candidates
SELECT COUNT(*) FROM candidate WHERE jobid = ?;

-- name: ready_inputs
-- How many of these datasets ({marks}) have a READY output row at a dataid.
SELECT COUNT(DISTINCT datasetid) FROM datastatus WHERE datasetid IN ({marks})
  AND dataid = ? AND locktype = 'OUT' AND status = 'READY';

-- name: chunk_rows
SELECT datasetid, locktype, status FROM datastatus WHERE jobid = ? AND dataid = ?;

-- name: mark_running
-- One row of a claim (the trigger retires the (job, dataid) candidate).
INSERT INTO datastatus(datasetid, jobid, dataid, locktype, status, modified)
VALUES (?, ?, ?, ?, 'RUNNING', now()) ON CONFLICT(datasetid, jobid, dataid)
DO UPDATE SET locktype = excluded.locktype, status = 'RUNNING', modified = now();

-- name: set_out_status
UPDATE datastatus SET status = ?, modified = now()
WHERE jobid = ? AND dataid = ? AND locktype = 'OUT';

-- name: drop_inputs
DELETE FROM datastatus WHERE jobid = ? AND dataid = ? AND locktype = 'IN';

-- name: delete_chunk
DELETE FROM datastatus WHERE jobid = ? AND dataid = ?;

-- name: running
SELECT DISTINCT jobid, dataid FROM datastatus WHERE status = 'RUNNING' AND locktype = 'OUT';

-- name: running_of_job
SELECT DISTINCT jobid, dataid FROM datastatus
WHERE status = 'RUNNING' AND locktype = 'OUT' AND jobid = ?;

-- name: count_running
SELECT COUNT(DISTINCT dataid) FROM datastatus
WHERE jobid = ? AND status = 'RUNNING' AND locktype = 'OUT';

-- name: put_out_status
-- Create or set one OUT row; a row already so is not touched (not counted).
INSERT INTO datastatus(datasetid, jobid, dataid, locktype, status, modified)
VALUES (?, ?, ?, 'OUT', ?, now()) ON CONFLICT(datasetid, jobid, dataid)
DO UPDATE SET locktype = 'OUT', status = excluded.status, modified = now()
WHERE status IS NOT excluded.status OR locktype IS NOT 'OUT';

-- name: readers
-- IN rows are written only for a job's registered IN datasets: seek them per job.
SELECT DISTINCT d.jobid FROM job j JOIN datastatus d ON d.jobid = j.jobid
  AND d.dataid = ? AND d.datasetid = j.datasetid WHERE j.datasetid IN ({marks})
  AND j.itemtype = 'IN' AND d.locktype = 'IN';

-- name: delete_run
DELETE FROM run WHERE runid = ?;

-- name: out_datasets
SELECT datasetid FROM datastatus WHERE jobid = ? AND dataid = ? AND locktype = 'OUT';

-- name: set_row_status
UPDATE datastatus SET status = ?, modified = now()
WHERE jobid = ? AND dataid = ? AND datasetid = ?;

-- name: delete_row
DELETE FROM datastatus WHERE jobid = ? AND dataid = ? AND datasetid = ?;
