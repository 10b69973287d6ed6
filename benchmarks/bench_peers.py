"""``BENCH_ONLY=peers``: our drains beside the job queues a user would pick instead, on the
same machine, in the same run, interleaved round by round.

- PostgreSQL: ``RunJob --all --parallel N ./noop.sh`` over no-op chunks ÷ procrastinate
  with N worker processes draining as many no-op jobs (fsync on, one server for both);
- PostgreSQL, no job process: our claim-and-finish loop in one process (the real
  path: ``claims.claim`` and the keeper, the ends recorded by a ``recorder.Recorder``
  thread as a drain's are) ÷ pgqueuer taking one job per dequeue, one worker;
- SQLite: ``RunJob --all ./noop.sh`` per chunk ÷ Luigi (local scheduler, one worker),
  with a ``true`` subprocess per task and in-process;
- cron's case: one ``RunJob ./noop.sh`` (a whole process claiming one chunk) on
  PostgreSQL ÷ on SQLite, and each ÷ ``python -c pass``.

The peers are installed from the package index into an environment of their own
(``BENCH_PEERS_VENV``, default ``~/.cache/opendataflow/bench-peers``), pinned, and run
there by ``benchmarks/peers/*.py``: the toolkit never imports them. Each figure carries
the load average of its run; one measured at a load above twice the core count is
marked unreliable rather than claimed.

Targets (issue 46): a drain beside procrastinate or Luigi is level when our time is
within 0.9-1.1 times theirs (``LEVEL``; judged over three quiet runs, each the median of
its rounds); the loop beside pgqueuer is a reference, not a target (pgqueuer holds no
lease); cron's case on PostgreSQL ÷ SQLite is reported only (psycopg's import is a fixed
cost a cron tick does not feel).
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import subprocess
import sys
import time
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

from dataflow.run.drain.workers import cores

PEERS = ("procrastinate==3.10.0", "luigi==3.8.1", "pgqueuer==1.6.0")
HERE = Path(__file__).resolve().parent / "peers"
RUNJOB = str(BIN / "RunJob")
LEVEL = 1.1  # our time ÷ the peer's: 0.9-1.1 times is level, below 0.9 ahead
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
    faster: bool = False,
) -> Row:
    """Our time ÷ the peer's, paired by round: lower is better for us. ``faster``: the
    peer's time ÷ ours instead (our rate ÷ the peer's), held to at least ``target``."""
    ratio = paired(ours, peer, (lambda a, b: b / a) if faster else (lambda a, b: a / b))
    unreliable = max(loads) > 2 * (os.cpu_count() or 1)
    if target is None:
        target_text, judged = "report", INFO
    else:
        target_text = f"{'≥' if faster else '≤'} {target:g}×"
        met = ratio.median >= target if faster else ratio.median <= target
        judged = "unreliable" if unreliable else verdict(met)
    return Row(
        TITLE,
        figure,
        times(ratio.median),
        times(ratio.p95),
        target_text,
        judged,
        "; ".join(filter(None, (note, _reliability(loads)))),
    )


def bench_postgres(
    config: Config, python: Path, section: Section, server: pg_server.Server, work: Path
) -> None:
    jobs = 300 if config.quick else 2_000
    rounds = 1 if config.quick else 3
    write_script(work / "noop.sh", "#!/bin/sh\nexit 0\n")
    env = {**base_env(Path("unused")), "DATAFLOW_STATE": str(work / "state")}
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
                LEVEL,
                loads,
                f"{jobs:,} no-op jobs: ours {rate:.0f}/s, procrastinate {peer_rate:.0f}/s",
            )
        )
    section.text(
        f"### {TITLE}: PostgreSQL\n\n{jobs:,} no-op chunks on a fresh database per round "
        f"(RunJob) against {jobs:,} no-op jobs deferred one per transaction (procrastinate "
        f"{PEERS[0].split('==')[1]}, a worker process of concurrency 1 per N, `wait=False` so "
        "each stops once the queue is empty), one server with fsync on, the two interleaved "
        f"over {rounds} rounds. RunJob's time is the whole process (start-up, keeper, a log "
        "per chunk, history; at `--parallel 4`, its slots spread over worker processes, one a "
        f"core: {cores()} here); procrastinate's from its workers' start to their end."
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
            LEVEL,
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


def _our_loop(address: str, jobs: int, results) -> None:
    """In a process of its own (forked: its own keeper): claim every chunk of the job
    ``noop`` one at a time and finish each, through the path a drain takes with no job
    process: the claims in this thread, the finishes in the recorder's (its own
    connection), as a drain records an end while it claims the next chunk."""
    import queue

    from dataflow.run.claim import claims, lifecycle, liveness
    from dataflow.run.drain import recorder
    from dataflow.run.lease import keeper
    from dataflow.run.process.runner import Outcome
    from dataflow.store import open_store

    keeper._keepers.clear()  # the parent's, if any, are not this process's
    with open_store(address) as store:
        claims.prepare(store, "noop")
        job = lifecycle.load_job(store, "noop")
        ends: queue.Queue = queue.Queue()
        writer = recorder.Recorder(store, job, {}, lambda *_: None, ends.put)
        start, claimed = time.perf_counter(), 0
        while claim := claims.claim(store, job, command="loop", recover_dead=False).claim:
            liveness.started(store, job.jobid, claim.dataid, claim.runid, claim.token, 0)
            writer.record(claim, Outcome(0))
            claimed += 1
        writer.close()
        seconds = time.perf_counter() - start
        done = sum(ends.get().kind == "ended" for _ in range(claimed))
        results.put((seconds, done))
    keeper.close_all()


def _loop_seconds(address: str, jobs: int) -> float:
    results = mp.get_context("fork").Queue()
    process = mp.get_context("fork").Process(target=_our_loop, args=(address, jobs, results))
    process.start()
    seconds, done = results.get(timeout=1800)
    process.join()
    if done != jobs:
        raise RuntimeError(f"our loop finished {done} of {jobs} chunks")
    return seconds


def bench_loop(config: Config, python: Path, section: Section, server: pg_server.Server) -> None:
    jobs = 300 if config.quick else 2_000
    rounds = 1 if config.quick else 3
    env = base_env(Path("unused"))
    ours, peer, loads = [], [], []
    for r in range(rounds):
        loads.append(load_average())
        address = server.database(f"loop_{r}")
        pg_server.single_job(address, "noop", jobs).close()
        ours.append(_loop_seconds(address, jobs))
        dsn = server.database(f"pgqueuer_{r}")
        result = _peer(python, "pgqueuer_noop.py", dsn, jobs, 1, env=env)
        if result["done"] != jobs:
            raise RuntimeError(f"pgqueuer ran {result['done']} of {jobs} jobs")
        peer.append(result["seconds"])
        loads.append(load_average())
    section.add(
        _ratio_row(
            "our claim-and-finish loop in one process ÷ pgqueuer, one job per dequeue, "
            "1 worker (PostgreSQL): jobs/s",
            ours,
            peer,
            None,  # a reference: pgqueuer holds no lease
            loads,
            f"{jobs:,} no-op jobs: ours {Dist.of([jobs / s for s in ours]).median:.0f}/s, "
            f"pgqueuer {PEERS[2].split('==')[1]} {Dist.of([jobs / s for s in peer]).median:.0f}/s",
            faster=True,
        )
    )
    section.text(
        f"### {TITLE}: claim and finish in one process\n\n{jobs:,} no-op chunks claimed "
        "one at a time by one process through the drain's own path (`claims.claim` with its "
        "keeper in its main thread; each end recorded by `recorder.Recorder` in its own thread "
        "and connection while the next chunk is claimed, as a drain records them), no job "
        "process, against pgqueuer "
        f"{PEERS[2].split('==')[1]} draining {jobs:,} no-op jobs with one worker taking one "
        "job per dequeue (`batch_size=1`, drain mode), interleaved over "
        f"{rounds} rounds. Our time is from the loop's start to its end; pgqueuer's from its "
        "worker's start (its connection and schema check included, ~1 s) until its queue is "
        "empty, not until its worker stops (~5 s later, its buffers' last flushes)."
    )


def bench_cron(config: Config, section: Section, server: pg_server.Server, work: Path) -> None:
    """One RunJob process claiming one chunk, as cron starts it: PostgreSQL ÷ SQLite."""
    runs = 5 if config.quick else 15
    write_script(work / "noop.sh", "#!/bin/sh\nexit 0\n")
    address = server.database("cron")
    pg_server.single_job(address, "noop", runs).close()
    sqlite = work / "cron.db"
    stores.single_job(sqlite, "noop", chunks=runs).close()
    env = {**base_env(sqlite), "DATAFLOW_STATE": str(work / "state")}
    argv = [RUNJOB, "./noop.sh"]
    pg, lite, bare, loads = [], [], [], []
    for _ in range(runs):  # interleaved
        loads.append(load_average())
        pg.append(_ours(argv, work, {**env, "DATAFLOW_DB": address}))
        lite.append(_ours(argv, work, env))
        bare.append(_ours([sys.executable, "-c", "pass"], work, env))
    note = f"{runs} runs each, interleaved: PostgreSQL {ms(Dist.of(pg).median)}, SQLite "
    note += f"{ms(Dist.of(lite).median)}, `python -c pass` {ms(Dist.of(bare).median)}"
    section.add(
        _ratio_row(
            "cron's case: `RunJob ./noop.sh` on PostgreSQL ÷ on SQLite", pg, lite, None, loads, note
        ),
        _ratio_row("cron's case on PostgreSQL ÷ `python -c pass`", pg, bare, None, loads, ""),
        _ratio_row("cron's case on SQLite ÷ `python -c pass`", lite, bare, None, loads, ""),
    )
    section.text(
        f"### {TITLE}: cron's case\n\nA whole `RunJob ./noop.sh` process claiming one chunk "
        "(of a job with chunks left), as cron starts it every tick: on PostgreSQL (its "
        "keeper, psycopg's import and two connections included) and on SQLite, with "
        f"`python -c pass` beside them, interleaved, {runs} runs each."
    )


def bench(config: Config, work: Path) -> Section:
    section = Section("peers", TITLE)
    try:
        python = peers_python()
    except (OSError, subprocess.CalledProcessError) as exc:
        section.skip("every peer figure", f"the peers could not be installed: {exc}")
        return section
    bench_sqlite(config, python, section, work)
    try:
        server = pg_server.Server()
    except pg_server.Unavailable as exc:
        section.skip("every PostgreSQL figure beside the peers", str(exc))
        return section
    try:
        bench_postgres(config, python, section, server, work)
        bench_loop(config, python, section, server)
        bench_cron(config, section, server, work)
    finally:
        server.stop()
    return section
