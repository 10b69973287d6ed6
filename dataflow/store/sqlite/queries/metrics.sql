-- SQLite: what /metrics reads of the run history at each scrape. :bounds is a JSON array
-- of a histogram's bucket bounds, in seconds.

-- name: run_counts
-- :abandoned is a LIKE pattern of the reason of a run that died without ending.
SELECT jobid, COUNT(*) AS started,
       SUM(CASE WHEN status = 'FAILED' THEN 1 ELSE 0 END) AS failed,
       SUM(CASE WHEN status = 'FAILED' AND reason LIKE :abandoned THEN 1 ELSE 0 END)
           AS abandoned
FROM run GROUP BY jobid;

-- name: run_durations
-- Per job and bound: the finished runs that took at most le seconds; then per job (le
-- NULL): its finished runs and their seconds in all.
WITH bound(le) AS (SELECT value FROM json_each(:bounds)),
timed AS (SELECT jobid, duration AS seconds FROM run
          WHERE status <> 'RUNNING' AND duration IS NOT NULL)
SELECT t.jobid, b.le, COUNT(*) AS runs, NULL AS seconds
FROM timed t JOIN bound b ON t.seconds <= b.le GROUP BY t.jobid, b.le
UNION ALL
SELECT jobid, NULL, COUNT(*), SUM(seconds) FROM timed GROUP BY jobid;

-- name: claim_latencies
-- As run_durations, of the seconds from the newest READY OUT row of a chunk's inputs to
-- the start of its first run. started carries its UTC offset; modified is local time
-- (now()): 'localtime' makes both local.
WITH bound(le) AS (SELECT value FROM json_each(:bounds)),
waited AS (
    SELECT r.jobid,
           (julianday(r.started, 'localtime') - julianday(MAX(d.modified))) * 86400.0
               AS seconds
    FROM run r
    JOIN job i ON i.jobid = r.jobid AND i.itemtype = 'IN'
    JOIN datastatus d ON d.datasetid = i.datasetid AND d.dataid = r.dataid
        AND d.locktype = 'OUT' AND d.status = 'READY'
        AND julianday(d.modified) <= julianday(r.started, 'localtime')
    WHERE r.attempt = 1
    GROUP BY r.runid, r.jobid)
SELECT w.jobid, b.le, COUNT(*) AS runs, NULL AS seconds
FROM waited w JOIN bound b ON w.seconds <= b.le GROUP BY w.jobid, b.le
UNION ALL
SELECT jobid, NULL, COUNT(*), SUM(seconds) FROM waited GROUP BY jobid;
