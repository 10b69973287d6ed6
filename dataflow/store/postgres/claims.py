"""PostgreSQL's own forms of the claim, its undoing, and the run locks and leases that
keepers hold (mixed into :class:`.store.PostgresStore`; the SQL is ``queries/claim.sql``
and ``queries/leases.sql``). Each replaces an operation of :class:`dataflow.store.base.Store`
for a reason its docstring gives: fewer round trips to a server, locks a shared store
needs, a lease's columns. A claim locks the candidate rows it looks at (``FOR UPDATE
SKIP LOCKED``: two claims never wait for each other, and never take the same chunk),
never a table.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from ...dataids import chunk_hash
from ..address import host_name, liveness_timeout
from ..base import ChunkRow, JobItem, Row, capped
from ..queries import NamedQueries
from ..queries.chunks import ChunkQueries
from .connection import Connection, lock_timed_out, stall_ms

# how long a lease holder's statement waits for a lock (milliseconds): a claim may be
# waiting for the holder's answer, so the holder never waits for long (see keep_alive)
HOLDER_WAIT_MS = 100


def run_key(jobid: str, dataid: str) -> int:
    """The chunk's run lock: its hash as PostgreSQL's signed 64-bit advisory lock key."""
    value = chunk_hash(jobid, dataid)
    return value - (1 << 64) if value >= 1 << 63 else value


class ClaimQueries(ChunkQueries):
    conn: Connection
    q: NamedQueries
    _turns: dict[str, bool]  # chunk turns this transaction tried with its candidates
    _facts: dict[tuple[str, tuple[str, ...], str], tuple]  # chunk_facts read with them

    # -- the claim ---------------------------------------------------------------------

    def candidates(
        self, jobid: str, limit: int, after: tuple[str, str] | None = None, lock: bool = True
    ) -> list[tuple[str, str]]:
        """The job's next ``limit`` candidates in natural order, locked for this
        transaction; those another claim has locked are passed over, not waited for.
        Without ``lock`` (a reader's look, which a role that may only read can ask), all
        of them, as they are.

        A row locked here is hidden from every other claim until this transaction ends, so
        a claim asks for as many as it still wants, no more: more would hide the chunks
        after them too, and another RunJob would find "no suitable data" while they wait
        (a drain would end with work left)."""
        if not lock:
            if after is None:
                return self.conn.execute(self.q.candidates_read, (jobid, limit)).fetchall()
            params = (jobid, *after, limit)
            return self.conn.execute(self.q.candidates_read_after, params).fetchall()
        return self._candidates(jobid, limit, after)

    def job_and_candidates(
        self, jobid: str, limit: int, inputs: Sequence[str]
    ) -> tuple[list[JobItem], list[tuple[str, str]] | None]:
        """All in one round trip: the job's rows, its first candidates unless it is capped,
        and what :meth:`chunk_facts` reads of them (read by the server once they are locked
        and their turns tried, as if asked next; kept for that call)."""
        asked = self.conn.execute(self.q.job_items, (jobid,))  # read with the candidates
        found = self._candidates(jobid, limit, None, inputs)
        items = [JobItem(*row) for row in asked]
        return items, None if capped(items) else found

    def _candidates(
        self,
        jobid: str,
        limit: int,
        after: tuple[str, str] | None,
        inputs: Sequence[str] | None = None,
    ) -> list[tuple[str, str]]:
        """With ``inputs`` (the first ones only): none if the job is capped, and their facts
        read in the same round trip."""
        if after is None:
            rows = self.conn.execute(self.q.candidates, (jobid, inputs is not None, limit))
        else:
            rows = self.conn.execute(self.q.candidates_after, (jobid, *after, limit))
        facts = None if inputs is None else self._ask_chunk_facts(jobid, inputs, None)
        found = []
        for sortkey, dataid, turned in rows:
            if dataid is not None:  # (a row of NULLs: none)
                self._turns[dataid] = bool(turned)
                found.append((sortkey, dataid))
        self._facts = {}
        if facts is not None:
            for (_, dataid), fact in zip(found, self._read_facts(facts), strict=True):
                self._facts[(jobid, tuple(inputs), dataid)] = fact
        return found

    def put_candidate(self, jobid: str, dataid: str) -> None:
        """The server computes the sort key (``dataflow_natkey``), as its triggers do."""
        self.conn.execute(self.q.put_candidate, {"jobid": jobid, "dataid": dataid})

    def mark_running(
        self, jobid: str, dataid: str, outputs: Sequence[str], inputs: Sequence[str]
    ) -> None:
        """One statement for every row (:meth:`_mark_running`), not a round trip each."""
        self._mark_running(jobid, [dataid], outputs, inputs)

    def _mark_running(
        self, jobid: str, dataids: Sequence[str], outputs: Sequence[str], inputs: Sequence[str]
    ) -> None:
        """Every row of the claims in one statement."""
        if not outputs and not inputs:
            return
        params = {
            "jobid": jobid,
            "dataids": list(dataids),
            "datasetids": [*outputs, *inputs],
            "locktypes": ["OUT"] * len(outputs) + ["IN"] * len(inputs),
        }
        self.conn.execute(self.q.mark_running, params)

    def record_claims(
        self,
        jobid: str,
        taken: Sequence[tuple[str, str]],
        outputs: Sequence[str],
        inputs: Sequence[str],
        runs: Sequence[dict[str, object]],
    ) -> list[int]:
        """Three statements, however many claims: candidates dropped, rows marked, runs
        inserted (sent together: one round trip in a claim's pipeline)."""
        if not taken:
            return []
        dataids = [dataid for _, dataid in taken]
        keys = {"jobid": jobid, "sortkeys": [key for key, _ in taken], "dataids": dataids}
        self.conn.execute(self.q.drop_candidates, keys)
        self._mark_running(jobid, dataids, outputs, inputs)
        return self.start_runs(runs)

    def finish(self, jobid: str, dataid: str, status: str) -> tuple[int, int]:
        """Both in one statement."""
        params = {"status": status, "jobid": jobid, "dataid": dataid}
        updated, released = self.conn.execute(self.q.finish, params).fetchone()
        return updated, released

    def release_claim(
        self, jobid: str, dataid: str, runid: int, previous: Sequence[ChunkRow]
    ) -> None:
        """Undo a claim whose job never started, the run sequence too: the claim took
        ``runid`` from it, and a sequence is not rolled back. Inserts into ``run`` wait
        (taken first) so that nobody takes a number meanwhile; the sequence goes back one
        only if ``runid`` is still the last it gave."""
        self.conn.execute(self.q.lock_run_inserts)
        super().release_claim(jobid, dataid, runid, previous)
        self.conn.execute(self.q.rewind_run_sequence, {"runid": runid})

    # -- run locks (held by keepers; see dataflow.run.lease.keeper) -------------------------------

    def try_run_locks(self, chunks: Sequence[tuple[str, str]]) -> list[bool]:
        """Take each chunk's run lock for this session, if no session holds it."""
        if not chunks:
            return []
        keys = [run_key(*chunk) for chunk in chunks]
        return [bool(taken) for (taken,) in self.conn.execute(self.q.try_run_locks, (keys,))]

    def drop_run_locks(self, chunks: Sequence[tuple[str, str]]) -> None:
        self.conn.execute(self.q.drop_run_locks, ([run_key(*chunk) for chunk in chunks],))

    def run_locks_held(self, chunks: Sequence[tuple[str, str]]) -> set[tuple[str, str]]:
        """Those chunks whose run lock some session (a live run's keeper) holds."""
        if not chunks:
            return set()
        keys = {run_key(*chunk): chunk for chunk in chunks}
        held = set()
        for (value,) in self.conn.execute(self.q.advisory_locks_held):
            key = value - (1 << 64) if value >= 1 << 63 else value
            if key in keys:
                held.add(keys[key])
        return held

    def keep_alive(self) -> None:
        bound = str(int(liveness_timeout() * 1000))
        name = f"dataflow/{stall_ms()} holder {host_name()}"[:63]  # (the server's limit)
        self.conn.execute(self.q.keep_alive, (bound, str(HOLDER_WAIT_MS), name))

    def ping(self) -> None:
        self.conn.execute(self.q.ping)

    def last_run(self, jobid: str, dataid: str) -> Row | None:
        """The chunk's last run; ``leased``: its lease is fresh now (on the server's clock)."""
        row = self._ask_last_run(jobid, dataid).fetchone()
        return dict(row) if row else None

    def _ask_last_run(self, jobid: str, dataid: str):
        params = {"bound": liveness_timeout(), "jobid": jobid, "dataid": dataid}
        return self.conn.execute(self.q.last_run, params)

    def chunk_facts(
        self, jobid: str, inputs: Sequence[str], dataids: Sequence[str]
    ) -> list[tuple[list[ChunkRow], Row | None, int]]:
        """One statement for every chunk looked at (its rows, its inputs READY, then the
        columns of its last run), or none: those read with the candidates just before."""
        ahead, self._facts = self._facts, {}
        keys = [(jobid, tuple(inputs), dataid) for dataid in dataids]
        if all(key in ahead for key in keys):
            return [ahead[key] for key in keys]
        if not dataids:
            return []
        return self._read_facts(self._ask_chunk_facts(jobid, inputs, dataids))

    def _ask_chunk_facts(self, jobid: str, inputs: Sequence[str], dataids: Sequence[str] | None):
        params = {"jobid": jobid, "inputs": list(inputs), "dataids": dataids}
        return self.conn.execute(self.q.chunk_facts, {**params, "bound": liveness_timeout()})

    @staticmethod
    def _read_facts(records) -> list[tuple[list[ChunkRow], Row | None, int]]:
        found = []
        for record in records:
            rows, ready, *run = record
            last = dict(zip(record.names[2:], run, strict=True)) if record["runid"] else None
            found.append(([ChunkRow(*row) for row in rows], last, ready))
        return found

    # -- leases: a run's heartbeat (run.seen, renewed by its keeper; NULL: none) -------------

    def renew_leases(self, runids: Sequence[int]) -> dict[int, bool]:
        """Renew the heartbeat of these runs, never waiting for a row another transaction
        holds; the runs whose lease was not revoked, each True if renewed now. Every
        heartbeat first ends the sessions of ours stalled inside a transaction
        (:meth:`end_stalled`): a row they hold is not renewed until they end."""
        self.end_stalled()
        if not runids:
            self.ping()
            return {}
        rows = self._unwaited(self.q.renew_leases, runids)
        return dict.fromkeys(runids, False) if rows is None else dict(rows)

    def _unwaited(self, sql: str, runids: Sequence[int]) -> list | None:
        """The rows of a holder's statement over these runs; None when it gave up waiting
        for the table's lock (keep_alive: a claim may be waiting for the holder), to be
        tried again at the next look."""
        try:
            return self.conn.execute(sql, {"runids": list(runids)}).fetchall()
        except psycopg.Error as exc:
            if not lock_timed_out(exc):
                raise
            return None

    def end_stalled(self) -> None:
        """End the sessions of ours whose process stopped in the middle of sending a
        transaction's statements, for longer than a quarter of their host's bound (the
        server's idle timeout ends those stopped between statements)."""
        self.conn.execute(self.q.end_stalled).fetchall()

    def release_leases(self, runids: Sequence[int], wait: bool = True) -> set[int]:
        """No process of these runs lives any more: their chunks are free at once. Without
        ``wait``, a row another transaction holds is left: those still leased come back."""
        if not runids:
            return set()
        if wait:
            self.conn.execute(self.q.release_leases, (list(runids),))
            return set()
        rows = self._unwaited(self.q.release_leases_unwaited, runids)
        return set(runids) if rows is None else {runid for (runid,) in rows}

    def live_leases(
        self, chunks: Sequence[tuple[str, str]], revoke: bool = False
    ) -> set[tuple[str, str]]:
        """Those chunks with a run whose heartbeat is younger than its lease. With
        ``revoke`` (inside a write transaction), the stale leases of the others are
        revoked, their rows locked until the transaction ends: a keeper that comes back
        late finds its lease gone and fences its run. A row that another transaction holds
        is not waited for: its lease counts as fresh (it is being renewed, or revoked by
        another claim)."""
        if not chunks:
            return set()
        sql = self.q.live_leases_to_revoke if revoke else self.q.live_leases
        params = {
            "bound": liveness_timeout(),
            "jobids": [j for j, _ in chunks],
            "dataids": [d for _, d in chunks],
        }
        rows = self.conn.execute(sql, params).fetchall()
        live = {(jobid, dataid) for _, jobid, dataid, fresh in rows if fresh}
        stale = [runid for runid, jobid, dataid, fresh in rows if not fresh]
        if revoke and stale:
            self.release_leases(stale)
        return live
