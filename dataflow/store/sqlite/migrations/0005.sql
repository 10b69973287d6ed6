-- 5: datastatus keyed by (jobid, dataid, datasetid), WITHOUT ROWID. A claim's OUT and
-- IN rows share one leaf page, a job's rows at a dataid need no index of their own, and
-- the dataset look-ups (inputs READY?) need only OUT rows: a claim writes 7 pages to the
-- WAL instead of 11 (benchmarks/findings.md). The key is the seed's, in another order.
-- The table is rebuilt; legacy_alter_table keeps the rename from rewriting or checking
-- the triggers and views that name datastatus (they name it again once it is back).
-- store.create puts back indexes and triggers a user added to datastatus (schema.REBUILDS).
-- Frozen: never edit a migration once released; a change is a new file.

PRAGMA legacy_alter_table = ON;
CREATE TABLE datastatus_v5(
    datasetid TEXT NOT NULL,
    jobid     TEXT NOT NULL,
    dataid    TEXT NOT NULL,
    locktype  TEXT,
    status    TEXT,
    modified  TEXT DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now', 'localtime')),
    PRIMARY KEY (jobid, dataid, datasetid)
) WITHOUT ROWID;
INSERT INTO datastatus_v5 SELECT datasetid, jobid, dataid, locktype, status, modified
    FROM datastatus;
DROP TABLE datastatus;
ALTER TABLE datastatus_v5 RENAME TO datastatus;
PRAGMA legacy_alter_table = OFF;
CREATE INDEX datastatus_by_chunk ON datastatus(datasetid, dataid) WHERE locktype = 'OUT';
CREATE INDEX datastatus_out_by_modified ON datastatus(modified) WHERE locktype = 'OUT';
-- locktype is a column too, although always 'OUT': SQLite counts an index as covering
-- only by its columns, and against the key's (jobid ...) it uses only a covering one
CREATE INDEX datastatus_by_job_status ON datastatus(jobid, status, dataid, locktype)
    WHERE locktype = 'OUT';
CREATE TRIGGER candidate_on_insert AFTER INSERT ON datastatus
WHEN NEW.locktype = 'OUT' BEGIN 
    DELETE FROM candidate WHERE NEW.status NOT IN ('RESUBMIT', 'FAILED')
      AND jobid = NEW.jobid AND sortkey = dataflow_natkey(NEW.dataid)
      AND dataid = NEW.dataid; 
    INSERT OR IGNORE INTO candidate(jobid, sortkey, dataid)
    SELECT DISTINCT c.jobid, dataflow_natkey(NEW.dataid), NEW.dataid FROM job c
    WHERE NEW.status = 'READY' AND c.itemtype = 'IN' AND c.datasetid = NEW.datasetid
      AND NOT EXISTS (SELECT 1 FROM job t WHERE t.jobid = c.jobid
                      AND t.itemtype = 'IN' AND t.datasetid = 'today')
      AND NOT EXISTS (SELECT 1 FROM job i WHERE i.jobid = c.jobid AND i.itemtype = 'IN'
                      AND NOT EXISTS (SELECT 1 FROM datastatus r
                                      WHERE r.datasetid = i.datasetid AND r.dataid = NEW.dataid
                                        AND r.locktype = 'OUT' AND r.status = 'READY'))
      AND NOT EXISTS (SELECT 1 FROM datastatus o WHERE o.jobid = c.jobid
                      AND o.dataid = NEW.dataid AND o.locktype = 'OUT'
                      AND o.status NOT IN ('RESUBMIT', 'FAILED'));
    INSERT OR IGNORE INTO candidate(jobid, sortkey, dataid)
    SELECT DISTINCT c.jobid, dataflow_natkey(NEW.dataid), NEW.dataid FROM job c
    WHERE NEW.status IN ('RESUBMIT', 'FAILED') AND c.jobid = NEW.jobid
      AND NOT EXISTS (SELECT 1 FROM job t WHERE t.jobid = c.jobid
                      AND t.itemtype = 'IN' AND t.datasetid = 'today')
      AND NOT EXISTS (SELECT 1 FROM job i WHERE i.jobid = c.jobid AND i.itemtype = 'IN'
                      AND NOT EXISTS (SELECT 1 FROM datastatus r
                                      WHERE r.datasetid = i.datasetid AND r.dataid = NEW.dataid
                                        AND r.locktype = 'OUT' AND r.status = 'READY'))
      AND NOT EXISTS (SELECT 1 FROM datastatus o WHERE o.jobid = c.jobid
                      AND o.dataid = NEW.dataid AND o.locktype = 'OUT'
                      AND o.status NOT IN ('RESUBMIT', 'FAILED')); END;
CREATE TRIGGER candidate_on_update AFTER UPDATE ON datastatus
WHEN NEW.locktype = 'OUT' BEGIN 
    DELETE FROM candidate WHERE NEW.status NOT IN ('RESUBMIT', 'FAILED')
      AND jobid = NEW.jobid AND sortkey = dataflow_natkey(NEW.dataid)
      AND dataid = NEW.dataid; 
    INSERT OR IGNORE INTO candidate(jobid, sortkey, dataid)
    SELECT DISTINCT c.jobid, dataflow_natkey(NEW.dataid), NEW.dataid FROM job c
    WHERE NEW.status = 'READY' AND c.itemtype = 'IN' AND c.datasetid = NEW.datasetid
      AND NOT EXISTS (SELECT 1 FROM job t WHERE t.jobid = c.jobid
                      AND t.itemtype = 'IN' AND t.datasetid = 'today')
      AND NOT EXISTS (SELECT 1 FROM job i WHERE i.jobid = c.jobid AND i.itemtype = 'IN'
                      AND NOT EXISTS (SELECT 1 FROM datastatus r
                                      WHERE r.datasetid = i.datasetid AND r.dataid = NEW.dataid
                                        AND r.locktype = 'OUT' AND r.status = 'READY'))
      AND NOT EXISTS (SELECT 1 FROM datastatus o WHERE o.jobid = c.jobid
                      AND o.dataid = NEW.dataid AND o.locktype = 'OUT'
                      AND o.status NOT IN ('RESUBMIT', 'FAILED'));
    INSERT OR IGNORE INTO candidate(jobid, sortkey, dataid)
    SELECT DISTINCT c.jobid, dataflow_natkey(NEW.dataid), NEW.dataid FROM job c
    WHERE NEW.status IN ('RESUBMIT', 'FAILED') AND c.jobid = NEW.jobid
      AND NOT EXISTS (SELECT 1 FROM job t WHERE t.jobid = c.jobid
                      AND t.itemtype = 'IN' AND t.datasetid = 'today')
      AND NOT EXISTS (SELECT 1 FROM job i WHERE i.jobid = c.jobid AND i.itemtype = 'IN'
                      AND NOT EXISTS (SELECT 1 FROM datastatus r
                                      WHERE r.datasetid = i.datasetid AND r.dataid = NEW.dataid
                                        AND r.locktype = 'OUT' AND r.status = 'READY'))
      AND NOT EXISTS (SELECT 1 FROM datastatus o WHERE o.jobid = c.jobid
                      AND o.dataid = NEW.dataid AND o.locktype = 'OUT'
                      AND o.status NOT IN ('RESUBMIT', 'FAILED')); END;
CREATE TRIGGER candidate_on_delete AFTER DELETE ON datastatus
BEGIN 
    INSERT OR IGNORE INTO candidate(jobid, sortkey, dataid)
    SELECT DISTINCT c.jobid, dataflow_natkey(OLD.dataid), OLD.dataid FROM job c
    WHERE c.jobid = OLD.jobid
      AND NOT EXISTS (SELECT 1 FROM job t WHERE t.jobid = c.jobid
                      AND t.itemtype = 'IN' AND t.datasetid = 'today')
      AND NOT EXISTS (SELECT 1 FROM job i WHERE i.jobid = c.jobid AND i.itemtype = 'IN'
                      AND NOT EXISTS (SELECT 1 FROM datastatus r
                                      WHERE r.datasetid = i.datasetid AND r.dataid = OLD.dataid
                                        AND r.locktype = 'OUT' AND r.status = 'READY'))
      AND NOT EXISTS (SELECT 1 FROM datastatus o WHERE o.jobid = c.jobid
                      AND o.dataid = OLD.dataid AND o.locktype = 'OUT'
                      AND o.status NOT IN ('RESUBMIT', 'FAILED')); END;
