"""Run by the peers' own Python (never imported by the toolkit): drain JOBS no-op jobs
with procrastinate on a PostgreSQL database, WORKERS worker processes of concurrency 1,
as a user would run ``procrastinate worker`` N times. Prints the seconds from the
workers' start until the queue is empty, as JSON.

    python procrastinate_noop.py DSN JOBS WORKERS
"""

import json
import sys

import procrastinate
import psycopg
import workers

DSN = sys.argv[1]
app = procrastinate.App(connector=procrastinate.PsycopgConnector(conninfo=DSN))


@app.task(name="noop")
def noop(dataid: int) -> None:
    """The same nothing that ``./noop.sh`` does for a chunk."""


def work() -> None:
    with app.open():
        # wait=False: the worker stops once it finds the queue empty
        app.run_worker(wait=False, concurrency=1, install_signal_handlers=False)


def main() -> None:
    jobs, count = int(sys.argv[2]), int(sys.argv[3])
    with app.open():
        app.schema_manager.apply_schema()
        for dataid in range(jobs):  # one transaction per job, as producers defer them
            noop.defer(dataid=dataid)
    seconds = workers.timed(work, count)
    with psycopg.connect(DSN) as conn:
        done = conn.execute(
            "SELECT count(*) FROM procrastinate_jobs WHERE status = 'succeeded'"
        ).fetchone()[0]
    print(json.dumps({"seconds": seconds, "done": done}))


if __name__ == "__main__":
    main()
