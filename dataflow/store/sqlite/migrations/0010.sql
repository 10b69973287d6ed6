-- 10: deploys of a project (utility apply records one, utility deploys lists them): when
-- (this host's clock, with its UTC offset, as the run history's times), by which host,
-- the project folder, the project file's sha256, the git commit (NULL: not a checkout)
-- and a one-line summary of what changed
-- Frozen: never edit a migration once released; a change is a new file.

CREATE TABLE IF NOT EXISTS deploy(
    deployid INTEGER PRIMARY KEY,
    deployed TEXT NOT NULL,
    host     TEXT NOT NULL,
    project  TEXT NOT NULL,
    digest   TEXT NOT NULL,
    revision TEXT,             -- NULL: the project folder is not a git checkout
    changes  TEXT NOT NULL     -- e.g. '2 added, 1 changed, 0 removed'
);
