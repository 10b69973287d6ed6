-- 9: candidate is a queue: every claim deletes the row it takes, from the front of the
-- index a claim reads. Autovacuum's default waits until a fifth of the table is dead, so
-- in a drain of a large backlog each claim stepped over the dead entries of the claims
-- before it (after 20,000 claims: 102 index pages read a claim instead of 4, benchmarks/
-- findings.md 34). Vacuum it after a fixed number of dead rows instead, at any size.
-- Frozen: never edit a migration once released; a change is a new file.

ALTER TABLE candidate SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);
