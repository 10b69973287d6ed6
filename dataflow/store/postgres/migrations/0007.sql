-- 7: the board reads only the dataids it shows. A job's OUT rows in natural order of
-- dataid (dataflow_natkey, compared byte by byte), newest last: the board reads the
-- newest N of each job from the end of this index instead of every row of the store.
-- Frozen: never edit a migration once released; a change is a new file.

CREATE INDEX IF NOT EXISTS datastatus_by_natkey
    ON datastatus(jobid, (dataflow_natkey(dataid) COLLATE "C"), dataid)
    WHERE locktype = 'OUT';
