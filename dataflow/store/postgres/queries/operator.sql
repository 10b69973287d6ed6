-- PostgreSQL: what an operator reads of any host from one place: run logs (table runlog)
-- and the actions taken by hand (table action).

-- name: put_log
-- While the run is RUNNING, or at its end (done, inside the transaction that ends it);
-- a log that is done is never written again (a late piece of a run that ended).
INSERT INTO runlog(runid, size, kept, done, body)
SELECT %(runid)s, %(size)s, %(kept)s, %(done)s, %(body)s
WHERE %(done)s OR EXISTS (SELECT 1 FROM run WHERE runid = %(runid)s AND status = 'RUNNING')
ON CONFLICT (runid) DO UPDATE SET updated = now(), size = EXCLUDED.size,
    kept = EXCLUDED.kept, done = EXCLUDED.done, body = EXCLUDED.body
WHERE NOT runlog.done;

-- name: run_output
SELECT size, kept, done, updated, body FROM runlog WHERE runid = %s;

-- name: add_action
-- acted: the server's clock (the column's default, now()).
INSERT INTO action(host, who, client, action, jobid, dataid, detail)
VALUES (%(host)s, %(who)s, %(client)s, %(action)s, %(jobid)s, %(dataid)s, %(detail)s);

-- name: actions
SELECT actionid, acted, host, who, client, action, jobid, dataid, detail FROM action
WHERE (%(jobid)s::text IS NULL OR jobid = %(jobid)s)
  AND (%(dataid)s::text IS NULL OR dataid = %(dataid)s)
ORDER BY actionid DESC LIMIT %(limit)s;
