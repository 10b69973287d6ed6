-- 6: a run asked to end in RESUBMIT (a cascade reached it while it ran)
-- Frozen: never edit a migration once released; a change is a new file.

ALTER TABLE run ADD COLUMN rerun TEXT;  -- NULL, or why a rerun was asked of this run
