"""What keeps a chunk live on one host: a process of its last run that holds the chunk's
lock, carries the run's token, or carries the chunk's jobid, dataid and store; while one
lives, no command starts the chunk beside it (docs/guarantees.md, "On SQLite").
The judge is the job's own ``flock`` per chunk: a second run beside a live process of the
first writes ``OVERLAP`` into the ledger."""

from __future__ import annotations

import fcntl
import os
import signal
import subprocess
import sys
import time

import pytest

from support import (
    HOLD,
    _chunks,
    dump,
    history,
    script,
    start_runjob,
    started_run,
    starts,
    statuses,
    wait_for,
)


def test_deleterun_force_never_starts_the_chunk_beside_a_live_helper(cli, tmp_path):
    """On SQLite, statement 5: --force still never starts the chunk beside them."""
    from support.hosts import _one_job, alive
    from support.lease import HELPER, JOB, _ledger, _pid

    a = b = cli  # on PostgreSQL the lease holds (the same test on two hosts passes)
    _one_job(a, tmp_path, JOB + HELPER + "\nexit 1")
    assert a.runjob("./work.sh").code == 1
    helper = _pid(tmp_path, "helper.pid")
    try:
        refused = a.utility("deleterun", "work", "1")
        assert refused.code != 0 and "being run now" in refused.err, refused
        a.ok("deleterun", "--force", "work", "1")
        b.runjob("./work.sh")
        assert alive(helper)
        assert not [line for line in _ledger(tmp_path) if line.startswith("OVERLAP")]
    finally:
        (tmp_path / "go").touch()


def test_a_token_rewritten_by_a_store_writer_never_starts_a_chunk_beside_its_helper(cli, tmp_path):
    """On SQLite, statement 3: a retry of a FAILED chunk waits until no process of the
    failed run lives."""
    from support.hosts import _one_job, alive
    from support.lease import HELPER, JOB, RETRY, _ledger, _pid

    _one_job(cli, tmp_path, JOB + HELPER + "\nexit 1")
    cli.ok("dml", RETRY)
    assert cli.runjob("./work.sh").code == 1
    helper = _pid(tmp_path, "helper.pid")
    try:
        assert "no suitable data" in cli.runjob("./work.sh").out  # the retry waits
        cli.ok("dml", "update run set token = 'something else'")
        cli.runjob("./work.sh")
        assert alive(helper)
        assert not [line for line in _ledger(tmp_path) if line.startswith("OVERLAP")]
    finally:
        (tmp_path / "go").touch()


@pytest.mark.both_stores
@pytest.mark.long
def test_a_process_in_the_jobs_group_keeps_its_chunk_live(pair, tmp_path):
    """The boundary: only a process that clears its environment *and* closes the lock's
    descriptor *and* leaves the job's process group is not seen (statements 1 and 5)."""
    import sys

    from support.hosts import _one_job, alive
    from support.lease import JOB, _ledger

    a, b = pair
    child = (  # no setsid: it stays in the job's process group
        f"(exec env -u DATAFLOW_RUN {sys.executable} -c 'import os, time\n"
        "os.closerange(3, 9); os.closerange(10, 65536)\n"
        'open("child.pid", "w").write(f"{os.getpid()}\\n")\n'
        'while not os.path.exists("go"): time.sleep(0.1)\' </dev/null >/dev/null 2>&1) &\n'
        "until [ -s child.pid ]; do sleep 0.05; done\n"
    )
    _one_job(a, tmp_path, JOB + child)
    assert a.runjob("./work.sh").code == 0
    pid = int((tmp_path / "child.pid").read_text())
    try:
        assert alive(pid)
        a.utility("resubmit", "work", "1")
        b.runjob("./work.sh")
        assert not [x for x in _ledger(tmp_path) if x.startswith("OVERLAP")]
    finally:
        (tmp_path / "go").touch()


DETACH = (
    "python3 -c \"import subprocess; p = subprocess.Popen(['sleep', '300'], "
    "start_new_session=True, close_fds=True, stdout=subprocess.DEVNULL, "
    "stderr=subprocess.DEVNULL); open('detached', 'w').write(str(p.pid))\""
)


def test_a_symlinked_store_sees_the_live_run(chain, tmp_path):
    runjob = started_run(chain, tmp_path)
    (tmp_path / "alias.db").symlink_to("dataflow.db")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "far.db").symlink_to(tmp_path / "dataflow.db")
    for db in ("alias.db", "elsewhere/far.db", "./elsewhere/../dataflow.db"):
        again = chain.runjob("--db", db, "./work.sh")
        assert "dead run" not in again.out, again
        assert chain.ok("--db", db, "recover").out.endswith("0 abandoned chunks recovered\n")
    assert statuses(tmp_path, "work")["1"] == "RUNNING"
    (tmp_path / "release").touch()
    assert runjob.wait(timeout=30) == 0
    assert starts(tmp_path).count("1") == 1
    where = chain.ok("--db", "alias.db", "where").out
    assert str(tmp_path / "dataflow.db-locks") in where and str(tmp_path / "dataflow.db.d") in where


def test_deleting_the_logs_folder_never_makes_a_live_run_look_dead(chain, tmp_path):
    import shutil

    runjob = started_run(chain, tmp_path)
    shutil.rmtree(tmp_path / "dataflow.db.d")
    again = chain.runjob("./work.sh")
    assert "dead run" not in again.out
    assert statuses(tmp_path, "work")["1"] == "RUNNING"
    (tmp_path / "release").touch()
    assert runjob.wait(timeout=30) == 0
    assert starts(tmp_path).count("1") == 1


def test_endjob_deleterun_resubmit_hold_refuse_a_live_chunk(chain, tmp_path):
    """endjob and deleterun name the live run and take --force; resubmit names it too, and
    hold waits."""
    runjob = started_run(chain, tmp_path)
    before = dump(tmp_path)
    for argv in (("endjob", "work", "1", "READY"), ("deleterun", "work", "1")):
        refused = chain.utility(*argv)
        assert refused.code != 0, refused
        assert f"work 1 is being run now (pid {runjob.pid} on host " in refused.err
        assert "--force" in refused.err and refused.err.count("\n") == 1
    for argv in (("resubmit", "work", "1"), ("resubmit", "work", "1", "--cascade")):
        refused = chain.utility(*argv)
        assert refused.code != 0, refused
        assert f"work 1 is being run now (pid {runjob.pid} on host " in refused.err
        assert refused.err.count("\n") == 1
    refused = chain.utility("hold", "work", "1")
    assert refused.code != 0 and refused.err.startswith("error: work 1 is RUNNING"), refused
    assert dump(tmp_path) == before
    chain.ok("endjob", "work", "1", "FAILED", "--force")
    assert statuses(tmp_path, "work")["1"] == "FAILED"
    (tmp_path / "release").touch()
    runjob.wait(timeout=30)


def test_a_detached_helper_keeps_its_chunk_live(chain, tmp_path):
    script(tmp_path, "work.sh", f'echo "$dataid" >> starts; [ "$dataid" = 1 ] && {DETACH}; exit 0')
    assert chain.runjob("./work.sh").code == 0  # the job ends READY; its helper works on
    assert (tmp_path / "detached").exists()
    helper = int((tmp_path / "detached").read_text())  # this test's helper, no other
    try:
        refused = chain.utility("endjob", "work", "1", "RESUBMIT")  # names what lives
        assert f"work 1 is being run now (pid {helper} on host " in refused.err, refused
        assert "its RunJob (pid " in refused.err and refused.code == 2
        chain.ok("endjob", "work", "1", "RESUBMIT", "--force")  # a rerun is asked all the same
        for _ in range(2):
            assert "with dataid 1" not in chain.runjob("./work.sh").out
        assert starts(tmp_path).count("1") == 1
    finally:
        os.kill(helper, signal.SIGKILL)
    wait_for(lambda: "with dataid 1" in chain.runjob("./work.sh").out, what="the rerun")
    assert starts(tmp_path).count("1") == 2


def test_a_run_that_left_many_helpers_names_five_of_them(chain, tmp_path):
    """A refusal names the live processes of a run whose RunJob has ended: the first five
    of them, and ``...`` past five (chunk 1 leaves five helpers, chunk 2 six)."""
    spawn = (
        "python3 -c \"import subprocess, sys; [print(subprocess.Popen(['sleep', '300'], "
        "start_new_session=True, close_fds=True, stdout=subprocess.DEVNULL, "
        'stderr=subprocess.DEVNULL).pid) for _ in range(int(sys.argv[1]))]"'
    )
    script(tmp_path, "work.sh", f'[ "$dataid" = 3 ] || {spawn} $((4 + dataid)) > "helpers.$dataid"')
    assert chain.runjob("--all", "./work.sh").code == 0  # each job ends READY at once
    helpers = {d: sorted(map(int, (tmp_path / f"helpers.{d}").read_text().split())) for d in "12"}
    try:
        for dataid, more in (("1", ""), ("2", ", ...")):
            refused = chain.utility("endjob", "work", dataid, "RESUBMIT")
            listed = ", ".join(map(str, helpers[dataid][:5])) + more
            assert f"work {dataid} is being run now (pids {listed} on host " in refused.err, refused
            assert "its RunJob (pid " in refused.err and refused.code == 2
    finally:
        for pid in helpers["1"] + helpers["2"]:
            os.kill(pid, signal.SIGKILL)


def test_a_producer_never_rewrites_a_chunk_its_consumer_is_reading(chain, tmp_path):
    """work (src -> dst) then read (dst -> out): resubmit work 1 --cascade while read
    reads dst/1; work waits for read to end, and read, its input stale, ends RESUBMIT
    and reruns on the rebuilt chunk."""
    chain.ok("dml", "delete from datastatus where dataid in ('2', '3')")
    chain.ok("dml", "insert into dataset (datasetid) values ('out')")
    chain.ok(
        "dml",
        "insert into job (jobid,itemtype,datasetid) values ('read','IN','dst'), ('read','OUT','out')",
    )
    script(tmp_path, "work.sh", 'echo "work $dataid" >> starts')
    assert chain.runjob("./work.sh").code == 0
    script(tmp_path, "read.sh", f'echo "read $dataid" >> starts; {HOLD}')
    reader = start_runjob(chain, "./read.sh")
    wait_for(lambda: (tmp_path / "started").exists(), what="the consumer to start")

    cascade = chain.ok("resubmit", "work", "1", "--cascade")
    assert "RESUBMIT when it ends" in cascade.out
    for _ in range(2):  # read is reading dst/1: work waits (it neither runs nor fails)
        waited = chain.runjob("./work.sh")
        assert waited.code == 0 and "no suitable data" in waited.out, waited
    (tmp_path / "release").touch()
    assert reader.wait(timeout=30) == 0
    assert statuses(tmp_path, "read") == {"1": "RESUBMIT"}

    (tmp_path / "started").unlink()
    script(tmp_path, "read.sh", 'echo "read $dataid" >> starts')
    assert "with dataid 1" in chain.runjob("./work.sh").out
    assert "with dataid 1" in chain.runjob("./read.sh").out
    assert starts(tmp_path) == ["work", "1", "read", "1", "work", "1", "read", "1"]
    assert statuses(tmp_path, "read") == {"1": "READY"}


@pytest.mark.both_stores
def test_a_consumer_asked_to_rerun_while_it_ran_says_its_chunk_is_resubmit(cli, tmp_path):
    _chunks(cli)
    cli.ok("register-dataset", "out")
    cli.ok("register-job", "B", "--in", "dst", "--out", "out")
    script(tmp_path, "A.sh", "exit 0")
    assert cli.runjob("./A.sh").code == 0
    script(tmp_path, "B.sh", "touch started; while [ ! -e release ]; do sleep 0.05; done")
    consumer = start_runjob(cli, "./B.sh")
    wait_for(lambda: (tmp_path / "started").exists(), what="the consumer to start")
    assert "RESUBMIT when it ends" in cli.ok("resubmit", "A", "1", "--cascade").out
    (tmp_path / "release").touch()
    out, _ = consumer.communicate(timeout=60)
    assert consumer.returncode == 0
    assert "1 rows updated to RESUBMIT for B and 1" in out and "to READY" not in out, out
    ((dataid, _, status, exitcode, _, reason),) = history(tmp_path, "B")
    assert (dataid, status, exitcode) == ("1", "READY", 0)  # the run itself succeeded
    assert reason.startswith("its chunk set to RESUBMIT: resubmit --cascade of A 1")


def test_copy_store_refuses_a_finished_run_whose_leftover_holds_its_lock(chain, tmp_path):
    """A run ended READY, but a process it left (its own session, an empty environment:
    no token) still holds the chunk's lock: copy-store counts the run as live, as every
    RunJob does, and copies only with --force."""
    helper_line = "env -i setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $! > helper.pid"
    script(tmp_path, "work.sh", f'[ "$dataid" = 1 ] && {{ {helper_line}; }}; exit 0')
    assert chain.runjob("./work.sh").code == 0
    helper = int((tmp_path / "helper.pid").read_text())
    try:
        assert statuses(tmp_path, "work")["1"] == "READY"
        refused = chain.utility("copy-store", "--to", str(tmp_path / "copy.db"))
        assert refused.code == 2 and "1 run of this store still live (work 1: " in refused.err
    finally:
        os.kill(helper, signal.SIGKILL)
    wait_for(
        lambda: chain.utility("copy-store", "--to", str(tmp_path / "copy.db")).code == 0,
        what="the copy once the leftover has ended",
    )


# a process of a run holding its job's flock, with memory enough that letting it go
# takes a while once it is killed (its files are closed only after); with "threads", its
# main thread ends at once, another goes on (a JVM's may end first, as a C program's may)
BIG_PROCESS = """
import ctypes, fcntl, sys, threading, time
lock = open(sys.argv[1], "w")
fcntl.flock(lock, fcntl.LOCK_EX)
memory = bytearray(b"x") * (512 << 20)  # written: each page is the process's own
open(sys.argv[2], "w").close()
if sys.argv[3] == "threads":
    threading.Thread(target=time.sleep, args=(300,)).start()
    ctypes.CDLL(None).pthread_exit(None)
time.sleep(300)
"""


@pytest.mark.parametrize("threads", ["one thread", "threads"])
@pytest.mark.parametrize("look", ["carrying", "chunks_alive", "kill"])
def test_a_process_ending_slowly_keeps_its_run_live_until_its_files_are_closed(
    tmp_path, look, threads
):
    """A killed process lets go of its memory, its environment with it, before it closes
    its files: for that while (longer for a bigger process, on a busier host) nothing
    names its run but the locks it still holds. No look at the processes calls its run
    dead, and no fence ends, before its files are closed (it failed: an overlap in
    test_chaos on a loaded machine). A process whose main thread has ended is seen
    through its other threads, alive or ending."""
    from dataflow.run.process import processes

    token = processes.new_token()
    store = processes.new_token()  # this test's own: parallel ones' processes are not its
    env = {**os.environ, processes.VARIABLE: token, processes.STORE_VARIABLE: store}
    env.update(jobid="work", dataid="1")
    flock, ready = tmp_path / "flock", tmp_path / "ready"
    command = [sys.executable, "-c", BIG_PROCESS, str(flock), str(ready), threads]
    child = subprocess.Popen(command, env=env)
    try:
        wait_for(ready.exists, timeout=120, what="the process's memory")
        time.sleep(0.2)  # its main thread ended (with threads)
        if look == "kill":
            processes.kill({token})  # returns once nothing of the run is left
        else:
            alive = {
                "carrying": lambda: processes.carrying({token}),
                "chunks_alive": lambda: processes.chunks_alive({"none": ("work", "1")}, store),
            }[look]
            assert alive()
            os.kill(child.pid, signal.SIGKILL)
            wait_for(lambda: not alive(), timeout=120, what="the process's end")
        with open(flock) as file:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)  # raises while the lock is held
    finally:
        child.kill()
        child.wait()
