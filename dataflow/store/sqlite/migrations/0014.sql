-- 14: the rule's triggers of migration 7 again, each offer now skipping a pair offered
-- already by its own upsert clause (ON CONFLICT DO NOTHING) instead of INSERT OR IGNORE:
-- SQLite lets the conflict clause of the statement that fired a trigger override the
-- trigger's OR IGNORE, so a user's upsert of a datastatus row (INSERT ... ON CONFLICT DO
-- UPDATE, in the sqlite3 shell or our own put_out_status) that offered a pair offered
-- already failed on candidate's key. Written by `python -m dataflow.store.offers sqlite`.
-- Frozen: never edit a migration once released; a change is a new file.

DROP TRIGGER IF EXISTS candidate_on_insert;
DROP TRIGGER IF EXISTS candidate_on_update;
DROP TRIGGER IF EXISTS candidate_on_delete;
DROP TRIGGER IF EXISTS candidate_on_job_insert;
DROP TRIGGER IF EXISTS candidate_on_job_update;
DROP TRIGGER IF EXISTS candidate_on_job_delete;
CREATE TRIGGER candidate_on_insert AFTER INSERT ON datastatus
WHEN NEW.locktype = 'OUT' BEGIN 
    DELETE FROM candidate WHERE NEW.status NOT IN ('RESUBMIT', 'FAILED')
      AND jobid = NEW.jobid AND sortkey = (CASE WHEN (NEW.dataid <> '' AND NEW.dataid NOT GLOB '*[^0-9]*') THEN char(1) || printf('%03d', length((CASE WHEN ltrim(NEW.dataid, '0') = '' THEN '0' ELSE ltrim(NEW.dataid, '0') END))) || (CASE WHEN ltrim(NEW.dataid, '0') = '' THEN '0' ELSE ltrim(NEW.dataid, '0') END) WHEN (NEW.dataid GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]') THEN char(1) || printf('%03d', length((CASE WHEN ltrim(substr(NEW.dataid, 1, 4), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 1, 4), '0') END))) || (CASE WHEN ltrim(substr(NEW.dataid, 1, 4), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 1, 4), '0') END) || '-' || char(1) || printf('%03d', length((CASE WHEN ltrim(substr(NEW.dataid, 6, 2), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 6, 2), '0') END))) || (CASE WHEN ltrim(substr(NEW.dataid, 6, 2), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 6, 2), '0') END) || '-' || char(1) || printf('%03d', length((CASE WHEN ltrim(substr(NEW.dataid, 9, 2), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 9, 2), '0') END))) || (CASE WHEN ltrim(substr(NEW.dataid, 9, 2), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 9, 2), '0') END) ELSE '' END)
      AND dataid = NEW.dataid; 
    INSERT INTO candidate(jobid, sortkey, dataid)
    SELECT DISTINCT c.jobid, (CASE WHEN (NEW.dataid <> '' AND NEW.dataid NOT GLOB '*[^0-9]*') THEN char(1) || printf('%03d', length((CASE WHEN ltrim(NEW.dataid, '0') = '' THEN '0' ELSE ltrim(NEW.dataid, '0') END))) || (CASE WHEN ltrim(NEW.dataid, '0') = '' THEN '0' ELSE ltrim(NEW.dataid, '0') END) WHEN (NEW.dataid GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]') THEN char(1) || printf('%03d', length((CASE WHEN ltrim(substr(NEW.dataid, 1, 4), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 1, 4), '0') END))) || (CASE WHEN ltrim(substr(NEW.dataid, 1, 4), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 1, 4), '0') END) || '-' || char(1) || printf('%03d', length((CASE WHEN ltrim(substr(NEW.dataid, 6, 2), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 6, 2), '0') END))) || (CASE WHEN ltrim(substr(NEW.dataid, 6, 2), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 6, 2), '0') END) || '-' || char(1) || printf('%03d', length((CASE WHEN ltrim(substr(NEW.dataid, 9, 2), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 9, 2), '0') END))) || (CASE WHEN ltrim(substr(NEW.dataid, 9, 2), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 9, 2), '0') END) ELSE '' END), NEW.dataid FROM job c
    WHERE NEW.status = 'READY' AND c.itemtype = 'IN' AND c.datasetid = NEW.datasetid
      AND NOT EXISTS (SELECT 1 FROM job t WHERE t.jobid = c.jobid
                      AND t.itemtype = 'IN' AND t.datasetid = 'today')
      AND NOT EXISTS (SELECT 1 FROM job i WHERE i.jobid = c.jobid AND i.itemtype = 'IN'
                      AND NOT EXISTS (SELECT 1 FROM datastatus r
                                      WHERE r.datasetid = i.datasetid AND r.dataid = NEW.dataid
                                        AND r.locktype = 'OUT' AND r.status = 'READY'))
      AND NOT EXISTS (SELECT 1 FROM datastatus o WHERE o.jobid = c.jobid
                      AND o.dataid = NEW.dataid AND o.locktype = 'OUT'
                      AND o.status NOT IN ('RESUBMIT', 'FAILED'))
    ON CONFLICT DO NOTHING;
    INSERT INTO candidate(jobid, sortkey, dataid)
    SELECT DISTINCT c.jobid, (CASE WHEN (NEW.dataid <> '' AND NEW.dataid NOT GLOB '*[^0-9]*') THEN char(1) || printf('%03d', length((CASE WHEN ltrim(NEW.dataid, '0') = '' THEN '0' ELSE ltrim(NEW.dataid, '0') END))) || (CASE WHEN ltrim(NEW.dataid, '0') = '' THEN '0' ELSE ltrim(NEW.dataid, '0') END) WHEN (NEW.dataid GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]') THEN char(1) || printf('%03d', length((CASE WHEN ltrim(substr(NEW.dataid, 1, 4), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 1, 4), '0') END))) || (CASE WHEN ltrim(substr(NEW.dataid, 1, 4), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 1, 4), '0') END) || '-' || char(1) || printf('%03d', length((CASE WHEN ltrim(substr(NEW.dataid, 6, 2), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 6, 2), '0') END))) || (CASE WHEN ltrim(substr(NEW.dataid, 6, 2), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 6, 2), '0') END) || '-' || char(1) || printf('%03d', length((CASE WHEN ltrim(substr(NEW.dataid, 9, 2), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 9, 2), '0') END))) || (CASE WHEN ltrim(substr(NEW.dataid, 9, 2), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 9, 2), '0') END) ELSE '' END), NEW.dataid FROM job c
    WHERE NEW.status IN ('RESUBMIT', 'FAILED') AND c.jobid = NEW.jobid
      AND NOT EXISTS (SELECT 1 FROM job t WHERE t.jobid = c.jobid
                      AND t.itemtype = 'IN' AND t.datasetid = 'today')
      AND NOT EXISTS (SELECT 1 FROM job i WHERE i.jobid = c.jobid AND i.itemtype = 'IN'
                      AND NOT EXISTS (SELECT 1 FROM datastatus r
                                      WHERE r.datasetid = i.datasetid AND r.dataid = NEW.dataid
                                        AND r.locktype = 'OUT' AND r.status = 'READY'))
      AND NOT EXISTS (SELECT 1 FROM datastatus o WHERE o.jobid = c.jobid
                      AND o.dataid = NEW.dataid AND o.locktype = 'OUT'
                      AND o.status NOT IN ('RESUBMIT', 'FAILED'))
    ON CONFLICT DO NOTHING; END;
CREATE TRIGGER candidate_on_update AFTER UPDATE ON datastatus
WHEN NEW.locktype = 'OUT' BEGIN 
    DELETE FROM candidate WHERE NEW.status NOT IN ('RESUBMIT', 'FAILED')
      AND jobid = NEW.jobid AND sortkey = (CASE WHEN (NEW.dataid <> '' AND NEW.dataid NOT GLOB '*[^0-9]*') THEN char(1) || printf('%03d', length((CASE WHEN ltrim(NEW.dataid, '0') = '' THEN '0' ELSE ltrim(NEW.dataid, '0') END))) || (CASE WHEN ltrim(NEW.dataid, '0') = '' THEN '0' ELSE ltrim(NEW.dataid, '0') END) WHEN (NEW.dataid GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]') THEN char(1) || printf('%03d', length((CASE WHEN ltrim(substr(NEW.dataid, 1, 4), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 1, 4), '0') END))) || (CASE WHEN ltrim(substr(NEW.dataid, 1, 4), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 1, 4), '0') END) || '-' || char(1) || printf('%03d', length((CASE WHEN ltrim(substr(NEW.dataid, 6, 2), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 6, 2), '0') END))) || (CASE WHEN ltrim(substr(NEW.dataid, 6, 2), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 6, 2), '0') END) || '-' || char(1) || printf('%03d', length((CASE WHEN ltrim(substr(NEW.dataid, 9, 2), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 9, 2), '0') END))) || (CASE WHEN ltrim(substr(NEW.dataid, 9, 2), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 9, 2), '0') END) ELSE '' END)
      AND dataid = NEW.dataid; 
    INSERT INTO candidate(jobid, sortkey, dataid)
    SELECT DISTINCT c.jobid, (CASE WHEN (NEW.dataid <> '' AND NEW.dataid NOT GLOB '*[^0-9]*') THEN char(1) || printf('%03d', length((CASE WHEN ltrim(NEW.dataid, '0') = '' THEN '0' ELSE ltrim(NEW.dataid, '0') END))) || (CASE WHEN ltrim(NEW.dataid, '0') = '' THEN '0' ELSE ltrim(NEW.dataid, '0') END) WHEN (NEW.dataid GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]') THEN char(1) || printf('%03d', length((CASE WHEN ltrim(substr(NEW.dataid, 1, 4), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 1, 4), '0') END))) || (CASE WHEN ltrim(substr(NEW.dataid, 1, 4), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 1, 4), '0') END) || '-' || char(1) || printf('%03d', length((CASE WHEN ltrim(substr(NEW.dataid, 6, 2), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 6, 2), '0') END))) || (CASE WHEN ltrim(substr(NEW.dataid, 6, 2), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 6, 2), '0') END) || '-' || char(1) || printf('%03d', length((CASE WHEN ltrim(substr(NEW.dataid, 9, 2), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 9, 2), '0') END))) || (CASE WHEN ltrim(substr(NEW.dataid, 9, 2), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 9, 2), '0') END) ELSE '' END), NEW.dataid FROM job c
    WHERE NEW.status = 'READY' AND c.itemtype = 'IN' AND c.datasetid = NEW.datasetid
      AND NOT EXISTS (SELECT 1 FROM job t WHERE t.jobid = c.jobid
                      AND t.itemtype = 'IN' AND t.datasetid = 'today')
      AND NOT EXISTS (SELECT 1 FROM job i WHERE i.jobid = c.jobid AND i.itemtype = 'IN'
                      AND NOT EXISTS (SELECT 1 FROM datastatus r
                                      WHERE r.datasetid = i.datasetid AND r.dataid = NEW.dataid
                                        AND r.locktype = 'OUT' AND r.status = 'READY'))
      AND NOT EXISTS (SELECT 1 FROM datastatus o WHERE o.jobid = c.jobid
                      AND o.dataid = NEW.dataid AND o.locktype = 'OUT'
                      AND o.status NOT IN ('RESUBMIT', 'FAILED'))
    ON CONFLICT DO NOTHING;
    INSERT INTO candidate(jobid, sortkey, dataid)
    SELECT DISTINCT c.jobid, (CASE WHEN (NEW.dataid <> '' AND NEW.dataid NOT GLOB '*[^0-9]*') THEN char(1) || printf('%03d', length((CASE WHEN ltrim(NEW.dataid, '0') = '' THEN '0' ELSE ltrim(NEW.dataid, '0') END))) || (CASE WHEN ltrim(NEW.dataid, '0') = '' THEN '0' ELSE ltrim(NEW.dataid, '0') END) WHEN (NEW.dataid GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]') THEN char(1) || printf('%03d', length((CASE WHEN ltrim(substr(NEW.dataid, 1, 4), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 1, 4), '0') END))) || (CASE WHEN ltrim(substr(NEW.dataid, 1, 4), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 1, 4), '0') END) || '-' || char(1) || printf('%03d', length((CASE WHEN ltrim(substr(NEW.dataid, 6, 2), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 6, 2), '0') END))) || (CASE WHEN ltrim(substr(NEW.dataid, 6, 2), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 6, 2), '0') END) || '-' || char(1) || printf('%03d', length((CASE WHEN ltrim(substr(NEW.dataid, 9, 2), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 9, 2), '0') END))) || (CASE WHEN ltrim(substr(NEW.dataid, 9, 2), '0') = '' THEN '0' ELSE ltrim(substr(NEW.dataid, 9, 2), '0') END) ELSE '' END), NEW.dataid FROM job c
    WHERE NEW.status IN ('RESUBMIT', 'FAILED') AND c.jobid = NEW.jobid
      AND NOT EXISTS (SELECT 1 FROM job t WHERE t.jobid = c.jobid
                      AND t.itemtype = 'IN' AND t.datasetid = 'today')
      AND NOT EXISTS (SELECT 1 FROM job i WHERE i.jobid = c.jobid AND i.itemtype = 'IN'
                      AND NOT EXISTS (SELECT 1 FROM datastatus r
                                      WHERE r.datasetid = i.datasetid AND r.dataid = NEW.dataid
                                        AND r.locktype = 'OUT' AND r.status = 'READY'))
      AND NOT EXISTS (SELECT 1 FROM datastatus o WHERE o.jobid = c.jobid
                      AND o.dataid = NEW.dataid AND o.locktype = 'OUT'
                      AND o.status NOT IN ('RESUBMIT', 'FAILED'))
    ON CONFLICT DO NOTHING; END;
CREATE TRIGGER candidate_on_delete AFTER DELETE ON datastatus
BEGIN 
    INSERT INTO candidate(jobid, sortkey, dataid)
    SELECT DISTINCT c.jobid, (CASE WHEN (OLD.dataid <> '' AND OLD.dataid NOT GLOB '*[^0-9]*') THEN char(1) || printf('%03d', length((CASE WHEN ltrim(OLD.dataid, '0') = '' THEN '0' ELSE ltrim(OLD.dataid, '0') END))) || (CASE WHEN ltrim(OLD.dataid, '0') = '' THEN '0' ELSE ltrim(OLD.dataid, '0') END) WHEN (OLD.dataid GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]') THEN char(1) || printf('%03d', length((CASE WHEN ltrim(substr(OLD.dataid, 1, 4), '0') = '' THEN '0' ELSE ltrim(substr(OLD.dataid, 1, 4), '0') END))) || (CASE WHEN ltrim(substr(OLD.dataid, 1, 4), '0') = '' THEN '0' ELSE ltrim(substr(OLD.dataid, 1, 4), '0') END) || '-' || char(1) || printf('%03d', length((CASE WHEN ltrim(substr(OLD.dataid, 6, 2), '0') = '' THEN '0' ELSE ltrim(substr(OLD.dataid, 6, 2), '0') END))) || (CASE WHEN ltrim(substr(OLD.dataid, 6, 2), '0') = '' THEN '0' ELSE ltrim(substr(OLD.dataid, 6, 2), '0') END) || '-' || char(1) || printf('%03d', length((CASE WHEN ltrim(substr(OLD.dataid, 9, 2), '0') = '' THEN '0' ELSE ltrim(substr(OLD.dataid, 9, 2), '0') END))) || (CASE WHEN ltrim(substr(OLD.dataid, 9, 2), '0') = '' THEN '0' ELSE ltrim(substr(OLD.dataid, 9, 2), '0') END) ELSE '' END), OLD.dataid FROM job c
    WHERE c.jobid = OLD.jobid
      AND NOT EXISTS (SELECT 1 FROM job t WHERE t.jobid = c.jobid
                      AND t.itemtype = 'IN' AND t.datasetid = 'today')
      AND NOT EXISTS (SELECT 1 FROM job i WHERE i.jobid = c.jobid AND i.itemtype = 'IN'
                      AND NOT EXISTS (SELECT 1 FROM datastatus r
                                      WHERE r.datasetid = i.datasetid AND r.dataid = OLD.dataid
                                        AND r.locktype = 'OUT' AND r.status = 'READY'))
      AND NOT EXISTS (SELECT 1 FROM datastatus o WHERE o.jobid = c.jobid
                      AND o.dataid = OLD.dataid AND o.locktype = 'OUT'
                      AND o.status NOT IN ('RESUBMIT', 'FAILED'))
    ON CONFLICT DO NOTHING; END;
CREATE TRIGGER candidate_on_job_insert AFTER INSERT ON job
BEGIN 
    INSERT INTO candidate(jobid, sortkey, dataid)
    SELECT NEW.jobid, (CASE WHEN (s.dataid <> '' AND s.dataid NOT GLOB '*[^0-9]*') THEN char(1) || printf('%03d', length((CASE WHEN ltrim(s.dataid, '0') = '' THEN '0' ELSE ltrim(s.dataid, '0') END))) || (CASE WHEN ltrim(s.dataid, '0') = '' THEN '0' ELSE ltrim(s.dataid, '0') END) WHEN (s.dataid GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]') THEN char(1) || printf('%03d', length((CASE WHEN ltrim(substr(s.dataid, 1, 4), '0') = '' THEN '0' ELSE ltrim(substr(s.dataid, 1, 4), '0') END))) || (CASE WHEN ltrim(substr(s.dataid, 1, 4), '0') = '' THEN '0' ELSE ltrim(substr(s.dataid, 1, 4), '0') END) || '-' || char(1) || printf('%03d', length((CASE WHEN ltrim(substr(s.dataid, 6, 2), '0') = '' THEN '0' ELSE ltrim(substr(s.dataid, 6, 2), '0') END))) || (CASE WHEN ltrim(substr(s.dataid, 6, 2), '0') = '' THEN '0' ELSE ltrim(substr(s.dataid, 6, 2), '0') END) || '-' || char(1) || printf('%03d', length((CASE WHEN ltrim(substr(s.dataid, 9, 2), '0') = '' THEN '0' ELSE ltrim(substr(s.dataid, 9, 2), '0') END))) || (CASE WHEN ltrim(substr(s.dataid, 9, 2), '0') = '' THEN '0' ELSE ltrim(substr(s.dataid, 9, 2), '0') END) ELSE '' END), s.dataid FROM datastatus s
    WHERE s.datasetid = (SELECT datasetid FROM job WHERE jobid = NEW.jobid AND itemtype = 'IN' ORDER BY datasetid LIMIT 1) AND s.locktype = 'OUT' AND s.status = 'READY'
      AND NOT EXISTS (SELECT 1 FROM job t WHERE t.jobid = NEW.jobid
                      AND t.itemtype = 'IN' AND t.datasetid = 'today')
      AND NOT EXISTS (SELECT 1 FROM job i WHERE i.jobid = NEW.jobid AND i.itemtype = 'IN'
                      AND NOT EXISTS (SELECT 1 FROM datastatus r
                                      WHERE r.datasetid = i.datasetid AND r.dataid = s.dataid
                                        AND r.locktype = 'OUT' AND r.status = 'READY'))
      AND NOT EXISTS (SELECT 1 FROM datastatus o WHERE o.jobid = NEW.jobid
                      AND o.dataid = s.dataid AND o.locktype = 'OUT'
                      AND o.status NOT IN ('RESUBMIT', 'FAILED'))
    ON CONFLICT DO NOTHING; END;
CREATE TRIGGER candidate_on_job_update AFTER UPDATE ON job
BEGIN 
    INSERT INTO candidate(jobid, sortkey, dataid)
    SELECT NEW.jobid, (CASE WHEN (s.dataid <> '' AND s.dataid NOT GLOB '*[^0-9]*') THEN char(1) || printf('%03d', length((CASE WHEN ltrim(s.dataid, '0') = '' THEN '0' ELSE ltrim(s.dataid, '0') END))) || (CASE WHEN ltrim(s.dataid, '0') = '' THEN '0' ELSE ltrim(s.dataid, '0') END) WHEN (s.dataid GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]') THEN char(1) || printf('%03d', length((CASE WHEN ltrim(substr(s.dataid, 1, 4), '0') = '' THEN '0' ELSE ltrim(substr(s.dataid, 1, 4), '0') END))) || (CASE WHEN ltrim(substr(s.dataid, 1, 4), '0') = '' THEN '0' ELSE ltrim(substr(s.dataid, 1, 4), '0') END) || '-' || char(1) || printf('%03d', length((CASE WHEN ltrim(substr(s.dataid, 6, 2), '0') = '' THEN '0' ELSE ltrim(substr(s.dataid, 6, 2), '0') END))) || (CASE WHEN ltrim(substr(s.dataid, 6, 2), '0') = '' THEN '0' ELSE ltrim(substr(s.dataid, 6, 2), '0') END) || '-' || char(1) || printf('%03d', length((CASE WHEN ltrim(substr(s.dataid, 9, 2), '0') = '' THEN '0' ELSE ltrim(substr(s.dataid, 9, 2), '0') END))) || (CASE WHEN ltrim(substr(s.dataid, 9, 2), '0') = '' THEN '0' ELSE ltrim(substr(s.dataid, 9, 2), '0') END) ELSE '' END), s.dataid FROM datastatus s
    WHERE s.datasetid = (SELECT datasetid FROM job WHERE jobid = NEW.jobid AND itemtype = 'IN' ORDER BY datasetid LIMIT 1) AND s.locktype = 'OUT' AND s.status = 'READY'
      AND NOT EXISTS (SELECT 1 FROM job t WHERE t.jobid = NEW.jobid
                      AND t.itemtype = 'IN' AND t.datasetid = 'today')
      AND NOT EXISTS (SELECT 1 FROM job i WHERE i.jobid = NEW.jobid AND i.itemtype = 'IN'
                      AND NOT EXISTS (SELECT 1 FROM datastatus r
                                      WHERE r.datasetid = i.datasetid AND r.dataid = s.dataid
                                        AND r.locktype = 'OUT' AND r.status = 'READY'))
      AND NOT EXISTS (SELECT 1 FROM datastatus o WHERE o.jobid = NEW.jobid
                      AND o.dataid = s.dataid AND o.locktype = 'OUT'
                      AND o.status NOT IN ('RESUBMIT', 'FAILED'))
    ON CONFLICT DO NOTHING; 
    INSERT INTO candidate(jobid, sortkey, dataid)
    SELECT OLD.jobid, (CASE WHEN (s.dataid <> '' AND s.dataid NOT GLOB '*[^0-9]*') THEN char(1) || printf('%03d', length((CASE WHEN ltrim(s.dataid, '0') = '' THEN '0' ELSE ltrim(s.dataid, '0') END))) || (CASE WHEN ltrim(s.dataid, '0') = '' THEN '0' ELSE ltrim(s.dataid, '0') END) WHEN (s.dataid GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]') THEN char(1) || printf('%03d', length((CASE WHEN ltrim(substr(s.dataid, 1, 4), '0') = '' THEN '0' ELSE ltrim(substr(s.dataid, 1, 4), '0') END))) || (CASE WHEN ltrim(substr(s.dataid, 1, 4), '0') = '' THEN '0' ELSE ltrim(substr(s.dataid, 1, 4), '0') END) || '-' || char(1) || printf('%03d', length((CASE WHEN ltrim(substr(s.dataid, 6, 2), '0') = '' THEN '0' ELSE ltrim(substr(s.dataid, 6, 2), '0') END))) || (CASE WHEN ltrim(substr(s.dataid, 6, 2), '0') = '' THEN '0' ELSE ltrim(substr(s.dataid, 6, 2), '0') END) || '-' || char(1) || printf('%03d', length((CASE WHEN ltrim(substr(s.dataid, 9, 2), '0') = '' THEN '0' ELSE ltrim(substr(s.dataid, 9, 2), '0') END))) || (CASE WHEN ltrim(substr(s.dataid, 9, 2), '0') = '' THEN '0' ELSE ltrim(substr(s.dataid, 9, 2), '0') END) ELSE '' END), s.dataid FROM datastatus s
    WHERE s.datasetid = (SELECT datasetid FROM job WHERE jobid = OLD.jobid AND itemtype = 'IN' ORDER BY datasetid LIMIT 1) AND s.locktype = 'OUT' AND s.status = 'READY'
      AND NOT EXISTS (SELECT 1 FROM job t WHERE t.jobid = OLD.jobid
                      AND t.itemtype = 'IN' AND t.datasetid = 'today')
      AND NOT EXISTS (SELECT 1 FROM job i WHERE i.jobid = OLD.jobid AND i.itemtype = 'IN'
                      AND NOT EXISTS (SELECT 1 FROM datastatus r
                                      WHERE r.datasetid = i.datasetid AND r.dataid = s.dataid
                                        AND r.locktype = 'OUT' AND r.status = 'READY'))
      AND NOT EXISTS (SELECT 1 FROM datastatus o WHERE o.jobid = OLD.jobid
                      AND o.dataid = s.dataid AND o.locktype = 'OUT'
                      AND o.status NOT IN ('RESUBMIT', 'FAILED'))
    ON CONFLICT DO NOTHING; END;
CREATE TRIGGER candidate_on_job_delete AFTER DELETE ON job
BEGIN 
    INSERT INTO candidate(jobid, sortkey, dataid)
    SELECT OLD.jobid, (CASE WHEN (s.dataid <> '' AND s.dataid NOT GLOB '*[^0-9]*') THEN char(1) || printf('%03d', length((CASE WHEN ltrim(s.dataid, '0') = '' THEN '0' ELSE ltrim(s.dataid, '0') END))) || (CASE WHEN ltrim(s.dataid, '0') = '' THEN '0' ELSE ltrim(s.dataid, '0') END) WHEN (s.dataid GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]') THEN char(1) || printf('%03d', length((CASE WHEN ltrim(substr(s.dataid, 1, 4), '0') = '' THEN '0' ELSE ltrim(substr(s.dataid, 1, 4), '0') END))) || (CASE WHEN ltrim(substr(s.dataid, 1, 4), '0') = '' THEN '0' ELSE ltrim(substr(s.dataid, 1, 4), '0') END) || '-' || char(1) || printf('%03d', length((CASE WHEN ltrim(substr(s.dataid, 6, 2), '0') = '' THEN '0' ELSE ltrim(substr(s.dataid, 6, 2), '0') END))) || (CASE WHEN ltrim(substr(s.dataid, 6, 2), '0') = '' THEN '0' ELSE ltrim(substr(s.dataid, 6, 2), '0') END) || '-' || char(1) || printf('%03d', length((CASE WHEN ltrim(substr(s.dataid, 9, 2), '0') = '' THEN '0' ELSE ltrim(substr(s.dataid, 9, 2), '0') END))) || (CASE WHEN ltrim(substr(s.dataid, 9, 2), '0') = '' THEN '0' ELSE ltrim(substr(s.dataid, 9, 2), '0') END) ELSE '' END), s.dataid FROM datastatus s
    WHERE s.datasetid = (SELECT datasetid FROM job WHERE jobid = OLD.jobid AND itemtype = 'IN' ORDER BY datasetid LIMIT 1) AND s.locktype = 'OUT' AND s.status = 'READY'
      AND NOT EXISTS (SELECT 1 FROM job t WHERE t.jobid = OLD.jobid
                      AND t.itemtype = 'IN' AND t.datasetid = 'today')
      AND NOT EXISTS (SELECT 1 FROM job i WHERE i.jobid = OLD.jobid AND i.itemtype = 'IN'
                      AND NOT EXISTS (SELECT 1 FROM datastatus r
                                      WHERE r.datasetid = i.datasetid AND r.dataid = s.dataid
                                        AND r.locktype = 'OUT' AND r.status = 'READY'))
      AND NOT EXISTS (SELECT 1 FROM datastatus o WHERE o.jobid = OLD.jobid
                      AND o.dataid = s.dataid AND o.locktype = 'OUT'
                      AND o.status NOT IN ('RESUBMIT', 'FAILED'))
    ON CONFLICT DO NOTHING; END;
