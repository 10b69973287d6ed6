"""Claim + finish cost, A/B between two checkouts of the toolkit, interleaved in one run.

    python benchmarks/ab_claim_finish.py OLD_TREE NEW_TREE [postgresql://...admin URL]

Each round starts one worker process per tree (its ``PYTHONPATH`` the tree), in turn A,
B, B, A, ...; a worker builds a fresh store (an SQLite file, or a new database on the
server), makes ``CHUNKS`` chunks READY for one job, and times each chunk's claim and
finish as a drain makes them (on a shared store with the keeper told of the run's start
and end). Printed: the median per-chunk cost of each tree, per round and over all
rounds, and the ratio NEW / OLD.
"""

from __future__ import annotations

import inspect
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

CHUNKS = int(os.environ.get("AB_CHUNKS", "400"))
ROUNDS = int(os.environ.get("AB_ROUNDS", "6"))


def worker(address: str) -> None:
    """In the tree under test: time claim + finish of CHUNKS chunks; print the seconds."""
    from dataflow.run.claim import claims, lifecycle, liveness
    from dataflow.store import create_store

    store, _ = create_store(address if "://" in address else Path(address))
    store.execute("INSERT INTO dataset(datasetid) VALUES ('src'), ('out')")
    store.execute(
        "INSERT INTO job(jobid, itemtype, datasetid) VALUES ('j', 'IN', 'src'), ('j', 'OUT', 'out')"
    )
    for start in range(0, CHUNKS, 500):
        values = ", ".join(
            f"('src', 'feed', '{i}', 'OUT', 'READY', now())"
            for i in range(start, min(CHUNKS, start + 500))
        )
        store.execute(f"INSERT INTO datastatus VALUES {values}")
    job = lifecycle.load_job(store, "j")
    new_api = "runid" in inspect.signature(liveness.started).parameters
    samples = []
    for _ in range(CHUNKS):
        began = time.perf_counter()
        claim = claims.claim(store, job).claim
        assert claim is not None
        if new_api:
            liveness.started(store, "j", claim.dataid, claim.runid, claim.token, 0)
        else:
            liveness.started(store, "j", claim.dataid, claim.token, os.getpid())
        lifecycle.finish(store, "j", claim.dataid, "READY", runid=claim.runid)
        claim.lock.close()
        if new_api:
            liveness.ended(store, "j", claim.dataid, claim.runid)
        samples.append(time.perf_counter() - began)
    from dataflow.run.lease import keeper

    keeper.close_all()
    store.close()
    print(json.dumps(samples))


def _store(admin: str | None, folder: Path) -> str:
    if admin is None:
        return str(folder / f"{uuid.uuid4().hex}.db")
    import psycopg

    name = f"ab_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return admin.rsplit("/", 1)[0] + f"/{name}"


def _run(tree: str, address: str) -> list[float]:
    env = {**os.environ, "PYTHONPATH": tree, "DATAFLOW_STATE": str(Path(address).parent)}
    if "://" in address:
        env["DATAFLOW_STATE"] = tempfile.mkdtemp()
    done = subprocess.run(
        [sys.executable, __file__, "--worker", address],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return json.loads(done.stdout.splitlines()[-1])


def main(old: str, new: str, admin: str | None) -> None:
    trees = {"old": old, "new": new}
    found: dict[str, list[float]] = {"old": [], "new": []}
    with tempfile.TemporaryDirectory() as folder:
        for round_ in range(ROUNDS):
            order = ["old", "new"] if round_ % 2 == 0 else ["new", "old"]
            line = []
            for name in order:
                samples = _run(trees[name], _store(admin, Path(folder)))
                found[name] += samples
                line.append(f"{name} {statistics.median(samples) * 1000:.3f} ms")
            print(f"round {round_ + 1}: " + ", ".join(line), flush=True)
    old_p50, new_p50 = (statistics.median(found[n]) for n in ("old", "new"))
    store = "PostgreSQL" if admin else "SQLite"
    print(
        f"{store} claim+finish p50 over {ROUNDS} x {CHUNKS} chunks: old {old_p50 * 1000:.3f} ms, "
        f"new {new_p50 * 1000:.3f} ms, new/old {new_p50 / old_p50:.3f}x (load {os.getloadavg()[0]:.1f})"
    )


if __name__ == "__main__":
    if sys.argv[1] == "--worker":
        worker(sys.argv[2])
    else:
        main(sys.argv[1], sys.argv[2], sys.argv[3] if len(sys.argv) > 3 else None)
