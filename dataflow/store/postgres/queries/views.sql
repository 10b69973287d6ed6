-- PostgreSQL: the read-only views (status, lineage, explain).

-- name: status_counts
-- From the summary of migration 8 (what COUNT(DISTINCT dataid) of each job's OUT rows by
-- status gives), with the difference the chunks written since the last fold make: exact
-- whether or not anyone folded them. RUNNING chunks (few) counted here, a seek per job.
WITH pending AS (SELECT DISTINCT jobid, dataid FROM chunk_pending),
fresh AS (SELECT DISTINCT d.jobid, d.dataid, d.status FROM pending p
        JOIN datastatus d ON d.jobid = p.jobid AND d.dataid = p.dataid AND d.locktype = 'OUT'
         AND d.status IS DISTINCT FROM 'RUNNING'),
stale AS (SELECT s.jobid, s.dataid, unnest(s.statuses) AS status FROM pending p
        JOIN chunk_seen s ON s.jobid = p.jobid AND s.dataid = p.dataid),
delta AS (SELECT jobid, status, 1 AS chunks FROM (TABLE fresh EXCEPT TABLE stale) AS came
          UNION ALL
          SELECT jobid, status, -1 FROM (TABLE stale EXCEPT TABLE fresh) AS went)
SELECT jobid, status,  -- a count a writer set past bigint's ends stops there
       least(greatest(sum(chunks), -9223372036854775807), 9223372036854775807)::bigint AS chunks
FROM (SELECT jobid, status, chunks FROM chunk_tally UNION ALL TABLE delta) AS t
WHERE jobid IN (SELECT jobid FROM job)
GROUP BY jobid, status HAVING sum(chunks) <> 0
UNION ALL
SELECT j.jobid, 'RUNNING', r.chunks FROM (SELECT DISTINCT jobid FROM job) j,
LATERAL (SELECT count(DISTINCT d.dataid) AS chunks FROM datastatus d
         WHERE d.jobid = j.jobid AND d.status = 'RUNNING' AND d.locktype = 'OUT') r
WHERE r.chunks <> 0;

-- name: fold_lock
-- One folder at a time (advisory lock space 3); a reader that does not get it reads the
-- pending chunks as they are.
SELECT pg_try_advisory_xact_lock(3, 0);

-- name: fold_chunk_tally
-- The chunks written since the last fold, into chunk_tally and chunk_seen, in one
-- statement (one snapshot): a chunk a writer changes meanwhile is pending again, and
-- folding it twice changes nothing.
WITH pending AS (DELETE FROM chunk_pending RETURNING jobid, dataid),
chunk AS (SELECT DISTINCT jobid, dataid FROM pending),
fresh AS (SELECT d.jobid, d.dataid, array_agg(DISTINCT d.status) AS statuses FROM chunk c
        JOIN datastatus d ON d.jobid = c.jobid AND d.dataid = c.dataid AND d.locktype = 'OUT'
         AND d.status IS DISTINCT FROM 'RUNNING'
        GROUP BY d.jobid, d.dataid),
stale AS (SELECT s.jobid, s.dataid, s.statuses FROM chunk c
        JOIN chunk_seen s ON s.jobid = c.jobid AND s.dataid = c.dataid),
fresh_each AS (SELECT jobid, dataid, unnest(statuses) AS status FROM fresh),
stale_each AS (SELECT jobid, dataid, unnest(statuses) AS status FROM stale),
delta AS (SELECT jobid, status, sum(chunks) AS chunks FROM (
              SELECT jobid, status, 1 AS chunks FROM (TABLE fresh_each EXCEPT TABLE stale_each) a
              UNION ALL
              SELECT jobid, status, -1 FROM (TABLE stale_each EXCEPT TABLE fresh_each) b) AS d
          GROUP BY jobid, status),
gone AS (DELETE FROM chunk_seen s USING stale w
         WHERE s.jobid = w.jobid AND s.dataid = w.dataid
           AND NOT EXISTS (SELECT 1 FROM fresh n WHERE n.jobid = w.jobid AND n.dataid = w.dataid)),
kept AS (INSERT INTO chunk_seen(jobid, dataid, statuses) SELECT jobid, dataid, statuses FROM fresh
         ON CONFLICT (jobid, dataid) DO UPDATE SET statuses = EXCLUDED.statuses)
INSERT INTO chunk_tally(jobid, status, chunks) SELECT jobid, status, chunks FROM delta
WHERE chunks <> 0
ON CONFLICT (jobid, status) DO UPDATE SET chunks = least(greatest(
    chunk_tally.chunks::numeric + EXCLUDED.chunks, -9223372036854775807), 9223372036854775807);

-- name: job_ids
SELECT DISTINCT jobid FROM job WHERE jobid <> '*' ORDER BY 1;

-- name: last_failure
-- From the chunks FAILED now (index datastatus_by_job_status), not from every failure of
-- the history: a failure a later run or an operator has fixed is not read at all. The
-- newest of those whose last run FAILED.
SELECT r.dataid, r.attempt, r.ended, r.reason FROM datastatus d
JOIN run r ON r.runid = (SELECT MAX(runid) FROM run WHERE jobid = d.jobid AND dataid = d.dataid)
WHERE d.jobid = %(jobid)s AND d.locktype = 'OUT' AND d.status = 'FAILED' AND r.status = 'FAILED'
ORDER BY r.runid DESC LIMIT 1;

-- name: chunk_of_dataset
-- A consumer's IN row is found through the jobs that list the dataset as IN (only
-- RunJob writes IN rows, for them).
SELECT jobid, locktype, status, modified FROM datastatus
WHERE datasetid = %(datasetid)s AND dataid = %(dataid)s AND locktype = 'OUT'
UNION ALL
SELECT d.jobid, d.locktype, d.status, d.modified FROM job j JOIN datastatus d
  ON d.jobid = j.jobid AND d.dataid = %(dataid)s AND d.datasetid = %(datasetid)s
WHERE j.datasetid = %(datasetid)s AND j.itemtype = 'IN' AND d.locktype = 'IN'
ORDER BY 2 DESC, 1;

-- name: jobs_using
SELECT DISTINCT jobid FROM job WHERE datasetid = %s AND itemtype = %s ORDER BY 1;

-- name: out_status
SELECT datasetid, status FROM datastatus WHERE jobid = %s AND dataid = %s
  AND locktype = 'OUT' ORDER BY 1;

-- name: dataids_of_job
SELECT DISTINCT dataid FROM datastatus WHERE jobid = %s AND locktype = 'OUT';

-- name: dataids_of_job_in
-- Those whose status is one of {marks}.
SELECT DISTINCT dataid FROM datastatus WHERE jobid = %s AND locktype = 'OUT'
  AND status IN ({marks});

-- name: waiting_upstream
SELECT dataid, jobid, status FROM datastatus WHERE datasetid = %s
  AND locktype = 'OUT' AND status <> 'READY';
