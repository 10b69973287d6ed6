"""RunJob end to end: the environment a job receives, daily jobs, several datasets, races."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
from collections import Counter

import pytest

from dataflow.dataids import today
from support import BIN, STAMP, host_policy, ready, register, script
from support.faults import open_files

pytestmark = pytest.mark.both_stores
DUMP_ENV = 'python3 -c "import json, os; print(json.dumps(dict(os.environ)))"'


@pytest.fixture
def env_job(cli, tmp_path):
    host_policy(tmp_path, '[env]\nallow = ["mode", "region"]\n')  # names its rows give
    cli.ok("createtables")
    script(tmp_path, "dump.sh", DUMP_ENV)
    return cli


HOSTILE = [
    "$(touch pwned)",
    "`touch pwned`",
    'it\'s "quoted"',
    "two\nlines",
    "a;touch pwned",
    " spaced  ",
]


@pytest.mark.long
def test_metadata_arrives_verbatim_and_runs_nothing(env_job, tmp_path):
    register(env_job, "dump", ["src"], ["dst"], extras=[("mode", "$(touch pwned)")])
    for i, column in enumerate(("hostname", "database", "schemaname", "tablename", "username")):
        value = HOSTILE[i].replace("'", "''")
        env_job.ok("dml", f"update dataset set {column} = '{value}' where datasetid = 'src'")
    ready(env_job, "src", "1")
    ran = env_job.runjob("./dump.sh")
    assert ran.code == 0, ran
    env = json.loads(ran.lines[1])
    assert [
        env[f"src_{c}"] for c in ("hostname", "database", "schemaname", "tablename", "username")
    ] == HOSTILE[:5]
    assert env["src_HOSTNAME"] == HOSTILE[0] and env["mode"] == "$(touch pwned)"
    assert not (tmp_path / "pwned").exists()


@pytest.mark.long
def test_environment_contents(env_job, tmp_path):
    token = env_job.ok("crypt", "-e", "s3cret", env={"PASSKEY": "k"}).out.strip()
    register(env_job, "dump", ["a", "b"], ["x", "y"], extras=[("region", "eu"), ("retries", "0")])
    env_job.ok(
        "dml", f"update dataset set hostname='db1', encryptedpass='{token}' where datasetid='a'"
    )
    ready(env_job, "a", "7")
    ready(env_job, "b", "7")
    script(tmp_path, "dump.sh", DUMP_ENV + ' > env.json; echo "password is $a_password"')
    ran = env_job.runjob("./dump.sh", env={"PASSKEY": "k", "x_hostname": "stale value"})
    assert ran.code == 0, ran
    assert ran.lines[1] == "password is ***"  # what a job prints of a password is masked
    env = json.loads((tmp_path / "env.json").read_text())
    assert (env["dataid"], env["jobid"], env["region"]) == ("7", "dump", "eu")
    assert (env["a_hostname"], env["a_HOSTNAME"], env["a_itemtype"], env["x_ITEMTYPE"]) == (
        "db1",
        "db1",
        "IN",
        "OUT",
    )
    assert env["a_password"] == env["a_PASSWORD"] == "s3cret"
    assert env["a_encryptedpass"] == token
    assert "b_password" not in env
    assert env["x_hostname"] == ""  # a NULL column is empty, never a stale value from outside
    assert "PASSKEY" not in env and "retries" not in env
    assert "s3cret" not in ran.out + ran.err
    assert ran.lines[-1] == "2 rows updated to READY for dump and 7 2 IN file-local locks released"
    assert env["DATAFLOW_ATTEMPT"] == "1" and len(env["DATAFLOW_RUN"]) == 32
    env_job.ok("resubmit", "dump", "7")
    assert env_job.runjob("./dump.sh", env={"PASSKEY": "k"}).code == 0
    again = json.loads((tmp_path / "env.json").read_text())
    assert again["DATAFLOW_ATTEMPT"] == "2" and again["DATAFLOW_RUN"] != env["DATAFLOW_RUN"]


@pytest.mark.long
def test_natural_order_and_catch_up(env_job, tmp_path):
    register(env_job, "dump", ["src"], ["dst"])
    ready(env_job, "src", "10", "9", "2", "1.0", "10.0")
    seen = []
    for _ in range(6):
        ran = env_job.runjob("./dump.sh")
        assert ran.code == 0
        if "Launching" in ran.out:
            seen.append(json.loads(ran.lines[1])["dataid"])
    assert seen == ["1.0", "2", "9", "10", "10.0"]


def test_daily_job_runs_once_a_day(env_job, tmp_path):
    register(env_job, "dump", ["today"], ["daily"])
    first = env_job.runjob("./dump.sh")
    env = json.loads(first.lines[1])
    assert env["dataid"] == today()  # the host's system zone's date, whatever $TZ says
    assert not any(k.startswith("today_") for k in env)
    assert "no suitable data" in env_job.runjob("./dump.sh").out


def test_script_found_on_path_and_without_shebang(env_job, tmp_path):
    register(env_job, "plain", ["src"], ["dst"])
    ready(env_job, "src", "1")
    (tmp_path / "plain.sh").write_text('echo "no shebang, dataid $dataid"\n')
    (tmp_path / "plain.sh").chmod(0o755)
    ran = env_job.runjob("plain.sh")
    assert ran.code == 0 and "no shebang, dataid 1" in ran.out


def test_drain_prints_a_line_per_chunk_and_a_summary(env_job, tmp_path):
    register(env_job, "drainme", ["src"], ["dst"])
    ready(env_job, "src", "1", "2", "3")
    script(tmp_path, "drainme.sh", '[ "$dataid" != 2 ] || exit 4; echo "quiet $dataid"')
    ran = env_job.runjob("--all", "./drainme.sh")
    assert ran.code == 1  # one chunk failed
    lines = ran.lines
    assert len(lines) == 4 and "quiet" not in ran.out  # job output goes to the log only
    assert re.fullmatch(rf"{STAMP}: drainme 1 READY \(attempt 1, \d+\.\d s\)", lines[0])
    assert re.fullmatch(
        rf"{STAMP}: drainme 2 FAILED \(attempt 1, \d+\.\d s\) exit code 4; log: .*/logs/drainme/2\.1\.log",
        lines[1],
    )
    assert re.fullmatch(
        rf"{STAMP}: drainme: 2 READY, 1 FAILED in \d+\.\d s "
        r"\(3 chunks, 3 attempts, [\d.]+/s\); 0 waiting",
        lines[3],
    )


def test_drain_on_a_terminal_draws_a_progress_bar(env_job, tmp_path):
    register(env_job, "drainme", ["src"], ["dst"])
    ready(env_job, "src", "1", "2", "3")
    script(tmp_path, "drainme.sh", "true")
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [str(BIN / "RunJob"), "--parallel", "2", "./drainme.sh"],
        cwd=tmp_path,
        env=env_job.env,
        stdout=follower,
        stderr=follower,
    )
    os.close(follower)
    output = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:  # the terminal closed: the process is done
            break
        if not chunk:
            break
        output += chunk
    assert process.wait(timeout=60) == 0
    text = output.decode()
    assert "drainme [##########" in text and "done 3 failed 0 running 0 left 0" in text
    assert re.search(r"drainme: 3 READY, 0 FAILED in \d+\.\d s \(3 chunks, 3 attempts,", text)


@pytest.mark.long
def test_a_drain_short_of_descriptors_runs_fewer_jobs_at_once_and_all_of_them(env_job, tmp_path):
    """``--parallel 40`` under a hard limit of 80 open files: a job that cannot start for
    want of descriptors makes the drain go on with those it runs, said in one line; every
    chunk runs once (it stopped with an error, leaving its started chunks RUNNING)."""
    register(env_job, "work", ["src"], ["dst"])
    ready(env_job, "src", *map(str, range(1, 31)))
    script(tmp_path, "work.sh", 'echo "$dataid" >> ran.log; sleep 0.2')
    done = env_job.runjob(
        "--all", "--parallel", "40", "./work.sh", preexec_fn=open_files(80), timeout=300
    )
    assert done.code == 0, done.err
    warning = done.err.splitlines()
    assert len(warning) == 1, done.err
    assert re.fullmatch(
        r"warning: cannot run \./work\.sh: Too many open files; at most \d+ jobs at once",
        warning[0],
    )
    assert Counter((tmp_path / "ran.log").read_text().split()) == Counter(
        str(i) for i in range(1, 31)
    )
    assert env_job.ok("sql", "select distinct status from datastatus").lines[-1] == "READY"


def test_a_drain_raises_its_soft_limit_of_open_files_for_its_slots(env_job, tmp_path):
    """A soft limit of 128 (the hard one above it) is raised for ``--parallel 100``."""
    register(env_job, "work", ["src"], ["dst"])
    ready(env_job, "src", "1", "2")
    # each job: the limit it inherited, and the slots of the drain that started it (RunJob's
    # 100, or on PostgreSQL a worker's share of them)
    script(
        tmp_path,
        "work.sh",
        "echo \"$(ulimit -Sn) $(tr '\\0' ' ' < /proc/$PPID/cmdline)\" >> limits",
    )
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    done = env_job.runjob(
        "--all", "--parallel", "100", "./work.sh", preexec_fn=open_files(128, hard), timeout=300
    )
    assert done.code == 0 and done.err == "", done.err
    lines = (tmp_path / "limits").read_text().splitlines()
    assert len(lines) == 2
    for line in lines:  # one write each: two jobs at once do not mix their lines
        limit, parent = line.split(" ", 1)
        slots = int(parent.split("--parallel ")[1].split()[0])
        assert 0 < slots <= 100 and limit == str(min(64 + slots * 12, hard)), line


def test_a_drain_raises_its_soft_limit_before_it_claims_its_slots_chunks(env_job, tmp_path):
    """``--parallel 200`` under a soft limit of 128 (the hard one well above): the drain's
    first claim takes a lock descriptor for each of 150 chunks, so the limit is raised
    before it, not with the first job process: every chunk runs, no warning."""
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard != resource.RLIM_INFINITY and hard < 64 + 200 * 12:
        pytest.skip(f"a hard limit of open files of {hard}")
    register(env_job, "work", ["src"], ["dst"])
    env_job.ok(
        "dml",
        "insert into datastatus with recursive n(x) as (select 1 union all select x + 1"
        " from n where x < 150) select 'src', 'fakejob', cast(x as varchar(20)), 'OUT',"
        " 'READY', now() from n",
    )
    script(tmp_path, "work.sh", 'echo "$dataid" >> ran.log')
    done = env_job.runjob(
        "--all", "--parallel", "200", "./work.sh", preexec_fn=open_files(128, hard), timeout=300
    )
    assert done.code == 0 and done.err == "", done
    assert Counter((tmp_path / "ran.log").read_text().split()) == Counter(
        str(i) for i in range(1, 151)
    )
