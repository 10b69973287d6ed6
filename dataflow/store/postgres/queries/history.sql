-- PostgreSQL: the run history (table run) and the listings built on it. A run's lease is
-- fresh while its heartbeat (seen) is younger than its lease, never younger than this
-- host's own bound (%(bound)s): a store writer who shortens a lease (lease = 0) cannot
-- hasten a take-over.

-- name: last_run
-- The chunk's last run; leased: its lease is fresh now (on the server's clock).
SELECT *, coalesce(seen + greatest(lease, %(bound)s) * interval '1 second' > now(), false)
       AS leased
FROM run WHERE jobid = %(jobid)s AND dataid = %(dataid)s ORDER BY attempt DESC LIMIT 1;

-- name: start_runs
-- RUNNING rows whose lease starts now, {rows}: each its status, start, heartbeat and lease,
-- then the {columns} given.
INSERT INTO run(status, started, seen, lease, {columns}) VALUES {rows}
RETURNING runid, jobid, dataid;

-- name: end_run
-- {sets}: ", column = %s" for each part of the outcome. The rerun asked of it, if any.
UPDATE run SET status = %s, ended = %s{sets} WHERE runid = %s AND status = 'RUNNING'
RETURNING rerun;

-- name: abandon_runs
UPDATE run SET status = 'FAILED', ended = %s, reason = %s
WHERE jobid = %s AND dataid = %s AND status = 'RUNNING';

-- name: note_run
UPDATE run SET reason = CASE WHEN reason IS NULL OR reason = '' THEN %s
ELSE reason || '; ' || %s END WHERE runid = %s;

-- name: request_rerun
UPDATE run SET rerun = %s WHERE jobid = %s AND dataid = %s AND status = 'RUNNING';

-- name: history
-- last_seen: when a live run's keeper last renewed its lease (empty once no process of
-- the run lives).
SELECT jobid, dataid, attempt, status, started, ended, duration, exitcode, signal,
       pid, host, command, logpath, reason,
       round(extract(epoch FROM now() - seen))::int || ' s ago' AS last_seen
FROM run WHERE (%(jobid)s::text IS NULL OR jobid = %(jobid)s)
  AND (%(dataid)s::text IS NULL OR dataid = %(dataid)s)
ORDER BY runid DESC LIMIT %(limit)s;

-- name: run_attempt
SELECT * FROM run WHERE jobid = %s AND dataid = %s AND attempt = %s;

-- name: runs
SELECT dataid, datasetid, jobid, locktype, modified, status FROM datastatus
WHERE locktype = 'OUT' ORDER BY modified DESC LIMIT %s;

-- name: board
SELECT d.jobid, d.dataid, d.status, r.attempt, r.duration, r.exitcode, r.signal,
       r.reason, r.started, r.ended, r.host, r.pid
FROM (SELECT jobid, dataid, MIN(status) AS status FROM datastatus
      WHERE locktype = 'OUT' AND jobid IN (SELECT jobid FROM job)
        AND (%(jobid)s::text IS NULL OR jobid = %(jobid)s)
      GROUP BY jobid, dataid) d
LEFT JOIN run r ON r.runid = (
    SELECT MAX(runid) FROM run WHERE jobid = d.jobid AND dataid = d.dataid);

-- name: board_newest
-- A job's dataids, the newest first in natural order, from the end of the index
-- datastatus_by_natkey: at most %(limit)s rows.
SELECT dataid FROM datastatus WHERE jobid = %(jobid)s AND locktype = 'OUT'
ORDER BY dataflow_natkey(dataid) COLLATE "C" DESC, dataid DESC LIMIT %(limit)s;

-- name: board_unkeyed
-- dataflow_natkey orders every dataid exactly: board_newest leaves none for this.
SELECT dataid FROM datastatus WHERE false AND jobid = %(jobid)s LIMIT %(limit)s;

-- name: board_at
-- As board, at the dataids of the JSON array %(dataids)s only.
SELECT d.jobid, d.dataid, d.status, r.attempt, r.duration, r.exitcode, r.signal,
       r.reason, r.started, r.ended, r.host, r.pid
FROM (SELECT jobid, dataid, MIN(status) AS status FROM datastatus
      WHERE locktype = 'OUT' AND jobid IN (SELECT jobid FROM job)
        AND dataid IN (SELECT jsonb_array_elements_text(%(dataids)s::jsonb))
      GROUP BY jobid, dataid) d
LEFT JOIN run r ON r.runid = (
    SELECT MAX(runid) FROM run WHERE jobid = d.jobid AND dataid = d.dataid);

-- name: purgeable_runs
-- A chunk's last run stays: the next attempt's number follows it (it fences outputs).
-- A run whose lease is fresh keeps its history (a shortened lease does not free it).
SELECT r.runid, r.jobid, r.dataid, r.attempt, r.logpath, r.token FROM run r
WHERE r.status <> 'RUNNING' AND (%(jobid)s::text IS NULL OR r.jobid = %(jobid)s)
  AND NOT coalesce(r.seen + greatest(r.lease, %(bound)s) * interval '1 second' > now(), false)
  AND (%(before)s::text IS NULL OR r.started < %(before)s)
  AND r.attempt < (SELECT MAX(attempt) FROM run WHERE jobid = r.jobid AND dataid = r.dataid)
ORDER BY r.runid;
