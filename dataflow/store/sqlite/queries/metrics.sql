-- SQLite: what /metrics reads of the run history at each scrape, of the runs from runid
-- :low up to (not with) :high. :bounds is a JSON array of a histogram's bucket bounds,
-- in seconds.

-- name: run_counts
-- :abandoned is a LIKE pattern of the reason of a run that died without ending.
SELECT jobid, COUNT(*) AS started,
       SUM(CASE WHEN status = 'FAILED' THEN 1 ELSE 0 END) AS failed,
       SUM(CASE WHEN status = 'FAILED' AND reason LIKE :abandoned THEN 1 ELSE 0 END)
           AS abandoned,
       SUM(runid % 1000003) AS runids
FROM run WHERE runid >= :low AND runid < :high GROUP BY jobid;

-- name: run_durations
-- Finished runs per job and bucket (le: the smallest bound at or above their duration;
-- NULL above every bound): how many, and their seconds in all. One pass over the runs.
WITH bound(le) AS (SELECT value FROM json_each(:bounds))
SELECT jobid, (SELECT MIN(le) FROM bound WHERE le >= duration) AS le, COUNT(*) AS runs,
       SUM(duration) AS seconds
FROM run WHERE status <> 'RUNNING' AND duration IS NOT NULL
  AND runid >= :low AND runid < :high
GROUP BY jobid, le;

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
    WHERE r.attempt = 1 AND r.runid >= :low AND r.runid < :high
    GROUP BY r.runid, r.jobid)
SELECT jobid, (SELECT MIN(le) FROM bound WHERE le >= seconds) AS le, COUNT(*) AS runs,
       SUM(seconds) AS seconds
FROM waited GROUP BY jobid, le;

-- name: first_running_run
-- The oldest run from runid :low on that has not ended (NULL: none): the runs below it
-- change no more, but by hand.
SELECT MIN(runid) FROM run WHERE runid >= :low AND status = 'RUNNING';

-- name: newest_runid
SELECT COALESCE(MAX(runid), 0) FROM run;

-- name: run_total
-- How many runs, and the sum of their runids modulo a prime (what run_counts' runids
-- sum to): a run deleted and another committed late between two scrapes change it.
SELECT COUNT(*), COALESCE(SUM(runid % 1000003), 0) FROM run;

-- name: run_mark
-- Migration 15's mark: the runid below which a server counted the runs, and how many of
-- those were deleted since (NULL: the row is gone).
SELECT MAX(below), MAX(changes) FROM run_mark;

-- name: raise_run_mark
-- (written only when it rises: a scrape that settles nothing more writes nothing)
UPDATE run_mark SET below = :below WHERE below < :below;

-- name: begin_snapshot
-- The reads that follow see one snapshot of the store (WAL: writers go on meanwhile).
BEGIN DEFERRED;

-- name: end_snapshot
COMMIT;
