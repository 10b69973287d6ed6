-- 3: a run's lease: its token (unique forever), its heartbeat (seen, renewed by its
-- keeper) and how long the heartbeat holds (lease): another host may take the chunk only
-- once it is older
-- Frozen: never edit a migration once released; a change is a new file.

ALTER TABLE run ADD COLUMN IF NOT EXISTS token text;
ALTER TABLE run ADD COLUMN IF NOT EXISTS seen timestamptz;
ALTER TABLE run ADD COLUMN IF NOT EXISTS lease double precision;
