-- SQLite: the run history (table run) and the listings built on it.

-- name: last_run
SELECT * FROM run WHERE jobid = ? AND dataid = ? ORDER BY attempt DESC LIMIT 1;

-- name: start_run
-- A RUNNING row: its start, then the {columns} given, one of {marks} each.
INSERT INTO run(status, started, {columns}) VALUES ('RUNNING', ?, {marks});

-- name: end_run
-- {sets}: ", column = ?" for each part of the outcome.
UPDATE run SET status = ?, ended = ?{sets} WHERE runid = ? AND status = 'RUNNING';

-- name: abandon_runs
UPDATE run SET status = 'FAILED', ended = ?, reason = ?
WHERE jobid = ? AND dataid = ? AND status = 'RUNNING';

-- name: note_run
UPDATE run SET reason = CASE WHEN reason IS NULL OR reason = '' THEN ?
ELSE reason || '; ' || ? END WHERE runid = ?;

-- name: request_rerun
UPDATE run SET rerun = ? WHERE jobid = ? AND dataid = ? AND status = 'RUNNING';

-- name: rerun_request
SELECT rerun FROM run WHERE runid = ?;

-- name: history
SELECT jobid, dataid, attempt, status, started, ended, duration, exitcode, signal,
       pid, host, command, logpath, reason FROM run
ORDER BY runid DESC LIMIT ?;

-- name: history_of_job
SELECT jobid, dataid, attempt, status, started, ended, duration, exitcode, signal,
       pid, host, command, logpath, reason FROM run WHERE jobid = ?
ORDER BY runid DESC LIMIT ?;

-- name: history_of_dataid
SELECT jobid, dataid, attempt, status, started, ended, duration, exitcode, signal,
       pid, host, command, logpath, reason FROM run WHERE dataid = ?
ORDER BY runid DESC LIMIT ?;

-- name: history_of_chunk
SELECT jobid, dataid, attempt, status, started, ended, duration, exitcode, signal,
       pid, host, command, logpath, reason FROM run WHERE jobid = ? AND dataid = ?
ORDER BY runid DESC LIMIT ?;

-- name: run_attempt
SELECT * FROM run WHERE jobid = ? AND dataid = ? AND attempt = ?;

-- name: runs
SELECT dataid, datasetid, jobid, locktype, modified, status FROM datastatus
WHERE locktype = 'OUT' ORDER BY modified DESC LIMIT ?;

-- name: board
SELECT d.jobid, d.dataid, MIN(d.status) AS status, r.attempt, r.duration,
       r.exitcode, r.signal, r.reason, r.started, r.ended, r.host, r.pid
FROM datastatus d
LEFT JOIN run r ON r.runid = (
    SELECT MAX(runid) FROM run WHERE jobid = d.jobid AND dataid = d.dataid)
WHERE d.locktype = 'OUT' AND d.jobid IN (SELECT jobid FROM job)
  AND (:jobid IS NULL OR d.jobid = :jobid)
GROUP BY d.jobid, d.dataid;

-- name: board_newest
-- A job's dataids, the newest first in natural order, from the end of the index
-- datastatus_by_natkey (its key expression, repeated here exactly, so that the index
-- serves the order): at most :limit rows. The key is '' for a dataid that is neither a
-- shard number nor an ISO date: those come last, and board_unkeyed reads them all.
SELECT dataid FROM datastatus INDEXED BY datastatus_by_natkey
WHERE jobid = :jobid AND locktype = 'OUT'
ORDER BY (CASE WHEN (dataid <> '' AND dataid NOT GLOB '*[^0-9]*') THEN char(1) || printf('%03d', length((CASE WHEN ltrim(dataid, '0') = '' THEN '0' ELSE ltrim(dataid, '0') END))) || (CASE WHEN ltrim(dataid, '0') = '' THEN '0' ELSE ltrim(dataid, '0') END) WHEN (dataid GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]') THEN char(1) || printf('%03d', length((CASE WHEN ltrim(substr(dataid, 1, 4), '0') = '' THEN '0' ELSE ltrim(substr(dataid, 1, 4), '0') END))) || (CASE WHEN ltrim(substr(dataid, 1, 4), '0') = '' THEN '0' ELSE ltrim(substr(dataid, 1, 4), '0') END) || '-' || char(1) || printf('%03d', length((CASE WHEN ltrim(substr(dataid, 6, 2), '0') = '' THEN '0' ELSE ltrim(substr(dataid, 6, 2), '0') END))) || (CASE WHEN ltrim(substr(dataid, 6, 2), '0') = '' THEN '0' ELSE ltrim(substr(dataid, 6, 2), '0') END) || '-' || char(1) || printf('%03d', length((CASE WHEN ltrim(substr(dataid, 9, 2), '0') = '' THEN '0' ELSE ltrim(substr(dataid, 9, 2), '0') END))) || (CASE WHEN ltrim(substr(dataid, 9, 2), '0') = '' THEN '0' ELSE ltrim(substr(dataid, 9, 2), '0') END) ELSE '' END) DESC, dataid DESC LIMIT :limit;

-- name: board_unkeyed
-- A job's dataids whose key board_newest cannot order (see there): one range of the index
-- (named: else the planner, blind to the key's values, reads the job's every row).
SELECT dataid FROM datastatus INDEXED BY datastatus_by_natkey
WHERE jobid = :jobid AND locktype = 'OUT'
  AND (CASE WHEN (dataid <> '' AND dataid NOT GLOB '*[^0-9]*') THEN char(1) || printf('%03d', length((CASE WHEN ltrim(dataid, '0') = '' THEN '0' ELSE ltrim(dataid, '0') END))) || (CASE WHEN ltrim(dataid, '0') = '' THEN '0' ELSE ltrim(dataid, '0') END) WHEN (dataid GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]') THEN char(1) || printf('%03d', length((CASE WHEN ltrim(substr(dataid, 1, 4), '0') = '' THEN '0' ELSE ltrim(substr(dataid, 1, 4), '0') END))) || (CASE WHEN ltrim(substr(dataid, 1, 4), '0') = '' THEN '0' ELSE ltrim(substr(dataid, 1, 4), '0') END) || '-' || char(1) || printf('%03d', length((CASE WHEN ltrim(substr(dataid, 6, 2), '0') = '' THEN '0' ELSE ltrim(substr(dataid, 6, 2), '0') END))) || (CASE WHEN ltrim(substr(dataid, 6, 2), '0') = '' THEN '0' ELSE ltrim(substr(dataid, 6, 2), '0') END) || '-' || char(1) || printf('%03d', length((CASE WHEN ltrim(substr(dataid, 9, 2), '0') = '' THEN '0' ELSE ltrim(substr(dataid, 9, 2), '0') END))) || (CASE WHEN ltrim(substr(dataid, 9, 2), '0') = '' THEN '0' ELSE ltrim(substr(dataid, 9, 2), '0') END) ELSE '' END) = '';

-- name: board_at
-- As board, at the dataids of the JSON array :dataids only.
SELECT d.jobid, d.dataid, MIN(d.status) AS status, r.attempt, r.duration,
       r.exitcode, r.signal, r.reason, r.started, r.ended, r.host, r.pid
FROM datastatus d
LEFT JOIN run r ON r.runid = (
    SELECT MAX(runid) FROM run WHERE jobid = d.jobid AND dataid = d.dataid)
WHERE d.locktype = 'OUT' AND d.jobid IN (SELECT jobid FROM job)
  AND d.dataid IN (SELECT value FROM json_each(:dataids))
GROUP BY d.jobid, d.dataid;

-- name: purgeable_runs
-- A chunk's last run stays: the next attempt's number follows it (it fences outputs).
SELECT r.runid, r.jobid, r.dataid, r.attempt, r.logpath, r.token FROM run r
WHERE r.status <> 'RUNNING' AND (:jobid IS NULL OR r.jobid = :jobid)
  AND (:before IS NULL OR r.started < :before)
  AND r.attempt < (SELECT MAX(attempt) FROM run WHERE jobid = r.jobid AND dataid = r.dataid)
ORDER BY r.runid;
