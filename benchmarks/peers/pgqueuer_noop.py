"""Run by the peers' own Python (never imported by the toolkit): drain JOBS no-op jobs
with pgqueuer on a PostgreSQL database, WORKERS worker processes, each a QueueManager
taking one job per dequeue (``batch_size=1``) in drain mode (it stops once the queue is
empty). Prints the seconds from the workers' start until the queue is drained (every
job done), as JSON.

    python pgqueuer_noop.py DSN JOBS WORKERS
"""

import asyncio
import json
import sys

import psycopg
import workers
from pgqueuer import PsycopgDriver, Queries, QueueManager
from pgqueuer.types import QueueExecutionMode

DSN = sys.argv[1]


async def _connect() -> psycopg.AsyncConnection:
    return await psycopg.AsyncConnection.connect(DSN, autocommit=True)


async def _work() -> None:
    manager = QueueManager(Queries(PsycopgDriver(await _connect())))

    @manager.entrypoint("noop")
    async def noop(job) -> None:
        """The same nothing that ``./noop.sh`` does for a chunk."""

    await manager.run(batch_size=1, mode=QueueExecutionMode.drain)


def work() -> None:
    asyncio.run(_work())


async def _setup(jobs: int) -> None:
    queries = Queries(PsycopgDriver(await _connect()))
    await queries.install()
    for dataid in range(jobs):  # one transaction per job, as producers enqueue them
        await queries.enqueue("noop", str(dataid).encode())


def main() -> None:
    jobs, count = int(sys.argv[2]), int(sys.argv[3])
    asyncio.run(_setup(jobs))
    with psycopg.connect(DSN, autocommit=True) as conn:

        def left() -> int:  # a job done is deleted from the queue with its completion
            return conn.execute("SELECT count(*) FROM pgqueuer").fetchone()[0]

        # timed to the drain: a worker in drain mode takes ~5 s more to stop (its
        # heartbeat and log buffers' last flushes), whatever the number of jobs
        seconds = workers.timed(work, count, drained=lambda: left() == 0)
        print(json.dumps({"seconds": seconds, "done": jobs - left()}))


if __name__ == "__main__":
    main()
