"""Passwords: the seed's test vector, round trips, and clean errors."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataflow import crypto
from dataflow.errors import SealBroken, WrongPasskey
from support import (
    _chunks,
    refused,
    script,
    start_runjob,
    wait_for,
)

SEED_VECTOR = "dKpgTdzYpGVezNffmg912Wjk223NjTmoEr2L6WRxptXH"


def test_seed_vector_decrypts():
    assert crypto.decrypt(SEED_VECTOR, "plugh") == "plugh"


@settings(max_examples=25, deadline=None)
@given(text=st.text(), passkey=st.text(min_size=1), seed_format=st.booleans())
def test_round_trip(text, passkey, seed_format):
    token = crypto.encrypt(text, passkey, seed_format=seed_format)
    assert token.startswith(crypto.PREFIX) != seed_format
    assert crypto.decrypt(token, passkey) == text


@settings(max_examples=10, deadline=None)
@given(text=st.text(), seed_format=st.booleans())
def test_wrong_passkey_is_a_clean_error(text, seed_format):
    token = crypto.encrypt(text, "right", seed_format=seed_format)
    with pytest.raises(WrongPasskey):
        crypto.decrypt(token, "wrong")


_ROW = st.fixed_dictionaries(
    {c: st.none() | st.text(max_size=8) for c in crypto.ADDRESS if c != "datasetid"},
    optional={},
).map(lambda row: {"datasetid": "d", **row})


@settings(max_examples=25, deadline=None)
@given(text=st.text(), passkey=st.text(min_size=1), row=_ROW, other=_ROW)
def test_a_sealed_password_opens_only_for_its_address(text, passkey, row, other):
    token = crypto.encrypt(text, passkey, seal=crypto.seal_of(row))
    assert token.startswith(crypto.SEALED) and crypto.is_sealed(token)
    assert crypto.decrypt(token, passkey, seal=crypto.seal_of(row)) == text
    if crypto.seal_of(other) != crypto.seal_of(row):
        with pytest.raises(SealBroken, match=r"address .* changed"):
            crypto.decrypt(token, passkey, seal=crypto.seal_of(other))
    with pytest.raises(SealBroken):  # no address given: it cannot open
        crypto.decrypt(token, passkey)
    with pytest.raises(SealBroken):  # nor with another passkey
        crypto.decrypt(token, passkey + "x", seal=crypto.seal_of(row))


def test_each_encryption_is_fresh():
    assert crypto.encrypt("same", "k") != crypto.encrypt("same", "k")


@pytest.mark.parametrize("token", ["", "not base64!", "df1$AAAA", "AAAA"])
def test_garbage_is_a_clean_error(token):
    with pytest.raises(WrongPasskey):
        crypto.decrypt(token, "plugh")


def test_cli_crypt(cli, tmp_path):
    assert cli.utility("crypt", "-d", SEED_VECTOR, env={"PASSKEY": "plugh"}).out == "plugh\n"
    # the seed's forms: passkey as first argument of utility, or inside crypt
    assert cli.utility("plugh", "crypt", "-d", SEED_VECTOR).out == "plugh\n"
    assert cli.utility("crypt", "-d", "plugh", SEED_VECTOR).out == "plugh\n"
    keyfile = tmp_path / "passkey"
    keyfile.write_text("s3cret\n")
    token = cli.ok("crypt", "-e", "hunter2", env={"PASSKEY_FILE": str(keyfile)}).out.strip()
    assert token.startswith("df1$") and "hunter2" not in token
    seed = cli.ok("crypt", "-e", "--seed-format", "x", env={"PASSKEY": "s3cret"}).out.strip()
    assert not seed.startswith("df1$")
    assert cli.ok("crypt", "-d", token, env={"PASSKEY": "s3cret"}).out == "hunter2\n"

    wrong = cli.utility("crypt", "-d", token, env={"PASSKEY": "nope"})
    assert (wrong.code, wrong.out) == (2, "")
    assert wrong.err == "error: cannot decrypt the text: wrong passkey or damaged ciphertext\n"
    missing = cli.utility("crypt", "-e", "x")
    assert missing.code == 2 and missing.err.startswith("error: crypt needs the passkey")


def _command_lines_holding(secret: bytes) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            line = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if secret in line:
            found.append(f"{proc.name}: {line!r}")
    return found


@pytest.mark.both_stores
def test_a_passkey_given_as_an_argument_is_in_no_process_command_line(cli, tmp_path):
    """The seed's ``RunJob PASSKEY ./job.sh``: RunJob's own command line (and so its
    keeper's, forked from it) and the job's hold no passkey while the job runs."""
    _chunks(cli)
    secret = f"pk-{os.getpid()}-{id(cli)}-x"
    script(tmp_path, "A.sh", "touch started; while [ ! -e release ]; do sleep 0.05; done")
    runjob = start_runjob(cli, secret, "./A.sh")
    try:
        wait_for(lambda: (tmp_path / "started").exists(), what="the job to start")
        assert _command_lines_holding(secret.encode()) == []
    finally:
        (tmp_path / "release").touch()
        out, err = runjob.communicate(timeout=60)
    assert runjob.returncode == 0 and "1 rows updated to READY" in out and err == "", (out, err)


@pytest.mark.parametrize("store_kind", ["sqlite"], indirect=True)  # no store involved
@pytest.mark.both_stores
def test_crypt_with_two_words_and_a_passkey_set_is_ambiguous_and_refused(cli, tmp_path):
    for env in ({"PASSKEY": "right"}, {"PASSKEY_FILE": str(tmp_path / "key")}):
        (tmp_path / "key").write_text("right\n")
        refused(cli.utility("crypt", "-e", "hello", "world", env=env), 2, "takes one TEXT")
    token = cli.ok("crypt", "-e", "hello world", env={"PASSKEY": "right"}).out.strip()
    assert cli.ok("crypt", "-d", token, env={"PASSKEY": "right"}).out == "hello world\n"
    seed = cli.ok("crypt", "-e", "hello", "world").out.strip()  # the seed's form, no PASSKEY
    assert cli.ok("crypt", "-d", seed, env={"PASSKEY": "hello"}).out == "world\n"
