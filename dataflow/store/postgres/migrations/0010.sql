-- 10: /metrics counts each ended run once (dataflow.serve.runhistory) and needs to know
-- when a run it counted is gone, without counting the whole history at each scrape
-- (what grew with it: ~100 ms a million runs). run_mark holds the runid below which a
-- server has counted the runs (below: raised by each server as it settles more, never
-- lowered), and how many runs below it were deleted since (changes): a
-- scrape that finds changes counts every run again. A claim's insert fires nothing here:
-- a server settles runs while it holds the table against writers for a moment (SHARE),
-- so that no claim numbered below its mark commits after it.
-- Frozen: never edit a migration once released; a change is a new file.

CREATE TABLE IF NOT EXISTS run_mark(
    below   bigint NOT NULL,
    changes bigint NOT NULL
);
INSERT INTO run_mark(below, changes)
SELECT -9223372036854775808, 0 WHERE NOT EXISTS (SELECT 1 FROM run_mark);

CREATE OR REPLACE FUNCTION dataflow_run_mark() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE run_mark SET changes = changes + 1
    WHERE EXISTS (SELECT 1 FROM gone WHERE gone.runid < run_mark.below);
    RETURN NULL;
END $$;
DROP TRIGGER IF EXISTS run_mark_on_delete ON run;
CREATE TRIGGER run_mark_on_delete AFTER DELETE ON run
    REFERENCING OLD TABLE AS gone
    FOR EACH STATEMENT EXECUTE FUNCTION dataflow_run_mark();
