-- PostgreSQL: the claim and finish of a chunk (psycopg's placeholders: %s, %(name)s).
-- A claim locks the candidate rows it looks at (FOR UPDATE SKIP LOCKED: two claims never
-- wait for each other, and never take the same chunk), never a table. The offer lock
-- (1, hashtext(dataid) & 1023) is the one every datastatus trigger takes (schema.offer_lock).

-- name: candidates
-- The job's next candidates (as many as the claim wants), locked for this transaction,
-- and each one's chunk offer lock tried once its row is locked, in the same round trip;
-- none if the second parameter is true and the job has a max_parallel row (its claim
-- takes the job's turn first). Their dataids are left in setting dataflow.looked (a JSON
-- list, in this session) for chunk_facts sent after it; one row of NULLs when none.
WITH c AS MATERIALIZED (
    SELECT sortkey, dataid, pg_try_advisory_xact_lock(1, hashtext(dataid) & 1023) AS turned
    FROM (SELECT sortkey, dataid FROM candidate WHERE jobid = %s AND NOT (%s AND EXISTS (
              SELECT 1 FROM job WHERE job.jobid = candidate.jobid AND itemtype = 'max_parallel'))
          ORDER BY sortkey, dataid LIMIT %s FOR UPDATE SKIP LOCKED) locked),
     looked AS (SELECT set_config('dataflow.looked',
                                  coalesce(json_agg(dataid ORDER BY sortkey, dataid), '[]')::text,
                                  false) FROM c)
SELECT c.sortkey, c.dataid, c.turned FROM looked LEFT JOIN c ON true ORDER BY 1, 2;

-- name: candidates_after
-- The next ones, past a (sortkey, dataid) pair (no setting left).
WITH c AS MATERIALIZED (
    SELECT sortkey, dataid FROM candidate WHERE jobid = %s AND (sortkey, dataid) > (%s, %s)
    ORDER BY sortkey, dataid LIMIT %s FOR UPDATE SKIP LOCKED)
SELECT sortkey, dataid, pg_try_advisory_xact_lock(1, hashtext(dataid) & 1023) FROM c;

-- name: candidates_read
-- A reader's look at the job's first candidates: no lock, no turn (a role that may only
-- read, a standby, may ask it).
SELECT sortkey, dataid FROM candidate WHERE jobid = %s ORDER BY sortkey, dataid LIMIT %s;

-- name: candidates_read_after
SELECT sortkey, dataid FROM candidate WHERE jobid = %s AND (sortkey, dataid) > (%s, %s)
ORDER BY sortkey, dataid LIMIT %s;

-- name: put_candidate
INSERT INTO candidate(jobid, sortkey, dataid)
VALUES (%(jobid)s, dataflow_natkey(%(dataid)s), %(dataid)s) ON CONFLICT DO NOTHING;

-- name: drop_candidate
DELETE FROM candidate WHERE jobid = %s AND sortkey = %s AND dataid = %s;

-- name: drop_candidates
-- The candidates of a claim of several chunks, in one statement.
DELETE FROM candidate c
USING unnest(%(sortkeys)s::text[], %(dataids)s::text[]) AS k(sortkey, dataid)
WHERE c.jobid = %(jobid)s AND c.sortkey = k.sortkey AND c.dataid = k.dataid;

-- name: count_candidates
SELECT COUNT(*) FROM candidate WHERE jobid = %s;

-- name: ready_inputs
-- How many of these datasets ({marks}) have a READY output row at a dataid.
SELECT COUNT(DISTINCT datasetid) FROM datastatus WHERE datasetid IN ({marks})
  AND dataid = %s AND locktype = 'OUT' AND status = 'READY';

-- name: chunk_facts
-- What a claim reads of each chunk it looks at (%(dataids)s, in that order; NULL: those
-- that candidates left in setting dataflow.looked), in one statement: the job's rows
-- there (datasetid, locktype, status), how many of its inputs are READY there, then its
-- last run as last_run reads it (all NULL: none).
SELECT coalesce((SELECT array_agg(ARRAY[s.datasetid, s.locktype, s.status])
                 FROM datastatus s WHERE s.jobid = %(jobid)s AND s.dataid = c.dataid),
                '{}') AS chunk_rows,
       (SELECT COUNT(DISTINCT i.datasetid) FROM datastatus i
        WHERE i.datasetid = ANY(%(inputs)s::text[]) AND i.dataid = c.dataid
          AND i.locktype = 'OUT' AND i.status = 'READY') AS ready_inputs,
       r.*
FROM unnest(coalesce(%(dataids)s::text[],
                     ARRAY(SELECT json_array_elements_text(
                         nullif(current_setting('dataflow.looked', true), '')::json))))
     WITH ORDINALITY AS c(dataid, n)
LEFT JOIN LATERAL (
    SELECT *, coalesce(seen + greatest(lease, %(bound)s) * interval '1 second' > now(),
                       false) AS leased
    FROM run WHERE run.jobid = %(jobid)s AND run.dataid = c.dataid
    ORDER BY attempt DESC LIMIT 1) r ON true
ORDER BY c.n;

-- name: chunk_rows
SELECT datasetid, locktype, status FROM datastatus WHERE jobid = %s AND dataid = %s;

-- name: mark_running
-- Every row of the claims of chunks %(dataids)s in one statement (a dataset is never both
-- an IN and an OUT of a job: job_dataset_once), in the claims' order.
INSERT INTO datastatus(datasetid, jobid, dataid, locktype, status, modified)
SELECT r.datasetid, %(jobid)s, c.dataid, r.locktype, 'RUNNING', now()
FROM unnest(%(dataids)s::text[]) WITH ORDINALITY AS c(dataid, m)
CROSS JOIN unnest(%(datasetids)s::text[], %(locktypes)s::text[]) WITH ORDINALITY
     AS r(datasetid, locktype, n)
ORDER BY c.m, r.n
ON CONFLICT (datasetid, jobid, dataid)
DO UPDATE SET locktype = excluded.locktype, status = 'RUNNING', modified = now();

-- name: finish
-- A run's end: the job's OUT rows at a dataid set to a status, its IN rows deleted, in
-- one statement (the trigger looks at OUT rows only); both counts.
WITH o AS (UPDATE datastatus SET status = %(status)s, modified = now()
           WHERE jobid = %(jobid)s AND dataid = %(dataid)s AND locktype = 'OUT' RETURNING 1),
     i AS (DELETE FROM datastatus
           WHERE jobid = %(jobid)s AND dataid = %(dataid)s AND locktype = 'IN' RETURNING 1)
SELECT (SELECT COUNT(*) FROM o), (SELECT COUNT(*) FROM i);

-- name: set_out_status
UPDATE datastatus SET status = %s, modified = now()
WHERE jobid = %s AND dataid = %s AND locktype = 'OUT';

-- name: drop_inputs
DELETE FROM datastatus WHERE jobid = %s AND dataid = %s AND locktype = 'IN';

-- name: delete_chunk
DELETE FROM datastatus WHERE jobid = %s AND dataid = %s;

-- name: running
SELECT DISTINCT jobid, dataid FROM datastatus WHERE status = 'RUNNING' AND locktype = 'OUT';

-- name: running_of_job
SELECT DISTINCT jobid, dataid FROM datastatus
WHERE status = 'RUNNING' AND locktype = 'OUT' AND jobid = %s;

-- name: count_running
SELECT COUNT(DISTINCT dataid) FROM datastatus
WHERE jobid = %s AND status = 'RUNNING' AND locktype = 'OUT';

-- name: put_out_status
-- Create or set one OUT row; a row already so is not touched (not counted).
INSERT INTO datastatus(datasetid, jobid, dataid, locktype, status, modified)
VALUES (%s, %s, %s, 'OUT', %s, now()) ON CONFLICT (datasetid, jobid, dataid)
DO UPDATE SET locktype = 'OUT', status = excluded.status, modified = now()
WHERE datastatus.status IS DISTINCT FROM excluded.status
   OR datastatus.locktype IS DISTINCT FROM 'OUT';

-- name: readers
-- IN rows are written only for a job's registered IN datasets: seek them per job.
SELECT DISTINCT d.jobid FROM job j JOIN datastatus d ON d.jobid = j.jobid
  AND d.dataid = %s AND d.datasetid = j.datasetid WHERE j.datasetid IN ({marks})
  AND j.itemtype = 'IN' AND d.locktype = 'IN';

-- name: delete_run
DELETE FROM run WHERE runid = %s;

-- name: out_datasets
SELECT datasetid FROM datastatus WHERE jobid = %s AND dataid = %s AND locktype = 'OUT';

-- name: set_row_status
UPDATE datastatus SET status = %s, modified = now()
WHERE jobid = %s AND dataid = %s AND datasetid = %s;

-- name: delete_row
DELETE FROM datastatus WHERE jobid = %s AND dataid = %s AND datasetid = %s;

-- name: lock_run_inserts
-- Inserts into run wait (SHARE ROW EXCLUSIVE) while a claim is undone.
LOCK TABLE run IN SHARE ROW EXCLUSIVE MODE;

-- name: rewind_run_sequence
-- The run sequence back one, if the undone claim's runid is still the last it gave.
SELECT setval(s.id, GREATEST(%(runid)s::bigint - 1, 1), %(runid)s::bigint > 1)
FROM (SELECT pg_get_serial_sequence('run', 'runid')::regclass AS id) s
WHERE pg_sequence_last_value(s.id) = %(runid)s::bigint;

-- name: job_turn
-- The job's cap lock (its space: schema.CAP), for this transaction.
SELECT pg_advisory_xact_lock(%s, hashtext(%s));

-- name: bounded_waits
-- This transaction's lock waits end after so long (milliseconds), until unbounded_waits.
SELECT set_config('lock_timeout', %s, true);

-- name: unbounded_waits
SET LOCAL lock_timeout TO DEFAULT;

-- name: chunk_turn
-- The chunk's offer lock, waited for.
SELECT true FROM (SELECT pg_advisory_xact_lock(1, hashtext(%s) & 1023)) AS waited;

-- name: chunk_turns
-- The offer locks of several chunks, waited for, in the order the trigger takes them.
SELECT count(*) FROM (
    SELECT pg_advisory_xact_lock(1, b)
    FROM (SELECT DISTINCT hashtext(d) & 1023 AS b FROM unnest(%s::text[]) AS d ORDER BY b) AS s
) AS waited;

-- name: try_chunk_turn
SELECT pg_try_advisory_xact_lock(1, hashtext(%s) & 1023);
