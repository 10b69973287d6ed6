-- 9: a row that gates a claim is never NULL where a claim reads it. SQLite evaluates
-- what PostgreSQL refuses (1/0, an overflow) to NULL, and its columns have no types: a
-- writer's `update datastatus set status = 1/0` would null every status, and a chunk
-- with no status is neither produced nor claimable. Refused here as on PostgreSQL.
-- Frozen: never edit a migration once released; a change is a new file.

CREATE TRIGGER IF NOT EXISTS datastatus_not_null_on_insert BEFORE INSERT ON datastatus
WHEN NEW.status IS NULL OR NEW.locktype IS NULL BEGIN
    SELECT RAISE(ABORT, 'datastatus.status and datastatus.locktype may not be NULL');
END;
CREATE TRIGGER IF NOT EXISTS datastatus_not_null_on_update BEFORE UPDATE ON datastatus
WHEN NEW.status IS NULL OR NEW.locktype IS NULL BEGIN
    SELECT RAISE(ABORT, 'datastatus.status and datastatus.locktype may not be NULL');
END;
CREATE TRIGGER IF NOT EXISTS job_dataset_not_null_on_insert BEFORE INSERT ON job
WHEN NEW.itemtype IN ('IN', 'OUT') AND NEW.datasetid IS NULL BEGIN
    SELECT RAISE(ABORT, 'job.datasetid of an IN or OUT row may not be NULL');
END;
CREATE TRIGGER IF NOT EXISTS job_dataset_not_null_on_update BEFORE UPDATE ON job
WHEN NEW.itemtype IN ('IN', 'OUT') AND NEW.datasetid IS NULL BEGIN
    SELECT RAISE(ABORT, 'job.datasetid of an IN or OUT row may not be NULL');
END;
