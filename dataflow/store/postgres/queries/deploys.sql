-- PostgreSQL: deploys of a project (table deploy): utility apply records one, utility
-- deploys lists them.

-- name: add_deploy
-- deployed: the server's clock (the column's default, now()).
INSERT INTO deploy(host, project, digest, revision, changes)
VALUES (%(host)s, %(project)s, %(digest)s, %(revision)s, %(changes)s) RETURNING deployid;

-- name: deploys
SELECT deployid, deployed, host, project, digest, revision, changes FROM deploy
ORDER BY deployid DESC LIMIT %s;
