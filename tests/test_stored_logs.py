"""Every run's log reaches the store, from any host, while it runs; a failed run's reason
carries the job's own last words. Two hosts are simulated as in test_hosts: their own
names and folders of logs (``DATAFLOW_HOST``, ``DATAFLOW_STATE``), one store."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import subprocess
import tempfile
import zlib
from pathlib import Path

import pytest

from support import BIN, history, rows, script, start_runjob, two_hosts, wait_for
from support.browser import Browser, needed
from support.serving import Server, token_file

pytestmark = [pytest.mark.both_stores, pytest.mark.filterwarnings("ignore::ResourceWarning")]

WHY = "bad amount 'N/A' for store 2 on 2026-11-26"


@pytest.fixture
def fleet(cli, tmp_path, address):
    """Hosts A and B of the test's store; job ``work`` (src -> dst), src READY at 1."""
    cli.ok("createtables")
    cli.ok("dml", "insert into dataset (datasetid) values ('src'), ('dst')")
    cli.ok(
        "dml",
        "insert into job (jobid,itemtype,datasetid) values ('work','IN','src'), ('work','OUT','dst')",
    )
    cli.ok("ready", "src", "1")
    return two_hosts(tmp_path, address, 20)


def _stored(tmp_path) -> list[tuple]:
    """(runid, size, kept, done, the bytes kept) of every stored log."""
    found = rows(tmp_path, "select runid, size, kept, done, body from runlog order by runid")
    return [(r, s, k, bool(d), zlib.decompress(bytes(b))) for r, s, k, d, b in found]


def test_host_b_reads_the_log_of_a_run_of_host_a(fleet, tmp_path):
    a, b = fleet
    script(tmp_path, "work.sh", f'echo "loading store 2"\necho "{WHY}" >&2\nexit 3')
    assert a.run_job("./work.sh").exit_code == 3
    shown = b.utility("log", "work", "1")
    assert shown.code == 0, shown.err
    assert "loading store 2" in shown.out and WHY in shown.out
    [(_, size, kept, done, body)] = _stored(tmp_path)
    assert done and size == kept == len(body) and WHY.encode() in body
    # the log file itself stays where it was, on host A
    [(logpath,)] = rows(tmp_path, "select logpath from run")
    assert Path(logpath).read_bytes() == body


def test_a_host_that_keeps_none_in_the_store_is_named_by_the_reader(fleet, tmp_path):
    a, b = fleet
    script(tmp_path, "work.sh", "echo hello")
    assert a.run_job("./work.sh", env={"DATAFLOW_LOG_KEEP_KB": "0"}).exit_code == 0
    assert _stored(tmp_path) == []
    assert a.utility("log", "work", "1").out == "hello\n"  # its own host reads its file
    [(logpath,)] = rows(tmp_path, "select logpath from run")
    Path(logpath).unlink()  # (an SQLite store's hosts share its folder of logs: not here)
    shown = b.utility("log", "work", "1")
    assert shown.code != 0 and shown.out == ""
    assert f"is on host hostA ({logpath})" in shown.err and "Traceback" not in shown.err
    assert len(shown.err.strip().splitlines()) == 1


def test_the_store_keeps_the_last_part_of_a_long_log_and_says_so(fleet, tmp_path):
    a, b = fleet
    script(tmp_path, "work.sh", "for i in $(seq 1000 1999); do echo line-$i; done")
    assert a.run_job("./work.sh", env={"DATAFLOW_LOG_KEEP_KB": "1"}).exit_code == 0
    [(_, size, kept, _, body)] = _stored(tmp_path)
    assert size == 10000 and kept == len(body) == 1024
    shown = b.utility("log", "work", "1").out
    assert shown.startswith("[dataflow: the first 8976 bytes of this log are not kept")
    assert shown.endswith("line-1998\nline-1999\n")


def test_a_password_never_reaches_the_store_copy_nor_the_reason(fleet, tmp_path):
    a, _ = fleet
    secret = "s3cr3t-PaSS-word"
    token = a.ok("crypt", "-e", secret, env={"PASSKEY": "k" * 16}).out.strip()
    a.ok("dml", f"update dataset set encryptedpass = '{token}' where datasetid = 'src'")
    script(tmp_path, "work.sh", 'echo "out $src_password"\necho "err $src_password" >&2\nexit 4')
    assert a.run_job("./work.sh", env={"PASSKEY": "k" * 16}).exit_code == 4
    [(*_, body)] = _stored(tmp_path)
    assert secret.encode() not in body and b"out ***" in body
    [(_, _, _, _, _, reason)] = history(tmp_path, "work")
    assert reason == "exit code 4: err ***"


def test_a_shell_job_s_failure_says_its_last_words(fleet, tmp_path):
    a, _ = fleet
    body = f'echo "reading"\necho "warning: slow disk" >&2\necho "{WHY}" >&2\nexit 3'
    script(tmp_path, "work.sh", body)
    assert a.run_job("./work.sh").exit_code == 3
    [(_, _, _, code, _, reason)] = history(tmp_path, "work")
    assert code == 3 and reason == f"exit code 3: warning: slow disk | {WHY}"
    [shown] = json.loads(a.ok("history", "work", "1", "--json").out)
    assert shown["reason"] == reason


def test_a_shell_job_wrapping_spark_says_its_error_not_spark_s_log_lines(fleet, tmp_path):
    a, _ = fleet
    body = (
        'echo "Traceback? no: ERROR table sales.daily not found" >&2\n'
        'echo "\tat org.apache.spark.sql.Dataset.ofRows(Dataset.scala:91)" >&2\n'
        'echo "26/11/29 12:00:01 INFO SparkContext: Successfully stopped SparkContext" >&2\n'
        'echo "26/11/29 12:00:01 WARN ShutdownHookManager: deleting temp dirs" >&2\nexit 2'
    )
    script(tmp_path, "work.sh", body)
    assert a.run_job("./work.sh").exit_code == 2
    [(*_, reason)] = history(tmp_path, "work")
    assert reason == "exit code 2: Traceback? no: ERROR table sales.daily not found"


def test_a_long_last_word_is_cut_from_its_start(fleet, tmp_path):
    a, _ = fleet
    script(tmp_path, "work.sh", 'printf "x%.0s" $(seq 1 2000) >&2; echo " the end" >&2; exit 1')
    assert a.run_job("./work.sh").exit_code == 1
    [(*_, reason)] = history(tmp_path, "work")
    assert reason.startswith("exit code 1: ...x") and reason.endswith("x the end")
    assert len(reason) == len("exit code 1: ") + 300


def _follower(host) -> subprocess.Popen:
    return subprocess.Popen(
        [str(BIN / "utility.sh"), "log", "--follow", "work", "1"],
        cwd=host.cwd,
        env=host.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_running_log_is_followed_from_another_host(fleet, tmp_path):
    a, b = fleet
    gate = tmp_path / "gate"
    script(
        tmp_path,
        "work.sh",
        f'echo "first part"\nwhile [ ! -e {gate} ]; do sleep 0.05; done\necho "second part"',
    )
    job = start_runjob(a, "./work.sh", env={"DATAFLOW_LOG_EVERY": "0.2"})
    try:
        wait_for(lambda: _stored(tmp_path), 30, "the first piece in the store")
        [(_, _, _, done, body)] = _stored(tmp_path)
        assert not done and body == b"first part\n"
        followers = [_follower(a), _follower(b)]  # its own host reads its file
        for follower in followers:
            assert follower.stdout.readline() == "first part\n"  # while the job still runs
        assert job.poll() is None
        gate.touch()
        for follower in followers:
            out, err = follower.communicate(timeout=60)
            assert follower.returncode == 0, err
            assert out == "second part\n"  # then it ends with the run
    finally:
        gate.touch()
        job.communicate(timeout=60)
    assert job.returncode == 0


def test_purge_removes_a_stored_log_with_its_run(fleet, tmp_path):
    a, _ = fleet
    script(tmp_path, "work.sh", 'echo "try $(cat count 2>/dev/null)"; echo x >> count\nexit 0')
    assert a.run_job("./work.sh").exit_code == 0
    a.ok("resubmit", "work", "1")
    assert a.run_job("./work.sh").exit_code == 0
    first, second = (runid for runid, *_ in _stored(tmp_path))
    a.ok("purge")  # (the chunk's last run stays: it numbers the next attempt)
    assert [runid for runid, *_ in _stored(tmp_path)] == [second]
    assert rows(tmp_path, "select count(*) from run where runid = ?", first) == [(0,)]


def _blob(cli, data: bytes) -> str:
    """``data`` as an SQL literal of the cli's store."""
    if isinstance(cli.address, str):  # PostgreSQL
        return f"'\\x{data.hex()}'::bytea"
    return f"x'{data.hex()}'"


def _on_a_terminal(cli, *args) -> tuple[int, bytes]:
    """``utility`` with its stdout on a pseudo-terminal: its exit code and what it showed."""
    leader, follower = pty.openpty()
    done = subprocess.run(
        [str(BIN / "utility.sh"), *args], cwd=cli.cwd, env=cli.env, stdout=follower, timeout=60
    )
    os.close(follower)
    shown = b""
    with contextlib.suppress(OSError):  # (EIO once all is read)
        while data := os.read(leader, 65536):
            shown += data
    os.close(leader)
    return done.returncode, shown


@pytest.mark.long
def test_a_stored_log_written_by_sql_cannot_drive_the_reader_s_terminal(fleet, tmp_path):
    a, b = fleet
    script(tmp_path, "work.sh", "echo hello")
    assert a.runjob("./work.sh").code == 0
    forged = zlib.compress(b"hello\n\x1b]0;owned\x07\x1b[2Jbye\tend\n")
    [(runid,)] = rows(tmp_path, "select runid from run")
    b.ok("dml", f"update runlog set body = {_blob(b, forged)}, kept = 100, size = 100")
    if not isinstance(b.address, str):  # (the hosts share an SQLite store's folder)
        Path(rows(tmp_path, "select logpath from run")[0][0]).unlink()
    code, shown = _on_a_terminal(b, "log", "work", "1")
    assert code == 0 and b"\x1b" not in shown and b"\x07" not in shown
    assert b"\\x1b]0;owned\\x07\\x1b[2Jbye\tend" in shown
    piped = b("bash", "-c", "utility.sh log work 1 | od -c | head -1")  # piped: as written
    assert "033" in piped.out, (runid, piped)


@pytest.mark.long
def test_a_stored_log_that_inflates_past_what_it_says_is_cut_or_refused(fleet, tmp_path):
    a, b = fleet
    script(tmp_path, "work.sh", "echo hello")
    assert a.runjob("./work.sh").code == 0
    if not isinstance(b.address, str):
        Path(rows(tmp_path, "select logpath from run")[0][0]).unlink()
    bomb = zlib.compress(b"x" * (64 << 20), 9)  # 64 MiB in about 64 KB
    b.ok("dml", f"update runlog set body = {_blob(b, bomb)}, kept = 10, size = 10")
    assert b.utility("log", "work", "1").out == "x" * 10
    b.ok("dml", f"update runlog set body = {_blob(b, bytes.fromhex('0011223344'))}")
    broken = b.utility("log", "work", "1")
    assert broken.code != 0 and broken.err == "error: the store's copy of that log is damaged\n"


def test_a_piece_sent_after_its_run_ended_never_replaces_its_log(store):
    """The sender's look and the run's end race: the end's copy is the one that stays."""
    runid = store.start_run(jobid="j", dataid="d", attempt=1, pid=1, host="h", logpath="p")
    with store.transaction():
        assert store.put_log(runid, 5, 5, zlib.compress(b"first"), False)
    with store.transaction():
        store.end_run(runid, "READY")
        assert store.put_log(runid, 9, 9, zlib.compress(b"first end"), True)
    with store.transaction():  # the sender's late piece
        assert not store.put_log(runid, 5, 5, zlib.compress(b"first"), False)
    assert zlib.decompress(store.run_output(runid)["body"]) == b"first end"
    other = store.start_run(jobid="j", dataid="e", attempt=1, pid=1, host="h", logpath="q")
    with store.transaction():
        store.end_run(other, "FAILED")
        assert not store.put_log(other, 1, 1, zlib.compress(b"x"), False)  # not RUNNING
    assert store.run_output(other) is None


@pytest.mark.long
def test_the_live_board_shows_and_follows_a_log_of_another_host(fleet, tmp_path):
    """The live board served on host B: click a chunk host A runs, show its log (the
    store's copy), follow it as it grows, then read the failure's own words."""
    a, b = fleet
    driver, binary = needed("chromedriver"), needed("chromium")
    gate = tmp_path / "gate"
    body = f'echo "step one"\nwhile [ ! -e {gate} ]; do sleep 0.05; done\necho "{WHY}" >&2\nexit 3'
    script(tmp_path, "work.sh", body)
    job = start_runjob(a, "./work.sh", env={"DATAFLOW_LOG_EVERY": "0.2"})
    read_path, _ = token_file(tmp_path)
    server = Server(b, read_path, "--open-read", "--refresh", "1").start()
    shown = "return document.getElementById('log-text').textContent"
    try:
        wait_for(lambda: _stored(tmp_path), 30, "the first piece in the store")
        with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as profile:
            browser = Browser(driver, binary, profile)
            try:
                browser.open(server.url + "/")
                browser.click('tr[data-job="work"] td:nth-child(2)')
                browser.click("#log-follow")
                browser.click("#log-show")
                wait_for(lambda: browser.run(shown) == "step one\n", 60, "the running log")
                gate.touch()
                wait_for(lambda: WHY in browser.run(shown), 60, "the log followed to its end")
                assert browser.run(shown) == f"step one\n{WHY}\n"
            finally:
                browser.close()
    finally:
        gate.touch()
        job.communicate(timeout=60)
        assert server.stop() == 0
    assert job.returncode == 3
