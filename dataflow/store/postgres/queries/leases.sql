-- PostgreSQL: run locks (session advisory locks held by keepers, dataflow.run.lease.keeper)
-- and leases (a run's heartbeat: run.seen, renewed by its keeper; NULL: none).

-- name: try_run_locks
-- Each key's lock tried, in the order given.
SELECT pg_try_advisory_lock(t.k) FROM unnest(%s::bigint[]) WITH ORDINALITY AS t(k, n)
ORDER BY t.n;

-- name: drop_run_locks
SELECT pg_advisory_unlock(k) FROM unnest(%s::bigint[]) AS k;

-- name: advisory_locks_held
-- The keys of the session advisory locks (of one bigint) granted in this database.
SELECT (classid::bigint << 32) | objid::bigint FROM pg_locks
WHERE locktype = 'advisory' AND objsubid = 1 AND granted
  AND database = (SELECT oid FROM pg_database WHERE datname = current_database());

-- name: keep_alive
-- The server ends this session once it stops pinging for this long, and none of its
-- statements waits for a lock longer than the other (milliseconds each: a claim may be
-- waiting for this session's holder, and a statement queued behind the claim's locks,
-- a give-back's LOCK TABLE of run, would wait for it in turn); its application_name says
-- whose it is (dataflow/MILLISECONDS holder HOST).
SELECT set_config('idle_session_timeout', %s, false), set_config('lock_timeout', %s, false),
       set_config('application_name', %s, false);

-- name: end_stalled
-- Sessions of ours (this role, this database) that the server has waited on in the middle
-- of a transaction's statements for longer than each allows (its application_name,
-- dataflow/MILLISECONDS, then maybe a space and whose it is: a quarter of its host's
-- bound, as its idle timeout): their process stopped after sending a part and before its
-- end (psycopg's pipeline mode:
-- statements, then their Sync), so that the server sees them active, never idle in their
-- transaction, and its idle timeout never ends them. Ended, their transactions are undone
-- and their locks let go. A COPY waits for its rows the same way while it lasts: it is
-- left alone.
SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE datname = current_database() AND usename = current_user AND pid <> pg_backend_pid()
  AND state = 'active' AND wait_event = 'ClientRead' AND xact_start IS NOT NULL
  AND query NOT ILIKE 'copy%%'
  AND query_start < clock_timestamp() - interval '1 millisecond' *
      CASE WHEN application_name ~ '^dataflow/[0-9]{1,9}( |$)'
           THEN split_part(split_part(application_name, ' ', 1), '/', 2)::int END;

-- name: renew_leases
-- A renewal never waits for a row of run that another transaction holds: a claim holds
-- the rows of the stale leases it revokes while it asks this host's holder, the renewer,
-- to take run locks, and waits for its answer (nor for long for the table: see
-- keep_alive). Each run asked for comes back: renewed
-- now (true), or its row held elsewhere with its lease not revoked as this statement
-- sees it (false: not renewed this time). A run that does not come back was revoked.
-- Rows are locked in the order of runid, as every statement that locks several does.
WITH mine AS MATERIALIZED (
  SELECT runid FROM run WHERE runid = ANY(%(runids)s) AND seen IS NOT NULL
  ORDER BY runid FOR UPDATE SKIP LOCKED),
renewed AS (
  UPDATE run SET seen = now() FROM mine WHERE run.runid = mine.runid RETURNING run.runid)
SELECT runid, true FROM renewed
UNION ALL
SELECT runid, false FROM run
WHERE runid = ANY(%(runids)s) AND seen IS NOT NULL AND runid NOT IN (SELECT runid FROM mine);

-- name: release_leases
UPDATE run SET seen = NULL FROM (
  SELECT runid FROM run WHERE runid = ANY(%s) ORDER BY runid FOR UPDATE
) AS mine WHERE run.runid = mine.runid;

-- name: release_leases_unwaited
-- The same, never waiting for a row another transaction holds (the holder's, for the
-- reason renew_leases gives): those whose lease is still held come back, to be let go
-- of later.
WITH mine AS MATERIALIZED (
  SELECT runid FROM run WHERE runid = ANY(%(runids)s) ORDER BY runid FOR UPDATE SKIP LOCKED),
released AS (
  UPDATE run SET seen = NULL FROM mine WHERE run.runid = mine.runid)
SELECT runid FROM run
WHERE runid = ANY(%(runids)s) AND seen IS NOT NULL AND runid NOT IN (SELECT runid FROM mine);

-- name: live_leases
-- The runs of these chunks that have a lease, and whether it is fresh (%(bound)s: this
-- host's bound).
SELECT r.runid, r.jobid, r.dataid,
       r.seen + greatest(r.lease, %(bound)s) * interval '1 second' > now()
FROM run r JOIN unnest(%(jobids)s::text[], %(dataids)s::text[]) AS c(jobid, dataid)
  ON r.jobid = c.jobid AND r.dataid = c.dataid WHERE r.seen IS NOT NULL;

-- name: live_leases_to_revoke
-- The same, their rows locked until the transaction ends, never waited for: a lease whose
-- row another transaction holds now (its keeper renewing it, a claim revoking it) is
-- taken for fresh. A claim may revoke leases in several statements (its recovery's, then
-- each batch's); were it to wait here, a keeper renewing some of them in one statement
-- could hold one of the rows and wait for another that the claim holds: a deadlock.
WITH leased AS (
    SELECT r.runid, r.jobid, r.dataid
    FROM run r JOIN unnest(%(jobids)s::text[], %(dataids)s::text[]) AS c(jobid, dataid)
      ON r.jobid = c.jobid AND r.dataid = c.dataid WHERE r.seen IS NOT NULL),
locked AS MATERIALIZED (
    SELECT runid, seen + greatest(lease, %(bound)s) * interval '1 second' > now() AS fresh
    FROM run WHERE runid IN (SELECT runid FROM leased) AND seen IS NOT NULL
    ORDER BY runid FOR UPDATE SKIP LOCKED)
SELECT l.runid, l.jobid, l.dataid, coalesce(k.fresh, true)
FROM leased l LEFT JOIN locked k ON k.runid = l.runid;
