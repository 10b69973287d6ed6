"""``BENCH_ONLY=postgres``: the PostgreSQL store beside SQLite's figures, on a throwaway
server this benchmark starts and stops (``examples/migration/pg_sandbox.sh``, fsync on).

- claim latency at 10k-1M rows (targets as SQLite's: p50 at most 5 ms at 1M, 1M / 10k at most 2x);
- contended claims at 1-16 processes against a raw insert-and-commit loop (at least 50%);
- RunJob's overhead per no-op chunk, PostgreSQL / SQLite;
- from a host's death, and from a network partition, to its chunk claimed elsewhere.
"""

from __future__ import annotations

import os
from pathlib import Path

import bench_pg_claims
import bench_pg_contention
import bench_pg_hosts
import pg_server
from measure import Config, Section

from dataflow.run.lease import keeper

CONTENTION_CHUNKS = 1_000  # per race: claims here are slow (see findings), races long


def bench(config: Config, work: Path) -> Section:
    section = Section("postgres", "PostgreSQL store")
    try:
        server = pg_server.Server()
    except pg_server.Unavailable as exc:
        section.skip("every PostgreSQL figure", str(exc))
        return section
    saved = {k: os.environ.get(k) for k in ("DATAFLOW_STATE", "DATAFLOW_HOST")}
    os.environ["DATAFLOW_STATE"] = str(work / "state")  # this host's keeper and lock file
    try:
        print(
            f"  server {server.admin('SHOW server_version')}, fsync {server.setting('fsync')}, "
            f"synchronous_commit {server.setting('synchronous_commit')}",
            flush=True,
        )
        section.text(
            f"PostgreSQL {server.admin('SHOW server_version')} on 127.0.0.1 (TCP), started "
            "by `examples/migration/pg_sandbox.sh` with `PG_SANDBOX_FSYNC=on` "
            f"(fsync {server.setting('fsync')}, synchronous_commit "
            f"{server.setting('synchronous_commit')}, shared_buffers "
            f"{server.setting('shared_buffers')}), the rest as initdb leaves it."
        )
        bench_pg_claims.bench_claims(config, server, section)
        chunks = min(config.contention_chunks, CONTENTION_CHUNKS)
        bench_pg_contention.bench_contention_pg(config, server, section, chunks)
        bench_pg_hosts.bench_runjob(config, server, section, work)
        bench_pg_hosts.bench_death(config, server, section, work)
    finally:
        keeper.close_all()
        server.stop()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
    return section
