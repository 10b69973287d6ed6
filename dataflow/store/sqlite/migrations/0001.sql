-- 1: the seed's tables (dataset, job, datastatus) and candidate, our index of work:
-- (job, dataid) pairs whose inputs were all READY when last touched, kept current by
-- triggers for every write (their sort key through our function dataflow_natkey)
-- Frozen: never edit a migration once released; a change is a new file.

CREATE TABLE IF NOT EXISTS dataset(
    datasetid     TEXT NOT NULL PRIMARY KEY,
    hostname      TEXT,
    database      TEXT,
    schemaname    TEXT,
    tablename     TEXT,
    username      TEXT,
    encryptedpass TEXT
);
CREATE TABLE IF NOT EXISTS job(
    jobid     TEXT NOT NULL,
    itemtype  TEXT NOT NULL,
    datasetid TEXT,
    itemvalue TEXT,
    modified  TEXT DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now', 'localtime'))
);
CREATE INDEX IF NOT EXISTS job_by_jobid ON job(jobid, itemtype);
CREATE INDEX IF NOT EXISTS job_by_dataset ON job(datasetid, itemtype);
-- a dataset is listed once per job, as IN or as OUT, never both
CREATE UNIQUE INDEX IF NOT EXISTS job_dataset_once ON job(jobid, datasetid)
    WHERE itemtype IN ('IN', 'OUT');
CREATE TABLE IF NOT EXISTS datastatus(
    datasetid TEXT NOT NULL,
    jobid     TEXT NOT NULL,
    dataid    TEXT NOT NULL,
    locktype  TEXT,
    status    TEXT,
    modified  TEXT DEFAULT (strftime('%Y-%m-%d %H:%M:%f', 'now', 'localtime')),
    PRIMARY KEY (datasetid, jobid, dataid)
);
CREATE INDEX IF NOT EXISTS datastatus_by_chunk ON datastatus(datasetid, dataid);
CREATE INDEX IF NOT EXISTS datastatus_by_job ON datastatus(jobid, dataid);
CREATE INDEX IF NOT EXISTS datastatus_by_modified ON datastatus(modified);
CREATE TABLE IF NOT EXISTS candidate(
    jobid   TEXT NOT NULL,
    sortkey TEXT NOT NULL,
    dataid  TEXT NOT NULL,
    PRIMARY KEY (jobid, sortkey, dataid)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS candidate_on_insert AFTER INSERT ON datastatus
WHEN NEW.locktype = 'OUT' BEGIN 
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
CREATE TRIGGER IF NOT EXISTS candidate_on_update AFTER UPDATE ON datastatus
WHEN NEW.locktype = 'OUT' BEGIN 
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
CREATE TRIGGER IF NOT EXISTS candidate_on_delete AFTER DELETE ON datastatus
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
CREATE TRIGGER IF NOT EXISTS candidate_on_job_insert AFTER INSERT ON job
BEGIN 
    INSERT OR IGNORE INTO candidate(jobid, sortkey, dataid)
    SELECT NEW.jobid, dataflow_natkey(s.dataid), s.dataid FROM datastatus s
    WHERE s.datasetid = (SELECT datasetid FROM job WHERE jobid = NEW.jobid AND itemtype = 'IN' ORDER BY datasetid LIMIT 1) AND s.locktype = 'OUT' AND s.status = 'READY'
      AND NOT EXISTS (SELECT 1 FROM job t WHERE t.jobid = NEW.jobid
                      AND t.itemtype = 'IN' AND t.datasetid = 'today')
      AND NOT EXISTS (SELECT 1 FROM job i WHERE i.jobid = NEW.jobid AND i.itemtype = 'IN'
                      AND NOT EXISTS (SELECT 1 FROM datastatus r
                                      WHERE r.datasetid = i.datasetid AND r.dataid = s.dataid
                                        AND r.locktype = 'OUT' AND r.status = 'READY'))
      AND NOT EXISTS (SELECT 1 FROM datastatus o WHERE o.jobid = NEW.jobid
                      AND o.dataid = s.dataid AND o.locktype = 'OUT'
                      AND o.status NOT IN ('RESUBMIT', 'FAILED')); END;
CREATE TRIGGER IF NOT EXISTS candidate_on_job_update AFTER UPDATE ON job
BEGIN 
    INSERT OR IGNORE INTO candidate(jobid, sortkey, dataid)
    SELECT NEW.jobid, dataflow_natkey(s.dataid), s.dataid FROM datastatus s
    WHERE s.datasetid = (SELECT datasetid FROM job WHERE jobid = NEW.jobid AND itemtype = 'IN' ORDER BY datasetid LIMIT 1) AND s.locktype = 'OUT' AND s.status = 'READY'
      AND NOT EXISTS (SELECT 1 FROM job t WHERE t.jobid = NEW.jobid
                      AND t.itemtype = 'IN' AND t.datasetid = 'today')
      AND NOT EXISTS (SELECT 1 FROM job i WHERE i.jobid = NEW.jobid AND i.itemtype = 'IN'
                      AND NOT EXISTS (SELECT 1 FROM datastatus r
                                      WHERE r.datasetid = i.datasetid AND r.dataid = s.dataid
                                        AND r.locktype = 'OUT' AND r.status = 'READY'))
      AND NOT EXISTS (SELECT 1 FROM datastatus o WHERE o.jobid = NEW.jobid
                      AND o.dataid = s.dataid AND o.locktype = 'OUT'
                      AND o.status NOT IN ('RESUBMIT', 'FAILED')); 
    INSERT OR IGNORE INTO candidate(jobid, sortkey, dataid)
    SELECT OLD.jobid, dataflow_natkey(s.dataid), s.dataid FROM datastatus s
    WHERE s.datasetid = (SELECT datasetid FROM job WHERE jobid = OLD.jobid AND itemtype = 'IN' ORDER BY datasetid LIMIT 1) AND s.locktype = 'OUT' AND s.status = 'READY'
      AND NOT EXISTS (SELECT 1 FROM job t WHERE t.jobid = OLD.jobid
                      AND t.itemtype = 'IN' AND t.datasetid = 'today')
      AND NOT EXISTS (SELECT 1 FROM job i WHERE i.jobid = OLD.jobid AND i.itemtype = 'IN'
                      AND NOT EXISTS (SELECT 1 FROM datastatus r
                                      WHERE r.datasetid = i.datasetid AND r.dataid = s.dataid
                                        AND r.locktype = 'OUT' AND r.status = 'READY'))
      AND NOT EXISTS (SELECT 1 FROM datastatus o WHERE o.jobid = OLD.jobid
                      AND o.dataid = s.dataid AND o.locktype = 'OUT'
                      AND o.status NOT IN ('RESUBMIT', 'FAILED')); END;
CREATE TRIGGER IF NOT EXISTS candidate_on_job_delete AFTER DELETE ON job
BEGIN 
    INSERT OR IGNORE INTO candidate(jobid, sortkey, dataid)
    SELECT OLD.jobid, dataflow_natkey(s.dataid), s.dataid FROM datastatus s
    WHERE s.datasetid = (SELECT datasetid FROM job WHERE jobid = OLD.jobid AND itemtype = 'IN' ORDER BY datasetid LIMIT 1) AND s.locktype = 'OUT' AND s.status = 'READY'
      AND NOT EXISTS (SELECT 1 FROM job t WHERE t.jobid = OLD.jobid
                      AND t.itemtype = 'IN' AND t.datasetid = 'today')
      AND NOT EXISTS (SELECT 1 FROM job i WHERE i.jobid = OLD.jobid AND i.itemtype = 'IN'
                      AND NOT EXISTS (SELECT 1 FROM datastatus r
                                      WHERE r.datasetid = i.datasetid AND r.dataid = s.dataid
                                        AND r.locktype = 'OUT' AND r.status = 'READY'))
      AND NOT EXISTS (SELECT 1 FROM datastatus o WHERE o.jobid = OLD.jobid
                      AND o.dataid = s.dataid AND o.locktype = 'OUT'
                      AND o.status NOT IN ('RESUBMIT', 'FAILED')); END;
