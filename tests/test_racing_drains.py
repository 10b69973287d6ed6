"""Racing drains run each chunk once (docs/guarantees.md, "racing drains"): whatever
drives them (RunJob called again and again, ``--all --parallel N``, a folder drain, a
drain spread over worker processes, Python drains of in-process and batched chunk runs)
and whatever their chunks are (quick jobs claimed ahead, dataids no shell quotes, a clock
job's backfill, a job capped by ``max_parallel``).

One test, parametrised by the store, the kind of drain and how many of them race. Its
judge is on the job's side: each run appends what it ran to a ledger, and every chunk is
in it exactly once, none missing. What a race checks besides (its cap, its history rows,
its logs, its quiet stderr) is the race's own ``check``.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
from collections import Counter

import pytest

from support import _admin, history, rows, script, setting, start_runjob, statuses
from support.folders import _chain
from support.spreading import JUDGE, SPREAD, _no_overlap, chunks


def _most_at_once(done: list[list[str]], size=lambda part: 1) -> int:
    """The most chunks running at once by a ledger of ``part pid time start|end`` lines."""
    events = sorted(
        (float(t), size(part) * (1 if what == "start" else -1)) for part, _, t, what in done
    )
    live, most = 0, 0
    for _, step in events:
        live += step
        most = max(most, live)
    return most


def _numbers(last: int) -> list[str]:
    return [str(n) for n in range(1, last + 1)]


class Race:
    """One kind of race: how its store is filled, how one racer starts, what its jobs
    wrote in the ledger (one entry a run), which chunks must be there, and what else it
    checks once every racer has ended well."""

    name = ""
    job = "./work.sh"

    def prepare(self, cli, tmp_path) -> None:
        raise NotImplementedError

    def start(self, cli, tmp_path) -> subprocess.Popen:
        return start_runjob(cli, *self.args, self.job)

    def ran(self, tmp_path) -> list[str]:
        return (tmp_path / "ran").read_text().split()

    def expected(self, tmp_path) -> list[str]:
        raise NotImplementedError

    def check(self, cli, tmp_path, outputs) -> None:
        """Nothing more by default."""


class QuickJobs(Race):
    """Three drains of four slots each: jobs this quick are claimed four a slot ahead, in
    batches of up to sixteen, while the other drains claim from the same candidates
    (test_batch_claims before)."""

    name, args = "parallel-quick-jobs", ("--all", "--parallel", "4")

    def prepare(self, cli, tmp_path):
        chunks(cli, 150)
        script(tmp_path, "work.sh", 'echo "$dataid" >> ran')

    def expected(self, tmp_path):
        return _numbers(150)

    def check(self, cli, tmp_path, outputs):
        assert set(statuses(tmp_path, "work").values()) == {"READY"}
        runs = rows(tmp_path, "select dataid, attempt, status from run")
        assert sorted(int(d) for d, _, _ in runs) == list(range(1, 151))  # one history row each
        assert {(attempt, status) for _, attempt, status in runs} == {(1, "READY")}


ODD = [f"{n} \n'\"$(touch pwned)`id`;\t\\ ünï😀 " + "x" * 600 + f" -- {n}\n" for n in range(40)]


class OddDataids(Race):
    """Forty chunks whose dataids hold spaces, newlines, quotes, a command substitution,
    unicode and 600 more characters: drains of eight slots, claiming up to 32 at a time
    (on PostgreSQL their run locks asked of the keeper in one request)."""

    name, args = "parallel-odd-long-dataids", ("--all", "--parallel", "8")

    def prepare(self, cli, tmp_path):
        chunks(cli, 3)
        for dataid in ODD:
            _admin(
                tmp_path,
                "insert into datastatus values ('src', 'fakejob', ?, 'OUT', 'READY', ?)",
                dataid,
                "2026-11-27 00:00:00.000000",
            )
        # a file a run (two runs' appends of long lines could interleave)
        (tmp_path / "ran").mkdir()
        script(tmp_path, "work.sh", 'printf "%s" "$dataid" > "ran/$DATAFLOW_RUN"')

    def ran(self, tmp_path):
        return [one.read_bytes().decode() for one in (tmp_path / "ran").iterdir()]

    def expected(self, tmp_path):
        return ["1", "2", "3", *ODD]

    def check(self, cli, tmp_path, outputs):
        for _, err in outputs:
            assert "Traceback" not in err and "error" not in err, err
        assert not (tmp_path / "pwned").exists()
        found = statuses(tmp_path, "work")
        assert len(found) == 43 and set(found.values()) == {"READY"}
        assert len(rows(tmp_path, "select 1 from run")) == 43


class ClockBackfill(Race):
    """A daily job with 80 days resubmitted (a backfill) and today: drains of four slots,
    whose quick jobs make them claim up to sixteen periods at a time. A clock job has no
    candidate rows to lock: each period is guarded by its offer lock alone."""

    name, args, job = "parallel-clock-backfill", ("--all", "--parallel", "4"), "./daily.sh"

    def prepare(self, cli, tmp_path):
        cli.ok("createtables")
        cli.ok("register-dataset", "daily_out")
        cli.ok("register-job", "daily", "--in", "today", "--out", "daily_out")
        today = datetime.date.today()
        first, last = today - datetime.timedelta(days=80), today - datetime.timedelta(days=1)
        cli.ok("resubmit", "daily", "--from", first.isoformat(), "--to", last.isoformat())
        script(tmp_path, "daily.sh", 'echo "$dataid" >> ran')

    def expected(self, tmp_path):
        """The periods of the history, one row each (today's may be tomorrow's)."""
        return [d for (d,) in rows(tmp_path, "select dataid from run")]

    def check(self, cli, tmp_path, outputs):
        assert len(set(self.ran(tmp_path))) >= 81
        runs = rows(tmp_path, "select attempt, status from run")
        assert set(runs) == {(1, "READY")}


class Capped(Race):
    """Drains of short jobs, each claiming a chunk for each of its free slots in one
    transaction (none ahead: under a cap one would hold a place without running): never
    more than max_parallel at a time (test_crash_recovery before)."""

    name, args = "parallel-within-a-cap", ("--all", "--parallel", "3")

    def prepare(self, cli, tmp_path):
        chunks(cli, 90)
        setting(cli, "max_parallel", "4")
        (tmp_path / "live").mkdir()
        script(
            tmp_path,
            "work.sh",
            'touch "live/$dataid"; echo "$dataid $(ls live | wc -l)" >> ran; sleep 0.05; '
            'rm "live/$dataid"',
        )

    def ran(self, tmp_path):
        return [line.split()[0] for line in (tmp_path / "ran").read_text().splitlines()]

    def expected(self, tmp_path):
        return _numbers(90)

    def check(self, cli, tmp_path, outputs):
        seen = [line.split() for line in (tmp_path / "ran").read_text().splitlines()]
        assert max(int(live) for _, live in seen) <= 4
        assert set(statuses(tmp_path, "work").values()) == {"READY"}
        assert len(rows(tmp_path, "select 1 from run")) == 90  # no attempt lost or repeated


class FolderDrain(Race):
    """Drains of a folder of jobs, a chain a -> b -> c of 30 chunks, two slots each
    (test_folder_drain before)."""

    name, args, job = "folder", ("--all", "--parallel", "2"), "./etl"

    def prepare(self, cli, tmp_path):
        _chain(cli, tmp_path, 30)

    def ran(self, tmp_path):
        return (tmp_path / "ledger").read_text().splitlines()

    def expected(self, tmp_path):
        return [f"{job} {n}" for job in "abc" for n in _numbers(30)]


def _python(cli, tmp_path, source: str, *args: str) -> subprocess.Popen:
    (tmp_path / "drainer.py").write_text(source)
    return subprocess.Popen(
        [sys.executable, "drainer.py", *args],
        cwd=tmp_path,
        env=cli.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _thirty_capped(cli, cap: int) -> None:
    """Job ``work`` (src -> dst), max_parallel ``cap``, chunks 1..30 of src READY."""
    cli.ok("createtables")
    cli.ok("dml", "insert into dataset (datasetid) values ('src'), ('dst')")
    cli.ok(
        "dml",
        "insert into job (jobid, itemtype, datasetid, itemvalue) values ('work', 'IN', 'src', null), "
        f"('work', 'OUT', 'dst', null), ('work', 'max_parallel', null, '{cap}')",
    )
    cli.ok(
        "dml",
        "insert into datastatus (dataid, datasetid, jobid, locktype, modified, status) "
        "with recursive s(n) as (select 1 union all select n + 1 from s where n < 30) "
        "select n, 'src', 'feed', 'OUT', now(), 'READY' from s",
    )


def _done(tmp_path) -> list[list[str]]:
    return [line.split() for line in (tmp_path / "done.txt").read_text().splitlines()]


DRAINER = """\
import os, sys, time
from pathlib import Path
from dataflow.run.claim import claims, lifecycle
from dataflow.run.drain.drain import Drain
from dataflow.run.spark.inprocess import ThreadRun
from dataflow.run.claim.jobenv import JobEnv
from dataflow.store import open_store

def work(variables):
    with open("done.txt", "a") as out:
        out.write(f"{variables['dataid']} {os.getpid()} {time.time()} start\\n")
    try:
        time.sleep(0.1)
        if variables["dataid"] == "13":
            raise ValueError("thirteen")
        print(f"chunk {variables['dataid']} in {os.getpid()}")
    finally:
        with open("done.txt", "a") as out:
            out.write(f"{variables['dataid']} {os.getpid()} {time.time()} end\\n")

with open_store(Path("dataflow.db")) as store:
    job = lifecycle.load_job(store, "work")
    claims.prepare(store, "work")
    drain = Drain(store, job, JobEnv({}), ["in-process"], parallel=int(sys.argv[1]),
                  in_process=lambda claim, v: ThreadRun(work, v, lock_fd=claim.lock.fd,
                                                        log_path=claim.logpath))
    summary = drain.run()
print(summary.ready, summary.failed)
"""


class InProcess(Race):
    """Python drains (no Spark) of chunk runs in threads, two slots each, under a
    max_parallel of 3 across them; chunk 13 fails (test_inprocess before)."""

    name = "in-process"

    def prepare(self, cli, tmp_path):
        _thirty_capped(cli, 3)

    def start(self, cli, tmp_path):
        return _python(cli, tmp_path, DRAINER, "2")

    def ran(self, tmp_path):
        return [dataid for dataid, _, _, what in _done(tmp_path) if what == "start"]

    def expected(self, tmp_path):
        return _numbers(30)

    def check(self, cli, tmp_path, outputs):
        done = _done(tmp_path)
        assert len({pid for _, pid, _, _ in done}) == 2  # both processes drained
        assert _most_at_once(done) <= 3  # max_parallel 3 across both processes (each would run 2)
        assert statuses(tmp_path, "work") == {
            str(n): "FAILED" if n == 13 else "READY" for n in range(1, 31)
        }
        reasons = {d: r for d, _, _, _, _, r in history(tmp_path, "work")}
        assert len(history(tmp_path, "work")) == 30 and reasons["13"] == "ValueError: thirteen"
        logs = tmp_path / "dataflow.db.d" / "logs" / "work"
        pid = next(pid for dataid, pid, _, _ in done if dataid == "7")
        assert (logs / "7.1.log").read_text() == f"chunk 7 in {pid}\n"  # its own output only


BATCH_DRAINER = """\
import os, sys, time
from pathlib import Path
from dataflow.run.claim import claims, lifecycle
from dataflow.run.drain.drain import Drain
from dataflow.run.spark.inbatch import BatchChunk, BatchRun
from dataflow.run.spark.inprocess import ThreadRun
from dataflow.run.claim.jobenv import JobEnv
from dataflow.store import open_store

def work(chunks, group):
    part = ",".join(v["dataid"] for v in chunks)
    with open("done.txt", "a") as out:
        out.write(f"{part} {os.getpid()} {time.time()} start\\n")
    try:
        time.sleep(0.1)
        if any(v["dataid"] == "13" for v in chunks):
            raise ValueError("thirteen")
    finally:
        with open("done.txt", "a") as out:
            out.write(f"{part} {os.getpid()} {time.time()} end\\n")

def batch(claimed):
    chunks = [BatchChunk(v, claim.lock.fd, claim.logpath) for claim, v in claimed]
    return BatchRun(work, chunks, group=f"g{claimed[0][0].runid}")

with open_store(Path("dataflow.db")) as store:
    job = lifecycle.load_job(store, "work")
    claims.prepare(store, "work")
    drain = Drain(store, job, JobEnv({}), ["in-process"], parallel=1, batch=4, in_batch=batch,
                  in_process=lambda claim, v: ThreadRun(lambda v: work([v], "one"), v,
                                                        lock_fd=claim.lock.fd,
                                                        log_path=claim.logpath))
    summary = drain.run()
print(summary.ready, summary.failed)
"""


class InBatches(Race):
    """Python drains of chunks run in batches of four, under a max_parallel of 6 (it
    counts chunks); a batch that holds chunk 13 fails and is split until 13 fails alone
    (test_inbatch before). A split batch runs its chunks again within their one claim, so
    the ledger of what ran once is the history: one run a chunk."""

    name = "in-batches"

    def prepare(self, cli, tmp_path):
        _thirty_capped(cli, 6)

    def start(self, cli, tmp_path):
        return _python(cli, tmp_path, BATCH_DRAINER)

    def ran(self, tmp_path):
        return [r[0] for r in history(tmp_path, "work")]

    def expected(self, tmp_path):
        return _numbers(30)

    def check(self, cli, tmp_path, outputs):
        runs = history(tmp_path, "work")
        assert {r[1] for r in runs} == {1}  # a split batch used no attempt
        assert statuses(tmp_path, "work") == {
            str(n): "FAILED" if n == 13 else "READY" for n in range(1, 31)
        }
        assert [r[5] for r in runs if r[5]] == ["ValueError: thirteen"]
        done = _done(tmp_path)
        ready = {d for part, _, _, what in done if what == "end" for d in part.split(",")}
        assert ready == set(_numbers(30))
        # max_parallel counts chunks: 6 across both drains, batches of 4
        assert _most_at_once(done, size=lambda part: len(part.split(","))) <= 6


class RunJobLoops(Race):
    """Processes each calling RunJob (one chunk a call) in a loop of 12 over 40 chunks,
    as overlapping cron lines would (test_runjob before)."""

    name, job = "runjob-loop", "./race.sh"

    def prepare(self, cli, tmp_path):
        cli.ok("createtables")
        cli.ok("dml", "insert into dataset (datasetid) values ('src'), ('dst')")
        cli.ok(
            "dml",
            "insert into job (jobid,itemtype,datasetid) values ('race','IN','src'), ('race','OUT','dst')",
        )
        values = ", ".join(f"('src','fakejob','{n}','OUT','READY',now())" for n in range(1, 41))
        cli.ok("dml", f"insert into datastatus values {values}")
        script(tmp_path, "race.sh", 'echo "$dataid" >> ran')

    def start(self, cli, tmp_path):
        loop = "for i in $(seq 12); do RunJob ./race.sh || exit 1; done"
        return subprocess.Popen(
            ["bash", "-c", loop],
            cwd=tmp_path,
            env=cli.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def expected(self, tmp_path):
        return _numbers(40)

    def check(self, cli, tmp_path, outputs):
        assert all(err == "" for _, err in outputs), [err for _, err in outputs if err]
        found = cli.ok(
            "sql", "select status, count(*) from datastatus where jobid='race' group by 1"
        )
        assert found.lines[-1].split() == ["READY", "40"]


class Spread(Race):
    """Drains spread over worker processes (``--parallel 4 --workers 2``) of the same job
    at once, as two cron lines that overlap; the job's own ``flock`` per chunk writes
    OVERLAP into the ledger if a run starts beside a live one (test_workers before)."""

    name, args = "spread-over-workers", SPREAD[:-1]

    def prepare(self, cli, tmp_path):
        chunks(cli, 80)
        script(tmp_path, "work.sh", JUDGE + "sleep 0.02")

    def ran(self, tmp_path):
        return _no_overlap(tmp_path)

    def expected(self, tmp_path):
        return _numbers(80)

    def check(self, cli, tmp_path, outputs):
        assert [err for _, err in outputs] == ["", ""], outputs
        assert rows(tmp_path, "select count(*) from run where jobid = 'work'") == [(80,)]


class Folding(QuickJobs):
    """Quick jobs whose runs are numbered across a multiple of FOLD_EVERY: a finish folds
    the pending chunks into the summary while the others claim and finish, and a reader
    asks for the status at the end. It counts what a count of every row counts, and
    fewer chunks are pending than were written."""

    name = "folding-quick-jobs"

    def prepare(self, cli, tmp_path):
        import psycopg

        from dataflow.store.postgres.store import FOLD_EVERY

        super().prepare(cli, tmp_path)
        with psycopg.connect(cli.env["DATAFLOW_DB"], autocommit=True) as conn:
            conn.execute(f"ALTER TABLE run ALTER COLUMN runid RESTART WITH {FOLD_EVERY - 75}")

    def check(self, cli, tmp_path, outputs):
        super().check(cli, tmp_path, outputs)
        assert rows(tmp_path, "select count(*) from chunk_pending")[0][0] < 150
        (status,) = json.loads(cli.ok("status", "--json", "work").out)
        assert status["ready"] == 150, status


BOTH = ("sqlite", "postgres")
LONG = (pytest.mark.long,)  # seconds each: make test runs them, the developer's loop not
RACES = [  # (the stores, the race, how many race at once, marks): as the copies had them
    (BOTH, QuickJobs(), 3, ()),
    (BOTH, OddDataids(), 2, ()),
    (BOTH, ClockBackfill(), 3, ()),
    (("sqlite",), Capped(), 3, ()),
    (("postgres",), Capped(), 3, LONG),
    (("sqlite",), FolderDrain(), 3, LONG),
    (("sqlite",), InProcess(), 2, ()),  # its drainer opens the SQLite file
    (("sqlite",), InBatches(), 2, ()),
    (BOTH, RunJobLoops(), 8, (pytest.mark.slow,)),
    (("postgres",), Spread(), 2, LONG),
    (("postgres",), Folding(), 3, LONG),
]


@pytest.mark.parametrize(
    "store_kind, race, racers",
    [
        pytest.param(store, race, racers, marks=marks, id=f"{race.name}-x{racers}-{store}")
        for stores, race, racers, marks in RACES
        for store in stores
    ],
    indirect=["store_kind"],
)
def test_racing_drains_run_each_chunk_once(cli, tmp_path, race, racers):
    race.prepare(cli, tmp_path)
    drains = [race.start(cli, tmp_path) for _ in range(racers)]
    outputs = [drain.communicate(timeout=600) for drain in drains]
    assert [drain.returncode for drain in drains] == [0] * racers, outputs
    ran = Counter(race.ran(tmp_path))
    assert [chunk for chunk, times in ran.items() if times > 1] == []  # none twice
    assert sorted(ran) == sorted(race.expected(tmp_path))  # and every one
    race.check(cli, tmp_path, outputs)
