"""PostgreSQL queries of the claim, its finish and the run locks that keepers hold.

Part of the PostgreSQL backend (mixed into :class:`.store.PostgresStore`): SQL only.
A claim locks the candidate rows it looks at (``FOR UPDATE SKIP LOCKED``: two claims
never wait for each other, and never take the same chunk), never a table.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...dataids import chunk_hash
from ..address import liveness_timeout
from ..base import ChunkRow
from .connection import Connection
from .schema import offer_lock


def fresh(run: str = "") -> str:
    """SQL: is the run's heartbeat younger than its lease (one ``?``: this host's bound)?
    Never younger than this host's own bound: a store writer who shortens a lease
    (``lease = 0``) cannot hasten a take-over."""
    return f"{run}seen + greatest({run}lease, ?) * interval '1 second' > now()"


def run_key(jobid: str, dataid: str) -> int:
    """The chunk's run lock: its hash as PostgreSQL's signed 64-bit advisory lock key."""
    value = chunk_hash(jobid, dataid)
    return value - (1 << 64) if value >= 1 << 63 else value


class ClaimQueries:
    conn: Connection
    _turns: dict[str, bool]  # chunk turns this transaction tried with its candidates

    # -- the claim ---------------------------------------------------------------------

    def candidates(
        self, jobid: str, limit: int, after: tuple[str, str] | None = None
    ) -> list[tuple[str, str]]:
        """The job's next candidate in natural order, locked for this transaction; those
        another claim has locked are passed over, not waited for.

        One at a time, whatever ``limit``: a row locked here is hidden from every other
        claim until this transaction ends, so a claim locks only the candidate it is about
        to check. A batch would hide the chunks after it too, and another RunJob would find
        "no suitable data" while they wait (a drain would end with work left)."""
        sql = "SELECT sortkey, dataid FROM candidate WHERE jobid = ?"
        params: tuple = (jobid,)
        if after is not None:
            sql += " AND (sortkey, dataid) > (?, ?)"
            params += after
        # the chunk's turn (see chunk_turn) is tried once its row is locked, in the same
        # round trip
        sql = (
            f"WITH c AS MATERIALIZED ({sql} ORDER BY sortkey, dataid LIMIT 1 FOR UPDATE "
            f"SKIP LOCKED) SELECT sortkey, dataid, pg_try_advisory_xact_lock({offer_lock('dataid')}) "
            "FROM c"
        )
        found = []
        for sortkey, dataid, turned in self.conn.execute(sql, params):
            self._turns[dataid] = bool(turned)
            found.append((sortkey, dataid))
        return found

    def put_candidate(self, jobid: str, dataid: str) -> None:
        self.conn.execute(
            "INSERT INTO candidate(jobid, sortkey, dataid) "
            "VALUES (?, dataflow_natkey(?), ?) ON CONFLICT DO NOTHING",
            (jobid, dataid, dataid),
        )

    def mark_running(
        self, jobid: str, dataid: str, outputs: Sequence[str], inputs: Sequence[str]
    ) -> None:
        """Every row of the claim in one statement: one round trip to the server, not one
        per row (a dataset is never both an IN and an OUT of a job: job_dataset_once)."""
        rows = [(d, jobid, dataid, "OUT") for d in outputs]
        rows += [(d, jobid, dataid, "IN") for d in inputs]
        if not rows:
            return
        values = ", ".join(["(?, ?, ?, ?, 'RUNNING', now())"] * len(rows))
        self.conn.execute(
            "INSERT INTO datastatus(datasetid, jobid, dataid, locktype, status, modified) "
            f"VALUES {values} ON CONFLICT (datasetid, jobid, dataid) "
            "DO UPDATE SET locktype = excluded.locktype, status = 'RUNNING', modified = now()",
            [value for row in rows for value in row],
        )

    # -- run locks (held by keepers; see dataflow.run.keeper) -------------------------------

    def release_claim(
        self, jobid: str, dataid: str, runid: int, previous: Sequence[ChunkRow]
    ) -> None:
        """Undo a claim whose job never started, the run sequence too: the claim took
        ``runid`` from it, and a sequence is not rolled back. Inserts into ``run`` wait
        (SHARE ROW EXCLUSIVE, taken first) so that nobody takes a number meanwhile; the
        sequence goes back one only if ``runid`` is still the last it gave."""
        self.conn.execute("LOCK TABLE run IN SHARE ROW EXCLUSIVE MODE")
        super().release_claim(jobid, dataid, runid, previous)  # type: ignore[misc]
        self.conn.execute(
            "SELECT setval(s.id, GREATEST(?1::bigint - 1, 1), ?1::bigint > 1) "
            "FROM (SELECT pg_get_serial_sequence('run', 'runid')::regclass AS id) s "
            "WHERE pg_sequence_last_value(s.id) = ?1::bigint",
            (runid,),
        )

    def try_run_lock(self, jobid: str, dataid: str) -> bool:
        """Take the chunk's run lock for this session, if no session holds it."""
        row = self.conn.execute(
            "SELECT pg_try_advisory_lock(?)", (run_key(jobid, dataid),)
        ).fetchone()
        return bool(row[0])

    def drop_run_lock(self, jobid: str, dataid: str) -> None:
        self.drop_run_locks([(jobid, dataid)])

    def drop_run_locks(self, chunks: Sequence[tuple[str, str]]) -> None:
        keys = [run_key(*chunk) for chunk in chunks]
        self.conn.execute("SELECT pg_advisory_unlock(k) FROM unnest(?::bigint[]) AS k", (keys,))

    def run_locks_held(self, chunks: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        """Those chunks whose run lock some session (a live run's keeper) holds."""
        if not chunks:
            return set()
        keys = {run_key(*chunk): chunk for chunk in chunks}
        rows = self.conn.execute(
            "SELECT (classid::bigint << 32) | objid::bigint FROM pg_locks "
            "WHERE locktype = 'advisory' AND objsubid = 1 AND granted "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        )
        held = set()
        for (value,) in rows:
            key = value - (1 << 64) if value >= 1 << 63 else value
            if key in keys:
                held.add(keys[key])
        return held

    def keep_alive(self) -> None:
        bound = int(liveness_timeout() * 1000)
        self.conn.execute(f"SET idle_session_timeout = {bound}")

    def ping(self) -> None:
        self.conn.execute("SELECT 1")

    def last_run(self, jobid: str, dataid: str) -> dict | None:
        """The chunk's last run; ``leased``: its lease is fresh now (on the server's clock)."""
        row = self.conn.execute(
            f"SELECT *, coalesce({fresh()}, false) AS leased "
            "FROM run WHERE jobid = ? AND dataid = ? ORDER BY attempt DESC LIMIT 1",
            (liveness_timeout(), jobid, dataid),
        ).fetchone()
        return dict(row) if row else None

    # -- leases: a run's heartbeat (run.seen, renewed by its keeper; NULL: none) -------------

    def renew_leases(self, runids: Sequence[int]) -> set[int]:
        """Renew the heartbeat of these runs; returns those whose lease was not revoked."""
        if not runids:
            self.ping()
            return set()
        rows = self.conn.execute(
            "UPDATE run SET seen = now() WHERE runid = ANY(?) AND seen IS NOT NULL RETURNING runid",
            (list(runids),),
        )
        return {runid for (runid,) in rows}

    def release_leases(self, runids: Sequence[int]) -> None:
        """No process of these runs lives any more: their chunks are free at once."""
        if runids:
            self.conn.execute("UPDATE run SET seen = NULL WHERE runid = ANY(?)", (list(runids),))

    def live_leases(
        self, chunks: Sequence[tuple[str, str]], revoke: bool = False
    ) -> set[tuple[str, str]]:
        """Those chunks with a run whose heartbeat is younger than its lease. With
        ``revoke`` (inside a write transaction), the stale leases of the others are
        revoked, their rows locked until the transaction ends: a keeper that comes back
        late finds its lease gone and fences its run."""
        if not chunks:
            return set()
        lock = " FOR UPDATE OF r" if revoke else ""
        rows = self.conn.execute(
            f"SELECT r.runid, r.jobid, r.dataid, {fresh('r.')} "
            "FROM run r JOIN unnest(?::text[], ?::text[]) AS c(jobid, dataid) "
            f"ON r.jobid = c.jobid AND r.dataid = c.dataid WHERE r.seen IS NOT NULL{lock}",
            (liveness_timeout(), [j for j, _ in chunks], [d for _, d in chunks]),
        ).fetchall()
        live = {(jobid, dataid) for _, jobid, dataid, fresh in rows if fresh}
        stale = [runid for runid, jobid, dataid, fresh in rows if not fresh]
        if revoke and stale:
            self.release_leases(stale)
        return live
