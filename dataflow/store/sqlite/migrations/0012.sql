-- 12: the board reads only the dataids it shows. A job's OUT rows in natural order of
-- dataid, newest last: the board reads the newest N of each job from the end of this
-- index instead of every row of the store. The key is candidate's (version 7): exact for
-- a shard number or an ISO date, '' for any other dataid (the board reads those apart).
-- Frozen: never edit a migration once released; a change is a new file.

CREATE INDEX IF NOT EXISTS datastatus_by_natkey ON datastatus(jobid, (CASE WHEN (dataid <> '' AND dataid NOT GLOB '*[^0-9]*') THEN char(1) || printf('%03d', length((CASE WHEN ltrim(dataid, '0') = '' THEN '0' ELSE ltrim(dataid, '0') END))) || (CASE WHEN ltrim(dataid, '0') = '' THEN '0' ELSE ltrim(dataid, '0') END) WHEN (dataid GLOB '[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]') THEN char(1) || printf('%03d', length((CASE WHEN ltrim(substr(dataid, 1, 4), '0') = '' THEN '0' ELSE ltrim(substr(dataid, 1, 4), '0') END))) || (CASE WHEN ltrim(substr(dataid, 1, 4), '0') = '' THEN '0' ELSE ltrim(substr(dataid, 1, 4), '0') END) || '-' || char(1) || printf('%03d', length((CASE WHEN ltrim(substr(dataid, 6, 2), '0') = '' THEN '0' ELSE ltrim(substr(dataid, 6, 2), '0') END))) || (CASE WHEN ltrim(substr(dataid, 6, 2), '0') = '' THEN '0' ELSE ltrim(substr(dataid, 6, 2), '0') END) || '-' || char(1) || printf('%03d', length((CASE WHEN ltrim(substr(dataid, 9, 2), '0') = '' THEN '0' ELSE ltrim(substr(dataid, 9, 2), '0') END))) || (CASE WHEN ltrim(substr(dataid, 9, 2), '0') = '' THEN '0' ELSE ltrim(substr(dataid, 9, 2), '0') END) ELSE '' END), dataid)
    WHERE locktype = 'OUT';
