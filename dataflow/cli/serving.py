"""``utility serve``: the HTTP server (items POSTed become a stream's items; the live
board and read-only views). It needs the extra ``opendataflow[serve]``, imported here
and only when the command runs."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import ServeError, UsageError
from . import say, warn
from .commands import command, open_store

MISSING = "utility serve needs: pip install opendataflow[serve]"
EXTRA = ("starlette", "uvicorn", "anyio", "h11", "prometheus_client")  # what the extra brings
UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def size(text: str) -> int:
    """``1048576``, ``512K``, ``1M``: a number of bytes."""
    number, unit = text.strip().lower().rstrip("ib").rstrip("b"), ""
    if number and number[-1] in UNITS:
        number, unit = number[:-1], number[-1]
    if not number.isdigit() or int(number) < 1:
        raise argparse.ArgumentTypeError(f"'{text}' is not a size (e.g. 1048576, 512K, 1M)")
    return int(number) * UNITS[unit]


def rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"'{text}' is not a rate (requests a second; 0: no limit)")
    return value


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value < 86400:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of seconds (e.g. 5, 0.5)")
    return value


def count(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) <= 1_000_000:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number of connections (1 to 1000000)")
    return int(text)


def roots(given: list[str]) -> tuple[Path, ...]:
    """The ``--landing-root`` folders, resolved; each must be a folder."""
    found = []
    for name in given:
        try:
            path = Path(name).resolve()
        except (OSError, RuntimeError):  # a symlink loop, a name too long
            path = Path(name)
        if not path.is_dir():
            raise UsageError(f"--landing-root {name}: not a folder")
        found.append(path)
    return tuple(found)


def _arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)"
    )
    parser.add_argument("--port", type=int, default=8765, help="port (default 8765; 0: any free)")
    parser.add_argument(
        "--token-file", metavar="FILE", help="file holding the bearer token clients send (required)"
    )
    parser.add_argument(
        "--write-token-file", action="append", default=[], metavar="LABEL=FILE",
        help="a file holding a write token: the live board's actions (resubmit, hold, release,"
        " recover) for whoever sends it, recorded as LABEL (repeatable; the read token never acts)",
    )  # fmt: skip
    parser.add_argument(
        "--open-read", action="store_true", help="let anyone read the board and the read-only API"
    )
    _limit_arguments(parser)


def _limit_arguments(parser: argparse.ArgumentParser) -> None:
    """What the server takes: its datasets, bodies, rates, folders, connections, times."""
    parser.add_argument(
        "--dataset", action="append", default=[], metavar="D",
        help="take items only for this landing dataset (repeatable; default: every one)",
    )  # fmt: skip
    parser.add_argument(
        "--max-body", type=size, default="1M", metavar="SIZE",
        help="refuse a request body over SIZE with 413 (default 1M)",
    )  # fmt: skip
    parser.add_argument(
        "--rate", type=rate, default=0.0, metavar="N",
        help="POSTs a second the server takes, in bursts of up to N; more get 429 (default: no limit)",
    )  # fmt: skip
    parser.add_argument(
        "--landing-root", action="append", default=[], metavar="DIR",
        help="items land only in landing folders inside DIR, symlinks resolved (repeatable;"
        " none: every POST of items is refused)",
    )  # fmt: skip
    parser.add_argument(
        "--max-connections", type=count, default=1000, metavar="N",
        help="connections at once; past N the oldest without a request under way is closed"
        " (default 1000, fewer if ulimit -n leaves no room)",
    )  # fmt: skip
    parser.add_argument(
        "--header-timeout", type=seconds, default=10.0, metavar="S",
        help="seconds a request's line and headers may take to arrive (default 10)",
    )  # fmt: skip
    parser.add_argument(
        "--body-timeout", type=seconds, default=30.0, metavar="S",
        help="seconds a request's body may take to arrive after its headers (default 30)",
    )  # fmt: skip
    parser.add_argument(
        "--refresh", type=seconds, default=5.0, metavar="S",
        help="seconds between two refreshes of the live board (default 5)",
    )  # fmt: skip


@command(
    "serve",
    "serve HTTP: POST /stream/<dataset> lands items for a stream; the live board and a"
    " read-only API (needs opendataflow[serve])",
    _arguments,
)
def serve(options: argparse.Namespace) -> int:
    try:
        from ..serve import app, connections, server
    except ImportError as exc:
        if (exc.name or "").split(".")[0] in EXTRA:
            raise ServeError(MISSING) from None
        raise
    if not 0 <= options.port <= 65535:
        raise UsageError(f"--port {options.port}: give 0 to 65535")
    settings, log = _settings(options)
    application = app.create(settings, log)
    sock = server.listen(options.host, options.port)
    if not server.is_loopback(sock):
        warn("listening beyond this machine over plain HTTP: the token travels in clear "
             "unless a TLS proxy is in front (docs/serve.md)")  # fmt: skip
    if not settings.roots:
        warn("no --landing-root: every POST of items is refused (403); give --landing-root "
             "DIR for the folders items may land under")  # fmt: skip
    most = connections.most_open(options.max_connections)
    if most < options.max_connections:
        warn(f"at most {most} connections at once, not {options.max_connections}: the "
             "open-file limit (ulimit -n) leaves no room for more")  # fmt: skip
    limits = connections.Limits(most, options.header_timeout, options.body_timeout)
    _announce(options, server.url_of(sock), settings.writers)
    server.run(application, sock, log, limits)
    say("stopped")
    return 0


def _settings(options: argparse.Namespace):
    """The server's settings and its request log (which never shows a token), from the
    options; the tokens read, the store checked to open."""
    from ..serve import access, app

    token, warning = access.read_token(access.check_token_path(options.token_file))
    writers, warnings = access.read_writers(options.write_token_file, token)
    landing_roots = roots(options.landing_root)
    with open_store(options, readonly=True):  # no store: one clear error, not 503s
        pass
    for problem in ([warning] if warning else []) + warnings:
        warn(problem)
    settings = app.Settings(
        db=options.db, token=token, open_read=options.open_read, max_body=options.max_body,
        rate=options.rate, datasets=frozenset(options.dataset), live=options.refresh,
        roots=landing_roots, writers=writers,
    )  # fmt: skip
    secrets = [t for _, t in writers.tokens]
    return settings, access.Bearer(token, secrets).masking(say)  # whatever a client sends


def _announce(options: argparse.Namespace, url: str, writers) -> None:
    reads = "open to anyone" if options.open_read else "need the token"
    say(f"serving {url}: POST /stream/<dataset>; GET / is the board (reads {reads})")
    if writers:
        labels = ", ".join(label for label, _ in writers.tokens)
        say(f"the board's actions are taken for the write tokens of: {labels}")
    say("stop with Ctrl-C or SIGTERM: requests under way finish first")
