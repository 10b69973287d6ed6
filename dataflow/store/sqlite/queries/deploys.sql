-- SQLite: deploys of a project (table deploy): utility apply records one, utility deploys
-- lists them.

-- name: add_deploy
-- deployed: this host's clock with its UTC offset, as the run history's times.
INSERT INTO deploy(deployed, host, project, digest, revision, changes)
VALUES (:deployed, :host, :project, :digest, :revision, :changes);

-- name: deploys
SELECT deployid, deployed, host, project, digest, revision, changes FROM deploy
ORDER BY deployid DESC LIMIT ?;
