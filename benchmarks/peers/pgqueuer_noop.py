"""Run by the peers' own Python (never imported by the toolkit): drain JOBS no-op jobs
with pgqueuer on a PostgreSQL database, WORKERS worker processes, each a QueueManager
taking one job per dequeue (``batch_size=1``) in drain mode (it stops once the queue is
empty). Prints the seconds from the workers' start until the last one stops, as JSON.

    python pgqueuer_noop.py DSN JOBS WORKERS
"""

import asyncio
import json
import multiprocessing
import sys
import time

import psycopg
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
    jobs, workers = int(sys.argv[2]), int(sys.argv[3])
    asyncio.run(_setup(jobs))
    start = time.perf_counter()
    procs = [multiprocessing.Process(target=work) for _ in range(workers)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
    seconds = time.perf_counter() - start
    with psycopg.connect(DSN) as conn:
        left = conn.execute("SELECT count(*) FROM pgqueuer").fetchone()[0]
    print(json.dumps({"seconds": seconds, "done": jobs - left}))


if __name__ == "__main__":
    multiprocessing.set_start_method("fork")
    main()
