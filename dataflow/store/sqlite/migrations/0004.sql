-- 4: the OUT-row triggers also retire their own chunk; stale pairs left before go;
-- an index for the status view
-- Frozen: never edit a migration once released; a change is a new file.

DROP TRIGGER IF EXISTS candidate_on_insert;
DROP TRIGGER IF EXISTS candidate_on_update;
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
-- runs lists the newest OUT rows; IN rows, written and deleted by every run, stay out
DROP INDEX IF EXISTS datastatus_by_modified;
CREATE INDEX IF NOT EXISTS datastatus_out_by_modified ON datastatus(modified) WHERE locktype = 'OUT';
-- utility status counts chunks per job and status from this index alone; it also finds
-- a job's RUNNING chunks, so the narrower index of v2 goes (one b-tree less per claim)
CREATE INDEX IF NOT EXISTS datastatus_by_job_status ON datastatus(jobid, status, dataid)
    WHERE locktype = 'OUT';
DROP INDEX IF EXISTS datastatus_running;
DELETE FROM candidate WHERE EXISTS (
    SELECT 1 FROM datastatus o WHERE o.jobid = candidate.jobid AND o.dataid = candidate.dataid
      AND o.locktype = 'OUT' AND o.status NOT IN ('RESUBMIT', 'FAILED'));
