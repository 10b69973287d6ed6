-- SQLite: what an operator reads of any host from one place: run logs (table runlog) and
-- the actions taken by hand (table action).

-- name: put_log
-- While the run is RUNNING, or at its end (done, inside the transaction that ends it);
-- a log that is done is never written again (a late piece of a run that ended).
INSERT INTO runlog(runid, updated, size, kept, done, body)
SELECT :runid, strftime('%Y-%m-%d %H:%M:%f', 'now', 'localtime'), :size, :kept, :done, :body
WHERE :done OR EXISTS (SELECT 1 FROM run WHERE runid = :runid AND status = 'RUNNING')
ON CONFLICT(runid) DO UPDATE SET updated = excluded.updated, size = excluded.size,
    kept = excluded.kept, done = excluded.done, body = excluded.body
WHERE NOT runlog.done;

-- name: run_output
SELECT size, kept, done, updated, body FROM runlog WHERE runid = ?;

-- name: add_action
-- acted: this host's clock with its UTC offset, as the run history's times.
INSERT INTO action(acted, host, who, client, action, jobid, dataid, detail)
VALUES (:acted, :host, :who, :client, :action, :jobid, :dataid, :detail);

-- name: actions
SELECT actionid, acted, host, who, client, action, jobid, dataid, detail FROM action
WHERE (:jobid IS NULL OR jobid = :jobid) AND (:dataid IS NULL OR dataid = :dataid)
ORDER BY actionid DESC LIMIT :limit;
