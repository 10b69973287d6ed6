"""``BENCH_ONLY=peers``: our drains beside the job queues a user would pick instead, on the
same machine, in the same run, interleaved round by round.

- PostgreSQL: ``RunJob --all --parallel N ./noop.sh`` over no-op chunks ÷ procrastinate
  with N worker processes draining as many no-op jobs (fsync on, one server for both);
- SQLite: ``RunJob --all ./noop.sh`` per chunk ÷ Luigi (local scheduler, one worker),
  with a ``true`` subprocess per task and in-process.

The peers are installed from the package index into an environment of their own
(``BENCH_PEERS_VENV``, default ``~/.cache/opendataflow/bench-peers``), pinned, and run
there by ``benchmarks/peers/*.py``: the toolkit never imports them. Each figure carries
the load average of its run; one measured at a load above twice the core count is
marked unreliable rather than claimed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pg_server
import stores
from measure import (
    BIN,
    INFO,
    Config,
    Dist,
    Row,
    Section,
    base_env,
    load_average,
    ms,
    paired,
    run_once,
    times,
    verdict,
    write_script,
)

PEERS = ("procrastinate==3.10.0", "luigi==3.8.1")
HERE = Path(__file__).resolve().parent / "peers"
RUNJOB = str(BIN / "RunJob")
TITLE = "Beside the peers"


def peers_python() -> Path:
    """The peers' own Python, its environment made once and kept (a stamp names what it holds)."""
    venv = Path(os.environ.get("BENCH_PEERS_VENV", Path.home() / ".cache/opendataflow/bench-peers"))
    python, stamp = venv / "bin" / "python", venv / "installed"
    if not stamp.exists() or stamp.read_text() != " ".join(PEERS):
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *PEERS],
            check=True,
        )
        stamp.write_text(" ".join(PEERS))
    return python


def _peer(python: Path, script: str, *args: object, env: dict[str, str]) -> dict:
    done = subprocess.run(
        [str(python), str(HERE / script), *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{script} exited {done.returncode}: {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _ours(argv: list[str], work: Path, env: dict[str, str]) -> float:
    run = run_once(argv, work, env)
    if run.code != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {run.code}")
    return run.seconds


def _reliability(loads: list[float]) -> str:
    worst = max(loads)
    cores = os.cpu_count() or 1
    note = f"load {min(loads):.1f}–{worst:.1f} on {cores} cores"
    return note + (" — UNRELIABLE (load above 2× cores)" if worst > 2 * cores else "")


def _ratio_row(
    figure: str,
    ours: list[float],
    peer: list[float],
    target: float | None,
    loads: list[float],
    note: str,
) -> Row:
    """Our time ÷ the peer's, paired by round: lower is better for us."""
    ratio = paired(ours, peer, lambda a, b: a / b)
    unreliable = max(loads) > 2 * (os.cpu_count() or 1)
    if target is None:
        target_text, judged = "report", INFO
    else:
        target_text = f"≤ {target:g}×"
        judged = "unreliable" if unreliable else verdict(ratio.median <= target)
    return Row(
        TITLE,
        figure,
        times(ratio.median),
        times(ratio.p95),
        target_text,
        judged,
        f"{note}; {_reliability(loads)}",
    )


def bench_postgres(config: Config, python: Path, section: Section, work: Path) -> None:
    try:
        server = pg_server.Server()
    except pg_server.Unavailable as exc:
        section.skip("RunJob --all --parallel N ÷ procrastinate, N workers", str(exc))
        return
    jobs = 300 if config.quick else 2_000
    rounds = 1 if config.quick else 3
    write_script(work / "noop.sh", "#!/bin/sh\nexit 0\n")
    env = {**base_env(Path("unused")), "DATAFLOW_STATE": str(work / "state")}
    try:
        for workers in (1, 4):
            ours, peer, loads = [], [], []
            for r in range(rounds):
                loads.append(load_average())
                address = server.database(f"ours_{workers}_{r}")
                pg_server.single_job(address, "noop", jobs).close()
                argv = [RUNJOB, "--all", "--parallel", str(workers), "./noop.sh"]
                ours.append(_ours(argv, work, {**env, "DATAFLOW_DB": address}))
                dsn = server.database(f"peer_{workers}_{r}")
                result = _peer(python, "procrastinate_noop.py", dsn, jobs, workers, env=env)
                if result["done"] != jobs:
                    raise RuntimeError(f"procrastinate ran {result['done']} of {jobs} jobs")
                peer.append(result["seconds"])
                loads.append(load_average())
            rate = Dist.of([jobs / s for s in ours]).median
            peer_rate = Dist.of([jobs / s for s in peer]).median
            section.add(
                _ratio_row(
                    f"`RunJob --all --parallel {workers} ./noop.sh` time ÷ procrastinate, "
                    f"{workers} worker{'s' if workers > 1 else ''} (PostgreSQL)",
                    ours,
                    peer,
                    1.0,
                    loads,
                    f"{jobs:,} no-op jobs: ours {rate:.0f}/s, procrastinate {peer_rate:.0f}/s",
                )
            )
    finally:
        server.stop()
    section.text(
        f"### {TITLE}: PostgreSQL\n\n{jobs:,} no-op chunks on a fresh database per round "
        f"(RunJob) against {jobs:,} no-op jobs deferred one per transaction (procrastinate "
        f"{PEERS[0].split('==')[1]}, a worker process of concurrency 1 per N, `wait=False` so "
        "each stops once the queue is empty), one server with fsync on, the two interleaved "
        f"over {rounds} rounds. RunJob's time is the whole process (start-up, keeper, a log "
        "per chunk, history); procrastinate's from its workers' start to their end."
    )


def bench_sqlite(config: Config, python: Path, section: Section, work: Path) -> None:
    chunks = 100 if config.quick else 500
    rounds = 1 if config.quick else 3
    write_script(work / "noop.sh", "#!/bin/sh\nexit 0\n")
    env = base_env(work / "unused.db")
    ours, sub, inproc, loads = [], [], [], []
    for r in range(rounds):
        loads.append(load_average())
        store = work / f"ours-{r}.db"
        stores.single_job(store, "noop", chunks=chunks).close()
        ours.append(_ours([RUNJOB, "--db", str(store), "--all", "./noop.sh"], work, env) / chunks)
        for mode, into in (("subprocess", sub), ("inprocess", inproc)):
            folder = work / f"luigi-{mode}-{r}"
            folder.mkdir()
            result = _peer(python, "luigi_noop.py", folder, chunks, mode, env=env)
            if result["done"] != chunks or not result["ok"]:
                raise RuntimeError(f"Luigi ({mode}) ran {result['done']} of {chunks} tasks")
            into.append(result["seconds"] / chunks)
        loads.append(load_average())
    mine = Dist.of(ours).median
    section.add(
        _ratio_row(
            "`RunJob --all ./noop.sh` per chunk ÷ Luigi, a `true` subprocess per task (SQLite)",
            ours,
            sub,
            1.0,
            loads,
            f"{chunks} chunks: ours {ms(mine)}, Luigi {ms(Dist.of(sub).median)} per chunk",
        ),
        _ratio_row(
            "`RunJob --all ./noop.sh` per chunk ÷ Luigi, tasks in-process (SQLite)",
            ours,
            inproc,
            None,
            loads,
            f"Luigi {ms(Dist.of(inproc).median)} per chunk",
        ),
    )
    section.text(
        f"### {TITLE}: SQLite\n\n{chunks} no-op chunks through `RunJob --all` (a fresh store "
        f"per round) against {chunks} Luigi {PEERS[1].split('==')[1]} tasks on its local "
        "scheduler with one worker, each task's output a file (Luigi's record that it is "
        "done); whole processes, interleaved over "
        f"{rounds} rounds."
    )


def bench(config: Config, work: Path) -> Section:
    section = Section("peers", TITLE)
    try:
        python = peers_python()
    except (OSError, subprocess.CalledProcessError) as exc:
        section.skip("every peer figure", f"the peers could not be installed: {exc}")
        return section
    bench_sqlite(config, python, section, work)
    bench_postgres(config, python, section, work)
    return section
