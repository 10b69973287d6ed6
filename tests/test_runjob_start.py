"""What can be checked before a claim is checked before it, and a job that cannot start
gives its claim back: a missing interpreter, a ``.py`` job that is not Python, a check
that is not executable, a dataid no environment can carry, a script name that is not
UTF-8, a timeout that is not a number: one line, no chunk spent (the store's ``.dump``
as it was). What a job receives is only what it should: no passkey file, and no standard
descriptor taken by the store."""

from __future__ import annotations

import os
import sqlite3
import subprocess
from contextlib import closing

import pytest

from dataflow.dataids import natural_key
from support import (
    BIN,
    _chunks,
    dump,
    refused,
    rows,
    script,
    setting,
    shell,
    state,
)


def test_a_missing_interpreter_is_named_and_costs_no_chunk(chain, tmp_path):
    (tmp_path / "work.sh").write_text("#!/nonexistent/interp\necho hi\n")
    (tmp_path / "work.sh").chmod(0o755)
    before = dump(tmp_path)
    refused = chain.runjob("./work.sh")
    assert refused.code != 0, refused
    assert refused.err == (
        "error: cannot run ./work.sh: its interpreter /nonexistent/interp (first line) is not there\n"
    )
    assert dump(tmp_path) == before


@pytest.mark.parametrize(
    "source, says",
    [
        ("print('hi'\n", "it is not valid Python: '(' was never closed (line 1)"),
        ("x = 1\n  y = 2\n", "it is not valid Python: unexpected indent (line 2)"),
        ("x = 1\0\n", "it is not valid Python: source code string cannot contain null bytes"),
    ],
)
def test_a_py_job_that_is_not_python_costs_no_chunk(chain, tmp_path, source, says):
    """Checked before the claim (spark-submit would fail only after starting a JVM);
    like most .py files, the job is not executable, and need not be."""
    (tmp_path / "work.py").write_text(source)
    before = dump(tmp_path)
    refused = chain.runjob("./work.py")
    assert refused.code != 0, refused
    assert refused.err == f"error: cannot run ./work.py: {says}\n"
    assert dump(tmp_path) == before


def test_a_validate_check_in_python_is_executed_so_must_be_executable(chain, tmp_path):
    """Only a .py *job* goes to spark-submit; a --validate check is run as a program."""
    script(tmp_path, "work.sh", "true")
    (tmp_path / "check.py").write_text("print('ok')\n")
    before = dump(tmp_path)
    refused = chain.runjob("--validate", "./check.py", "./work.sh")
    assert refused.err == (
        "error: cannot run ./check.py: it is not executable (chmod +x ./check.py)\n"
    ), refused
    assert dump(tmp_path) == before


def test_a_job_that_cannot_start_gives_its_claim_back(chain, tmp_path):
    """An interpreter that is there but cannot be executed (a folder) fails at exec time."""
    (tmp_path / "interp").mkdir()
    (tmp_path / "work.sh").write_text(f"#!{tmp_path}/interp\n")
    (tmp_path / "work.sh").chmod(0o755)
    before = rows(tmp_path, "select * from datastatus order by 1, 2, 3")
    failed = chain.runjob("./work.sh")
    assert failed.code != 0 and failed.err.startswith("error: cannot run"), failed
    assert "Traceback" not in failed.err
    assert rows(tmp_path, "select * from datastatus order by 1, 2, 3") == before
    assert rows(tmp_path, "select count(*) from run") == [(0,)]


def test_a_dataid_no_environment_can_carry_is_skipped(chain, tmp_path):
    with sqlite3.connect(tmp_path / "dataflow.db") as conn:
        conn.create_function("now", 0, lambda: "2026-01-01 00:00:00")
        conn.create_function("dataflow_natkey", 1, natural_key)
        conn.execute("insert into datastatus values ('src','up',?,'OUT','READY',now())", ("0\0x",))
    script(tmp_path, "work.sh", 'echo "$dataid" >> starts')
    ran = chain.runjob("./work.sh")
    assert ran.code == 0 and "with dataid 1" in ran.out, ran
    assert "dataid '0\\x00x' of work cannot name a chunk" in ran.err and "Traceback" not in ran.err


def test_a_script_name_that_is_not_utf8_is_one_line(chain, tmp_path):
    before = dump(tmp_path)
    done = subprocess.run(
        [str(BIN / "RunJob"), b"./\xff.sh"], cwd=tmp_path, env=chain.env, capture_output=True
    )
    assert done.returncode == 2
    assert done.stderr == b"error: argument 1 ('./\\xff.sh') is not valid UTF-8 text\n"
    assert dump(tmp_path) == before


def test_a_timeout_that_is_not_a_number_is_refused(chain, tmp_path):
    script(tmp_path, "work.sh", "true")
    for value in ("nan", "inf", "-1"):
        setting(chain, "timeout", value)
        result = chain.runjob("./work.sh")
        assert result.code != 0 and "setting timeout must be a number" in result.err, result
        assert result.err.count("\n") == 1
    assert rows(tmp_path, "select count(*) from run") == [(0,)]


def test_the_job_never_receives_the_passkey_file(chain, tmp_path):
    keyfile = tmp_path / "key"
    keyfile.write_text("sesame\n")
    script(tmp_path, "work.sh", 'echo "[${PASSKEY_FILE-}][${PASSKEY-}]" > seen')
    assert chain.runjob("./work.sh", env={"PASSKEY_FILE": str(keyfile)}).code == 0
    assert (tmp_path / "seen").read_text() == "[][]\n"


def test_no_standard_descriptor_is_ever_taken_by_the_store(chain, tmp_path):
    """With stdout closed the store would otherwise be opened as descriptor 1."""
    script(tmp_path, "work.sh", "ls -l /proc/$PPID/fd > fds")
    assert shell(chain, f"{BIN}/RunJob ./work.sh >&- 2>&-").returncode == 0
    # RunJob (the job's parent) has /dev/null where stdout and stderr were
    fds = {
        line.split()[-3]: line.split()[-1]
        for line in (tmp_path / "fds").read_text().splitlines()[1:]
    }
    assert fds["1"] == "/dev/null" and fds["2"] == "/dev/null"
    assert os.path.exists(tmp_path / "dataflow.db")


@pytest.mark.parametrize("store_kind", ["postgres"], indirect=True)
@pytest.mark.both_stores
@pytest.mark.long
def test_a_dry_run_and_a_claim_given_back_take_no_run_number(cli, tmp_path):
    _chunks(cli)
    script(tmp_path, "A.sh", "exit 0")
    assert cli.runjob("./A.sh").code == 0

    def sequence():
        return rows(tmp_path, "select last_value, is_called from run_runid_seq")

    before, taken = state(tmp_path), sequence()
    assert cli.runjob("--dry-run", "./A.sh").out.startswith("would claim dataid 2")
    (tmp_path / "interp").mkdir()  # an interpreter that fails only at exec, after the claim
    (tmp_path / "A.sh").write_text(f"#!{tmp_path}/interp\n")
    refused(cli.runjob("./A.sh"), says="cannot run")
    assert state(tmp_path) == before and sequence() == taken
    script(tmp_path, "A.sh", "exit 0")
    assert cli.runjob("./A.sh").code == 0
    assert rows(tmp_path, "select runid, dataid from run order by runid") == [(1, "1"), (2, "2")]


@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)  # PostgreSQL holds no NUL
@pytest.mark.both_stores
def test_a_dataid_that_cannot_name_a_chunk_is_warned_of_once_per_drain(cli, tmp_path):
    from dataflow.dataids import natural_key

    _chunks(cli)
    with closing(sqlite3.connect(tmp_path / "dataflow.db")) as conn, conn:
        conn.create_function("now", 0, lambda: "2026-01-01 00:00:00")
        conn.create_function("dataflow_natkey", 1, natural_key)
        conn.execute("insert into datastatus values ('src','up',?,'OUT','READY',now())", ("0\0x",))
    script(tmp_path, "A.sh", "exit 0")
    ran = cli.runjob("--all", "./A.sh")
    assert ran.code == 0 and "3 READY" in ran.out, ran
    assert ran.err.count("cannot name a chunk") == 1 and ran.err.count("\n") == 1, ran


@pytest.mark.both_stores
def test_an_executable_that_is_neither_program_nor_script_is_refused_before_the_claim(
    cli, tmp_path
):
    _chunks(cli)
    job = tmp_path / "A.sh"
    before = state(tmp_path)
    for content in (bytes(range(256)) * 4, b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR", b"echo hi\0bin"):
        job.write_bytes(content)
        job.chmod(0o755)
        refused(cli.runjob("./A.sh"), 2, "neither a program (ELF), a script with a '#!' line")
    assert state(tmp_path) == before
    # a text script without "#!" still runs with the shell, as the seed's loadbob.sh
    job.write_text('echo "ran $dataid" > ran\n')
    assert cli.runjob("./A.sh").code == 0 and (tmp_path / "ran").read_text() == "ran 1\n"
