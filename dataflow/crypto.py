"""Dataset passwords: encrypted with a passkey that is never stored.

Two formats decrypt:

* the seed's: base64(12-byte IV ‖ AES-256-GCM ciphertext+tag), key = first 32
  bytes of SHA-512(passkey). Written only on request (``seed_format=True``).
* ours, ``df1$`` + base64(16-byte salt ‖ 12-byte nonce ‖ AES-256-GCM
  ciphertext+tag), key = scrypt(passkey, salt). ``$`` is not a base64 character,
  so the two never look alike.
* a dataset's password **sealed to its address**: ``df2$`` and the same layout, the
  dataset's name, host, database, schema, table and user as GCM's associated data
  (:func:`seal_of`). It opens only for that address: a writer of the store who points
  the dataset elsewhere gets no password sent there (``utility register-dataset`` and
  ``rekey`` write this format).
"""

from __future__ import annotations

import binascii
import os
from collections.abc import Mapping
from functools import lru_cache

from .errors import SealBroken, UsageError, WrongPasskey

PREFIX = "df1$"
SEALED = "df2$"
ADDRESS = ("datasetid", "hostname", "database", "schemaname", "tablename", "username")
_SCRYPT = {"n": 2**14, "r": 8, "p": 1, "maxmem": 64 * 1024 * 1024, "dklen": 32}


def read_passkey(environ: Mapping[str, str] = os.environ) -> str | None:
    """The passkey from ``PASSKEY``, else from the file named by ``PASSKEY_FILE``."""
    if environ.get("PASSKEY"):
        return environ["PASSKEY"]
    path = environ.get("PASSKEY_FILE")
    if not path:
        return None
    return passkey_file(path, "PASSKEY_FILE ")


MAX_PASSKEY = 4096  # bytes: a passkey file is a line, not a stream (/dev/zero is refused)


def passkey_file(path: str, what: str = "") -> str:
    """The passkey held by a file: its first line, UTF-8, at most MAX_PASSKEY bytes."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_PASSKEY + 1)
    except OSError as exc:
        raise UsageError(f"cannot read {what}{path}: {exc.strerror}") from None
    if len(data) > MAX_PASSKEY:
        raise UsageError(f"{what}{path} is longer than {MAX_PASSKEY} bytes: not a passkey file")
    try:
        passkey = data.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError:
        raise UsageError(f"{what}{path} is not UTF-8 text: not a passkey file") from None
    if not passkey or "\0" in passkey:
        raise UsageError(f"{what}{path} is {'empty' if not passkey else 'binary'}")
    return passkey


def _aesgcm(key: bytes):
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM  # loaded only when needed

    return AESGCM(key)


def _seed_key(passkey: str) -> bytes:
    import hashlib  # loaded only when a password is decrypted

    return hashlib.sha512(passkey.encode("utf-8")).digest()[:32]


@lru_cache(maxsize=64)
def _derived_key(passkey: str, salt: bytes) -> bytes:
    import hashlib

    return hashlib.scrypt(passkey.encode("utf-8"), salt=salt, **_SCRYPT)


def seal_of(row: Mapping[str, object]) -> bytes:
    """What a dataset's password is sealed to: its address, the row but its password."""
    import json

    return json.dumps([None if row.get(c) is None else str(row[c]) for c in ADDRESS]).encode()


def is_token(text: str) -> bool:
    """Could ``text`` be a token this module wrote (any format), not a password in clear?"""
    import base64

    body = text[len(PREFIX) :] if text.startswith((PREFIX, SEALED)) else text
    try:
        raw = base64.b64decode(body, validate=True)
    except (binascii.Error, ValueError):
        return False
    return len(raw) >= (44 if body is not text else 28)


def is_sealed(token: str | None) -> bool:
    return bool(token) and str(token).startswith(SEALED)


def encrypt(text: str, passkey: str, seed_format: bool = False, seal: bytes | None = None) -> str:
    """Encrypt ``text``; the versioned scrypt format unless ``seed_format``; sealed to
    ``seal`` (:func:`seal_of` a dataset's row) when given."""
    import base64  # here and in decrypt: RunJob imports this module, most runs need neither

    nonce = os.urandom(12)
    if seed_format:
        sealed = _aesgcm(_seed_key(passkey)).encrypt(nonce, text.encode("utf-8"), None)
        return base64.b64encode(nonce + sealed).decode("ascii")
    salt = os.urandom(16)
    sealed = _aesgcm(_derived_key(passkey, salt)).encrypt(nonce, text.encode("utf-8"), seal)
    return (SEALED if seal is not None else PREFIX) + base64.b64encode(
        salt + nonce + sealed
    ).decode("ascii")


def decrypt(token: str, passkey: str, what: str = "the text", seal: bytes | None = None) -> str:
    """Decrypt any format (a sealed one with the ``seal`` it was sealed to);
    :class:`WrongPasskey` if the passkey does not fit, :class:`SealBroken` if a sealed
    token's passkey or address does not."""
    import base64

    from cryptography.exceptions import InvalidTag

    versioned = token.startswith((PREFIX, SEALED))
    sealed_to = seal if token.startswith(SEALED) else None
    if token.startswith(SEALED) and seal is None:
        raise SealBroken(what, "it is sealed to a dataset's address: read it through the dataset")
    try:
        raw = base64.b64decode(token[len(PREFIX) :] if versioned else token, validate=True)
    except (binascii.Error, ValueError):
        raise WrongPasskey(what) from None
    if versioned:
        salt, nonce, sealed = raw[:16], raw[16:28], raw[28:]
        key = _derived_key(passkey, salt)
    else:
        nonce, sealed = raw[:12], raw[12:]
        key = _seed_key(passkey)
    if len(nonce) != 12 or len(sealed) < 16:
        raise WrongPasskey(what)
    try:
        return _aesgcm(key).decrypt(nonce, sealed, sealed_to).decode("utf-8")
    except (InvalidTag, UnicodeDecodeError):
        if sealed_to is not None:
            raise SealBroken(
                what,
                "the passkey is wrong, or the dataset's address (host, database, schema, "
                "table, user) changed since its password was set: set the password again "
                "(utility register-dataset NAME --password)",
            ) from None
        raise WrongPasskey(what) from None
