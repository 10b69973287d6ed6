"""A spread drain short of something, or asked something, as a single drain would be:
short of connections (a role's CONNECTION LIMIT), of descriptors, its sessions ended by
the server, a ``max_parallel`` cap across workers, alerts after RunJob's own session
idled out, a ``dataflow`` package in the jobs' folder (not the workers'), a job's
arguments and ``--validate`` check; and no password or passkey in any command line, log
or job's last words."""

from __future__ import annotations

import json
import os

import pytest

from support import BOUND, host_policy, rows, script, setting, start_runjob, statuses, wait_for
from support.pgserver import login_role
from support.receivers import http_receiver
from support.spreading import (
    JUDGE,
    SPREAD,
    _lines,
    _no_overlap,
    _said_once,
    chunks,
)

on_postgres = pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)


@on_postgres
def test_no_secret_in_any_command_line_nor_log(cli, tmp_path, address):
    """The store's password (in its URL), the passkey and a decrypted password are in no
    command line of RunJob's processes (workers, keepers, jobs), and in no log or output,
    though a job prints its password."""
    url = address.replace("@", ":St0rePw-91@", 1)  # the test server trusts its sessions
    chunks(cli, 6)
    token = cli.ok("crypt", "-e", "Dataset-Pw-55", env={"PASSKEY": "pk-Zq81"}).out.strip()
    cli.ok("dml", f"update dataset set encryptedpass='{token}' where datasetid='src'")
    script(
        tmp_path,
        "work.sh",
        'echo "password is $src_password"; echo "$src_password" >&2\n'
        "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done >> argv\n"
        "env >> envs; tr '\\0' '\\n' < /proc/$PPID/environ >> worker-envs\n"
        "sleep 0.3",
    )
    done = cli.runjob(*SPREAD, env={"PASSKEY": "pk-Zq81", "DATAFLOW_DB": url})
    assert done.code == 0, done
    assert "work: 6 READY" in done.out
    secrets = ("St0rePw-91", "Dataset-Pw-55", "pk-Zq81")
    argv = (tmp_path / "argv").read_text()
    assert "dataflow.run.drain.worker" in argv
    for secret in secrets:
        assert secret not in argv and secret not in done.out + done.err
    # the job's environment: its dataset's password, not the store's nor the passkey;
    # its worker's: no passkey
    envs, worker_envs = (tmp_path / "envs").read_text(), (tmp_path / "worker-envs").read_text()
    assert "src_password=Dataset-Pw-55" in envs and "DATAFLOW_DB=" in envs
    assert "St0rePw-91" not in envs and "pk-Zq81" not in envs + worker_envs
    for folder, _, files in os.walk(tmp_path):
        for name in files:
            path = os.path.join(folder, name)
            if name.endswith((".db", ".db-wal", ".db-shm")) or name in (
                "argv",
                "work.sh",
                "envs",
                "worker-envs",
            ):
                continue
            if not os.path.isfile(path):  # the host's lease holder's socket
                continue
            with open(path, "rb") as file:
                text = file.read()
            for secret in secrets:
                assert secret.encode() not in text, path
    logs = rows(tmp_path, "select count(*) from run where jobid = 'work'")
    assert logs == [(6,)]


@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)
def test_a_failing_jobs_last_words_never_show_its_password(cli, tmp_path):
    """A job that fails with a Python traceback naming its decrypted password: the
    report (the last line of the traceback, told by the worker), the history and the log
    show it masked, in a worker as in RunJob's own drain."""
    chunks(cli, 2)
    token = cli.ok("crypt", "-e", "Dataset-Pw-55", env={"PASSKEY": "pk-Zq81"}).out.strip()
    cli.ok("dml", f"update dataset set encryptedpass='{token}' where datasetid='src'")
    script(
        tmp_path,
        "work.sh",
        "echo 'Traceback (most recent call last):' >&2\n"
        'echo "ValueError: login refused for password $src_password" >&2; exit 1',
    )
    for processes in ("1", "2"):
        cli.ok("dml", "delete from datastatus where jobid = 'work'")
        done = cli.runjob(
            "--all",
            "--parallel",
            "2",
            "--workers",
            processes,
            "./work.sh",
            env={"PASSKEY": "pk-Zq81"},
        )
        assert done.code == 1 and "ValueError: login refused" in done.out, done
        assert "Dataset-Pw-55" not in done.out + done.err, processes
        history = rows(tmp_path, "select * from run where jobid = 'work'")
        assert "Dataset-Pw-55" not in repr(history), processes
    for folder, _, files in os.walk(tmp_path / "state"):
        for name in files:
            with open(os.path.join(folder, name), "rb") as file:
                assert b"Dataset-Pw-55" not in file.read(), name


@on_postgres
@pytest.mark.slow
@pytest.mark.parametrize("whose", ["every", "keepers"])
def test_sessions_ended_by_the_server_cost_a_spread_drain_nothing(cli, tmp_path, address, whose):
    """Every session of the store's database but the test's own (or the keepers' alone,
    found by their backend's advisory locks) ended by the server every 0.2 s while a
    spread drain runs 60 quick chunks: every chunk READY once, no overlap, no traceback."""
    import threading

    import psycopg

    chunks(cli, 60)
    script(tmp_path, "work.sh", JUDGE + "sleep 0.05")
    which = {
        "every": "datname = current_database()",
        "keepers": "pid in (select pid from pg_locks where locktype = 'advisory')",
    }[whose]
    ended = [0]
    stop = threading.Event()

    def ender() -> None:
        with psycopg.connect(address, autocommit=True) as conn:
            while not stop.wait(0.2):
                found = conn.execute(
                    f"select count(pg_terminate_backend(pid)) from pg_stat_activity "
                    f"where {which} and pid <> pg_backend_pid() and datname = current_database()"
                ).fetchone()
                ended[0] += found[0]

    thread = threading.Thread(target=ender)
    thread.start()
    try:
        done = cli.runjob(*SPREAD, timeout=300)
    finally:
        stop.set()
        thread.join()
    assert ended[0] > 0
    assert "Traceback" not in done.err, done.err
    if done.code == 0:
        assert set(statuses(tmp_path, "work").values()) == {"READY"}
    else:  # a store that fails for longer than its patience: exit 3, its error on one line
        assert done.code == 3 and done.err.endswith("\n") and "error: " in done.err, done
        _said_once(done.err)  # (after the store's warning, said once, if a failure passed)
    ran = _no_overlap(tmp_path)
    assert len(ran) == len(set(ran))  # each chunk once


@on_postgres
@pytest.mark.long  # a worker that cannot connect waits out the store's patience
@pytest.mark.parametrize("limit", [1, 2, 3, 4, 6])
def test_a_role_short_of_connections_ends_in_one_line(cli, tmp_path, address, limit):
    """The store's role may hold ``limit`` sessions (``CONNECTION LIMIT``: what a server
    short of max_connections says too): RunJob of a spread drain ends, no traceback, at
    most one warning line (the store failed for a while) and one error line; what it
    claimed is READY or recovered by a later drain."""
    cli.env["DATAFLOW_LIVENESS_TIMEOUT"] = str(BOUND)  # the patience waited out: short
    with login_role(address, f"lim_{os.getpid()}_{limit}", "all", limit) as url:
        chunks(cli, 12)
        script(tmp_path, "work.sh", JUDGE + "sleep 0.1")
        done = cli.runjob(*SPREAD, env={"DATAFLOW_DB": url}, timeout=300)
        _said_once(done.err)
        assert done.code in (0, 1, 3), done
        again = cli.runjob(*SPREAD)
        assert again.code == 0, again
        assert set(statuses(tmp_path, "work").values()) == {"READY"}
        ran = _no_overlap(tmp_path)
        assert len(ran) == len(set(ran)) == 12, ran


@pytest.mark.parametrize(
    "store_kind,files",
    [(kind, files) for kind in ("sqlite", "postgres") for files in (12, 16, 20, 24, 32)],
    indirect=["store_kind"],
)
@pytest.mark.long
def test_a_spread_drain_short_of_descriptors_ends_in_one_line(cli, tmp_path, files):
    """RunJob and its workers under a hard limit of a few dozen open files: at most one
    warning or error line, no traceback, nothing left RUNNING without a process."""
    from support.faults import open_files

    cli.env["DATAFLOW_LIVENESS_TIMEOUT"] = str(BOUND)  # the patience waited out: short
    chunks(cli, 12)
    script(tmp_path, "work.sh", JUDGE + 'sleep 0.05; head -c 100000 /dev/zero | tr "\\0" x')
    done = cli.runjob(*SPREAD, preexec_fn=open_files(files), timeout=300)
    _said_once(done.err)
    ran = len(_lines(tmp_path / "ledger"))
    summary = [line for line in done.out.splitlines() if "work: " in line]
    assert not summary or f"work: {ran} READY, 0 FAILED" in summary[0], (done, ran)
    again = cli.runjob(*SPREAD)
    assert again.code == 0, again
    assert set(statuses(tmp_path, "work").values()) == {"READY"}
    ran = _no_overlap(tmp_path)
    assert len(ran) == len(set(ran)) == 12, ran


@pytest.mark.long  # a spread drain against a cap
@on_postgres
def test_a_cap_holds_across_workers(cli, tmp_path):
    """``max_parallel 1`` under ``--parallel 4 --workers 2``: never two jobs at once (a
    flock every job takes), every chunk READY once, the cap said once."""
    chunks(cli, 10)
    setting(cli, "max_parallel", "1")
    script(
        tmp_path,
        "work.sh",
        JUDGE + 'exec 8>>cap.lock; flock -n 8 || echo "CAP $dataid" >> ledger; sleep 0.1',
    )
    done = cli.runjob(*SPREAD, timeout=300)
    assert done.code == 0 and done.err == "", done
    assert "CAP" not in (tmp_path / "ledger").read_text()
    assert sorted(_no_overlap(tmp_path), key=int) == [str(n) for n in range(1, 11)]
    assert done.out.count("max_parallel") <= 1, done.out


@on_postgres
@pytest.mark.parametrize("where", ["job", "store-wide"])
def test_alerts_of_a_spread_drain_outlive_runjobs_idle_session(cli, tmp_path, address, where):
    """RunJob's own session idles while its workers drain; the server ends it (as an
    idle_session_timeout would). A failure's alert (the job's setting, or the store-wide
    default that RunJob reads from the store) is still sent, the drain is not stopped,
    and RunJob ends as the drain did: exit 1, no error line (a warning that the store
    failed for a while: the workers' sessions were ended too)."""
    import psycopg

    cli.env["DATAFLOW_ALERT_TIMEOUT"] = "60"
    host_policy(tmp_path, '[alerts]\ntargets = ["json://127.0.0.1"]\n')
    chunks(cli, 6)
    script(tmp_path, "work.sh", JUDGE + "until [ -e go ]; do sleep 0.1; done; [ $dataid != 3 ]")
    with http_receiver(lambda _, __, body: json.loads(body)) as receiver:
        receiver.url = f"json://127.0.0.1:{receiver.server_address[1]}/hook"  # type: ignore[attr-defined]
        job = "work" if where == "job" else "*"
        cli.ok(
            "dml",
            f"insert into job (jobid, itemtype, itemvalue) values ('{job}', 'alerts', '{receiver.url}')",
        )
        runjob = start_runjob(cli, *SPREAD)
        wait_for(lambda: len(_lines(tmp_path / "ledger")) == 4, what="four jobs to start")
        with psycopg.connect(address, autocommit=True) as conn:
            conn.execute(
                "select pg_terminate_backend(pid) from pg_stat_activity"
                " where datname = current_database() and pid <> pg_backend_pid()"
            )
        (tmp_path / "go").touch()
        out, err = runjob.communicate(timeout=120)
        assert runjob.returncode == 1, (out, err)  # the workers' ended sessions: a warning
        assert all(line.startswith("warning: the store failed for") for line in err.splitlines())
        assert "work: 5 READY, 1 FAILED" in out
        assert [got["title"] for got in receiver.got] == ["dataflow: work 3 FAILED"]


@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)
def test_a_dataflow_package_in_the_jobs_folder_is_not_the_workers(cli, tmp_path):
    """RunJob (its installed entry point) run in a folder that holds a ``dataflow``
    package of its own (another checkout, another version): its workers run the
    toolkit RunJob runs, not that folder's (``python -m`` puts the working folder first
    on the module path)."""
    import sys

    runjob = os.path.join(os.path.dirname(sys.executable), "RunJob")
    if not os.path.exists(runjob):
        pytest.skip("no installed RunJob entry point")
    chunks(cli, 6)
    script(tmp_path, "work.sh", JUDGE + "sleep 0.2")
    planted = tmp_path / "dataflow" / "run" / "drain"
    planted.mkdir(parents=True)
    for package in (planted, planted.parent, planted.parent.parent):
        (package / "__init__.py").write_text("")
    (planted / "worker.py").write_text("open('shadowed', 'w').write('yes')\n")
    done = cli(runjob, *SPREAD)
    assert not (tmp_path / "shadowed").exists()
    assert done.code == 0 and done.err == "", done
    assert sorted(_no_overlap(tmp_path), key=int) == [str(n) for n in range(1, 7)]


@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)
def test_a_jobs_arguments_and_check_reach_it_as_in_a_single_drain(cli, tmp_path):
    """Arguments that look like a worker's own options (``--job``, ``--events``, ``--``,
    ``-h``) and a ``--validate`` check: the job in a worker gets what it gets in RunJob's
    own drain, and the check fails what it fails."""
    chunks(cli, 6)
    script(tmp_path, "work.sh", 'printf "%s|" "$@" >> "args.$dataid"')
    script(tmp_path, "check.sh", "[ $((dataid % 3)) != 0 ]")
    args = ["--job", "other", "--events", "1", "--", "-h", "--parallel", "9", ""]
    for processes in ("1", "2"):
        cli.ok("dml", "delete from datastatus where jobid = 'work'")
        for n in range(1, 7):
            (tmp_path / f"args.{n}").unlink(missing_ok=True)
        done = cli.runjob(
            "--all",
            "--parallel",
            "4",
            "--workers",
            processes,
            "--validate",
            "./check.sh",
            "./work.sh",
            *args,
        )
        assert done.code == 1 and done.err == "", done
        assert "work: 4 READY, 2 FAILED" in done.out
        for n in range(1, 7):
            assert (tmp_path / f"args.{n}").read_text() == "|".join(args) + "|", processes
        assert statuses(tmp_path, "work") == {
            str(n): "FAILED" if n % 3 == 0 else "READY" for n in range(1, 7)
        }
