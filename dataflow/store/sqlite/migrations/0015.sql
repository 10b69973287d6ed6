-- 15: /metrics counts each ended run once (dataflow.serve.runhistory) and needs to know
-- when a run it counted is gone, without counting the whole history at each scrape
-- (what grew with it: ~20 ms a million runs). run_mark holds the runid below which a
-- server has counted the runs (below: raised by each server as it settles more, never
-- lowered), and how many runs below it were deleted or inserted since (changes): a
-- scrape that finds changes counts every run again. SQLite numbers a new run one above
-- the highest there is, so once the newest runs are deleted (a claim given back) a number
-- below the mark may come back: such an insert is counted too. A claim's number is above
-- the mark otherwise, and SQLite's writers take turns: none is under way while a server
-- settles runs.
-- Frozen: never edit a migration once released; a change is a new file.

CREATE TABLE IF NOT EXISTS run_mark(
    below   INTEGER NOT NULL,
    changes INTEGER NOT NULL
);
INSERT INTO run_mark(below, changes)
SELECT -9223372036854775808, 0 WHERE NOT EXISTS (SELECT 1 FROM run_mark);
CREATE TRIGGER IF NOT EXISTS run_mark_on_delete AFTER DELETE ON run
WHEN OLD.runid < (SELECT MAX(below) FROM run_mark)
BEGIN
    UPDATE run_mark SET changes = changes + 1;
END;
CREATE TRIGGER IF NOT EXISTS run_mark_on_insert AFTER INSERT ON run
WHEN NEW.runid < (SELECT MAX(below) FROM run_mark)
BEGIN
    UPDATE run_mark SET changes = changes + 1;
END;
