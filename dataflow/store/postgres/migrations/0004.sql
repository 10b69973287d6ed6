-- 4: a row that gates a claim is never NULL where a claim reads it, as SQLite's migration
-- 9 makes it there: a writer's `update datastatus set status = NULL` would leave a chunk
-- neither produced nor claimable. NOT VALID: the rows a store holds already are not
-- checked (a store upgraded with such a row still opens); every row written from now on is.
-- Frozen: never edit a migration once released; a change is a new file.

DO $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'datastatus_gating_not_null') THEN
        ALTER TABLE datastatus ADD CONSTRAINT datastatus_gating_not_null
            CHECK (status IS NOT NULL AND locktype IS NOT NULL) NOT VALID;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'job_dataset_not_null') THEN
        ALTER TABLE job ADD CONSTRAINT job_dataset_not_null
            CHECK (itemtype NOT IN ('IN', 'OUT') OR datasetid IS NOT NULL) NOT VALID;
    END IF;
END
$$;
