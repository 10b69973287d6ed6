-- PostgreSQL: what /metrics reads of the run history at each scrape, of the runs from
-- runid %(low)s up to (not with) %(high)s. %(bounds)s is a JSON array of a histogram's
-- bucket bounds, in seconds.

-- name: run_counts
-- %(abandoned)s is a LIKE pattern of the reason of a run that died without ending.
SELECT jobid, count(*) AS started,
       count(*) FILTER (WHERE status = 'FAILED') AS failed,
       count(*) FILTER (WHERE status = 'FAILED' AND reason LIKE %(abandoned)s) AS abandoned,
       sum(mod(runid, 1000003)) AS runids
FROM run WHERE runid >= %(low)s AND runid < %(high)s GROUP BY jobid;

-- name: run_durations
-- Finished runs per job and bucket (le: the smallest bound at or above their duration;
-- NULL above every bound): how many, and their seconds in all. One pass over the runs.
WITH bound(le) AS (
    SELECT value::float8 FROM jsonb_array_elements_text(%(bounds)s::jsonb)),
timed AS (SELECT jobid, duration AS seconds FROM run
          WHERE status <> 'RUNNING' AND duration IS NOT NULL
            AND runid >= %(low)s AND runid < %(high)s)
SELECT jobid, (SELECT min(le) FROM bound WHERE le >= seconds) AS le, count(*) AS runs,
       sum(seconds) AS seconds
FROM timed GROUP BY 1, 2;

-- name: claim_latencies
-- As run_durations, of the seconds from the newest READY OUT row of a chunk's inputs to
-- the start of its first run. started carries its UTC offset; modified is the session's
-- local time (now()).
WITH bound(le) AS (
    SELECT value::float8 FROM jsonb_array_elements_text(%(bounds)s::jsonb)),
waited AS (
    SELECT r.jobid,
           extract(epoch FROM r.started::timestamptz - max(d.modified)::timestamptz)::float8
               AS seconds
    FROM run r
    JOIN job i ON i.jobid = r.jobid AND i.itemtype = 'IN'
    JOIN datastatus d ON d.datasetid = i.datasetid AND d.dataid = r.dataid
        AND d.locktype = 'OUT' AND d.status = 'READY'
        AND d.modified::timestamptz <= r.started::timestamptz
    WHERE r.attempt = 1 AND r.runid >= %(low)s AND r.runid < %(high)s
    GROUP BY r.runid, r.jobid)
SELECT jobid, (SELECT min(le) FROM bound WHERE le >= seconds) AS le, count(*) AS runs,
       sum(seconds) AS seconds
FROM waited GROUP BY 1, 2;

-- name: first_running_run
-- The oldest run from runid low on that has not ended (NULL: none): the runs below it
-- change no more, but by hand. From the partial index of running runs.
SELECT min(runid) FROM run WHERE runid >= %(low)s AND status = 'RUNNING';

-- name: newest_runid
SELECT coalesce(max(runid), 0) FROM run;

-- name: run_total
-- How many runs, and the sum of their runids modulo a prime (what run_counts' runids
-- sum to): a run deleted and another committed late between two scrapes change it.
SELECT count(*), coalesce(sum(mod(runid, 1000003)), 0) FROM run;

-- name: run_mark
-- Migration 10's mark: the runid below which a server counted the runs, and how many of
-- those were deleted since (NULL: the row is gone).
SELECT max(below), max(changes) FROM run_mark;

-- name: raise_run_mark
-- (written only when it rises: a scrape that settles nothing more writes nothing)
UPDATE run_mark SET below = %(below)s WHERE below < %(below)s;

-- name: hold_run_writes
-- Until this transaction ends, nobody writes run (a claim numbers its run before it
-- commits: none is under way once this is granted); waited for as bound_waits allows.
LOCK TABLE run IN SHARE MODE;

-- name: begin_snapshot
-- The reads that follow see one snapshot of the store (writers go on meanwhile).
BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY;

-- name: end_snapshot
COMMIT;
