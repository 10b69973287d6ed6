-- SQLite: the read-only views (status, lineage, explain) and purge.

-- name: status_counts
-- From the summary the triggers of migration 13 keep (what COUNT(DISTINCT dataid) of each
-- job's OUT rows by status gives), not from every row; RUNNING chunks (few) counted
-- here, a seek per job in datastatus_by_job_status. A count a writer spoilt (text, a
-- blob) is read as the integer SQLite makes of it, never handed on as it is.
SELECT jobid, status, CAST(chunks AS INTEGER) AS chunks FROM chunk_tally
WHERE CAST(chunks AS INTEGER) <> 0 AND jobid IN (SELECT jobid FROM job)
UNION ALL
SELECT jobid, 'RUNNING', chunks FROM (
    SELECT j.jobid, (SELECT COUNT(DISTINCT d.dataid) FROM datastatus d
                     WHERE d.jobid = j.jobid AND d.status = 'RUNNING' AND d.locktype = 'OUT')
               AS chunks
    FROM (SELECT DISTINCT jobid FROM job) j)
WHERE chunks <> 0;

-- name: job_ids
SELECT DISTINCT jobid FROM job WHERE jobid <> '*' ORDER BY 1;

-- name: last_failure
-- From the chunks FAILED now (index datastatus_by_job_status), not from every failure of
-- the history: a failure a later run or an operator has fixed is not read at all. The
-- newest of those whose last run FAILED.
SELECT r.dataid, r.attempt, r.ended, r.reason FROM datastatus d
JOIN run r ON r.runid = (SELECT MAX(runid) FROM run WHERE jobid = d.jobid AND dataid = d.dataid)
WHERE d.jobid = :jobid AND d.locktype = 'OUT' AND d.status = 'FAILED' AND r.status = 'FAILED'
ORDER BY r.runid DESC LIMIT 1;

-- name: chunk_of_dataset
-- datastatus_by_chunk holds OUT rows only; a consumer's IN row is found through the jobs
-- that list the dataset as IN (only RunJob writes IN rows, for them).
SELECT jobid, locktype, status, modified FROM datastatus
WHERE datasetid = :datasetid AND dataid = :dataid AND locktype = 'OUT'
UNION ALL
SELECT d.jobid, d.locktype, d.status, d.modified FROM job j JOIN datastatus d
  ON d.jobid = j.jobid AND d.dataid = :dataid AND d.datasetid = :datasetid
WHERE j.datasetid = :datasetid AND j.itemtype = 'IN' AND d.locktype = 'IN'
ORDER BY 2 DESC, 1;

-- name: jobs_using
SELECT DISTINCT jobid FROM job WHERE datasetid = ? AND itemtype = ? ORDER BY 1;

-- name: out_status
SELECT datasetid, status FROM datastatus WHERE jobid = ? AND dataid = ?
  AND locktype = 'OUT' ORDER BY 1;

-- name: dataids_of_job
SELECT DISTINCT dataid FROM datastatus WHERE jobid = ? AND locktype = 'OUT';

-- name: dataids_of_job_in
-- Those whose status is one of {marks}.
SELECT DISTINCT dataid FROM datastatus WHERE jobid = ? AND locktype = 'OUT'
  AND status IN ({marks});

-- name: waiting_upstream
SELECT dataid, jobid, status FROM datastatus WHERE datasetid = ?
  AND locktype = 'OUT' AND status <> 'READY';
