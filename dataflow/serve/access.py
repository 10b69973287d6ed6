"""Who may call the server, and how often: its bearer token, and the rate of POSTs.

The token is read once from a file (never from the command line, where ``ps`` shows
it), compared in constant time, and never logged nor echoed. A token in a URL is
refused outright: URLs end up in proxies' logs and browsers' histories.
"""

from __future__ import annotations

import hmac
import os
import re
import stat
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from ..errors import ServeError

MIN_TOKEN = 16  # characters: a short token is guessed
SCHEME = "bearer"
MASK = "***"  # the token, in a log line
QUERY_NAMES = frozenset(
    {"token", "access_token", "bearer", "auth", "authorization", "api_key", "apikey", "key"}
)


def read_token(path: str) -> tuple[bytes, str | None]:
    """The token in file ``path`` (its first line, spaces around it dropped), and a
    warning if others than its owner may read the file. ServeError if it is unusable."""
    try:
        with open(path, "rb") as handle:
            mode = os.fstat(handle.fileno()).st_mode
            text = handle.read(64 * 1024)
    except OSError as exc:
        raise ServeError(f"cannot read the token file {path}: {exc.strerror}") from None
    lines = text.strip().splitlines()
    token = lines[0].strip() if lines else b""
    if len(token) < MIN_TOKEN or any(c <= 32 or c >= 127 for c in token):
        raise ServeError(
            f"the token file {path} must hold one token of at least {MIN_TOKEN} printable "
            "ASCII characters (e.g. python3 -c 'import secrets; print(secrets.token_urlsafe())')"
        )
    warning = None
    if stat.S_IMODE(mode) & 0o077:
        warning = f"the token file {path} can be read by others than its owner: chmod 600 it"
    return token, warning


class Bearer:
    """Checks ``Authorization: Bearer <token>`` against the server's token; ``others``
    (the write tokens) are masked and refused in URLs as it is."""

    def __init__(self, token: bytes, others: Iterable[bytes] = ()):
        self._token = token
        self._secrets = [t.decode("latin-1") for t in (token, *others)]  # printable ASCII

    def admits(self, authorization: str | None) -> bool:
        scheme, _, given = (authorization or "").partition(" ")
        if scheme.lower() != SCHEME:
            return False
        # latin-1: a header's bytes as they came; compare_digest takes the same time
        # whatever the first wrong character
        return hmac.compare_digest(given.strip().encode("latin-1", "replace"), self._token)

    def hide(self, text: str) -> str:
        """``text`` with the token masked (a path a client put it in, a log line)."""
        for secret in self._secrets:
            text = text.replace(secret, MASK) if secret in text else text
        return text

    def masking(self, log: Callable[[str], None]) -> Callable[[str], None]:
        """``log``, every line of it with the token masked."""
        return lambda line: log(self.hide(line))

    def in_query(self, pairs: Iterable[tuple[str, str]]) -> bool:
        """Whether a URL's query carries a token: a parameter named like one, or the
        token itself as any value."""
        found = False
        for name, value in pairs:
            found |= name.lower() in QUERY_NAMES
            given = value.encode("utf-8", "replace")
            for secret in self._secrets:
                found |= hmac.compare_digest(given, secret.encode("latin-1"))
        return found


def given_token(authorization: str | None) -> bytes | None:
    """The token of an ``Authorization: Bearer`` header (its bytes as they came)."""
    scheme, _, given = (authorization or "").partition(" ")
    if scheme.lower() != SCHEME:
        return None
    return given.strip().encode("latin-1", "replace")


class Writers:
    """The write tokens (``--write-token-file LABEL=FILE``): who may act on chunks from
    the live board, each known by its label (the name the audit records)."""

    def __init__(self, tokens: Iterable[tuple[str, bytes]] = ()):
        self.tokens = tuple(tokens)

    def __bool__(self) -> bool:
        return bool(self.tokens)

    def label_of(self, authorization: str | None) -> str | None:
        """The label of the write token a request sends, or None. Every token is compared
        (in constant time), whichever matches."""
        given = given_token(authorization)
        found = None
        for label, token in self.tokens:
            if given is not None and hmac.compare_digest(given, token):
                found = label
        return found


LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,63}")


def read_writers(specs: Iterable[str], read: bytes) -> tuple[Writers, list[str]]:
    """The ``--write-token-file LABEL=FILE`` options as write tokens, and the warnings of
    their files. ServeError if one has no label, a label twice, an unusable file, or a
    token that another (the read token included) has: the read token never acts."""
    tokens: list[tuple[str, bytes]] = []
    warnings = []
    for spec in specs:
        label, sep, path = spec.partition("=")
        if not sep or not LABEL.fullmatch(label) or not path:
            raise ServeError(
                f"--write-token-file {spec}: give LABEL=FILE (e.g. oncall=/etc/dataflow/oncall"
                ".token); the label, letters, digits and . _ @ -, names who acted in the audit"
            )
        if any(label == known for known, _ in tokens):
            raise ServeError(f"--write-token-file: the label {label} is given twice")
        token, warning = read_token(check_token_path(path))
        if token == read or any(token == known for _, known in tokens):
            raise ServeError(
                f"the write token file {path} holds a token given already (the read token, "
                "or another write token's): each write token must be its own"
            )
        tokens.append((label, token))
        warnings += [warning] if warning else []
    return Writers(tokens), warnings


class RateLimit:
    """A token bucket: ``rate`` requests a second, bursts of up to ``burst``. Used from
    the server's event loop only (one thread)."""

    def __init__(self, rate: float, burst: int | None = None):
        self.rate = rate
        self.burst = float(burst or max(1, round(rate)))
        self._level = self.burst
        self._at = time.monotonic()

    def take(self) -> float:
        """0 if a request may go now (and it is counted), else the seconds to wait."""
        if self.rate <= 0:
            return 0.0
        now = time.monotonic()
        self._level = min(self.burst, self._level + (now - self._at) * self.rate)
        self._at = now
        if self._level >= 1:
            self._level -= 1
            return 0.0
        return (1 - self._level) / self.rate


def check_token_path(path: str | None) -> str:
    """The ``--token-file`` option: required, a file."""
    if not path:
        raise ServeError("utility serve needs --token-file FILE: the bearer token clients send")
    if not Path(path).is_file():
        raise ServeError(f"the token file {path} is not a file")
    return path
