"""The server's socket and its life: bound before anything else (so a port in use is one
clear error), served by uvicorn (its connections held to ``connections``' limits),
stopped by SIGTERM or Ctrl-C: it stops accepting, lets the requests under way finish
(each POST lands and is answered, or never started), then returns. What uvicorn and
asyncio report (a client's malformed request, no file left for a connection...) is
logged as one line each, never a traceback."""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import signal
import socket
from collections.abc import Callable

import uvicorn
from starlette.types import ASGIApp

from ..errors import ServeError
from .connections import Guard, Limits, protocol_for

GRACE = 30  # seconds the requests under way get to finish after SIGTERM
BACKLOG = 2048
REPORTERS = ("uvicorn", "asyncio")  # the loggers whose records reach the server's log


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port`` (port 0: one the system picks)."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ServeError(f"cannot listen on {host}: {exc.strerror}") from None
    family, kind, proto, _, address = found[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # restart at once
        sock.bind(address)
        sock.listen(BACKLOG)
    except OSError as exc:
        sock.close()
        raise ServeError(f"cannot listen on {host} port {port}: {exc.strerror}") from None
    return sock


def is_loopback(sock: socket.socket) -> bool:
    """Whether only this machine can reach ``sock``."""
    return ipaddress.ip_address(sock.getsockname()[0]).is_loopback


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class OneLine(logging.Handler):
    """A warning or error of uvicorn or asyncio as one line of the server's log: its
    message and, for an exception, its type and text (never a traceback)."""

    def __init__(self, log: Callable[[str], None]):
        super().__init__(logging.WARNING)
        self._log = log

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            text = f"{text}: {type(exc).__name__}: {exc}"
        line = " ".join(text.split())
        self._log(f"{record.levelname.lower()}: {line[:500]}")


def run(
    app: ASGIApp,
    sock: socket.socket,
    log: Callable[[str], None],
    limits: Limits | None = None,
    grace: float = GRACE,
) -> None:
    """Serve ``app`` on ``sock`` until SIGTERM or SIGINT, then finish what is under way."""
    config = uvicorn.Config(
        app,
        http=protocol_for(Guard(limits or Limits(), log)),
        ws="none",
        log_config=None,  # the application logs its own lines; uvicorn only its errors
        access_log=False,  # its access log would print query strings
        lifespan="off",
        server_header=False,
        timeout_graceful_shutdown=grace,
        loop="asyncio",
        backlog=BACKLOG,
    )
    server = uvicorn.Server(config)
    # uvicorn catches the signal, shuts down, then raises it again with the handlers it
    # found: these, which do nothing, so that a stop by SIGTERM exits 0
    quiet: Callable = lambda *_: None  # noqa: E731
    before = {sig: signal.signal(sig, quiet) for sig in (signal.SIGTERM, signal.SIGINT)}
    reporter = OneLine(log)
    for name in REPORTERS:
        logging.getLogger(name).addHandler(reporter)
    try:
        asyncio.run(server.serve(sockets=[sock]))
    finally:
        for name in REPORTERS:
            logging.getLogger(name).removeHandler(reporter)
        for sig, handler in before.items():
            signal.signal(sig, handler)
        sock.close()
