-- 8: a run's token (DATAFLOW_RUN), unique forever: a run number may come back after
-- its row is deleted
-- Frozen: never edit a migration once released; a change is a new file.

ALTER TABLE run ADD COLUMN token TEXT;
