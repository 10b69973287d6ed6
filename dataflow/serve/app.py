"""The routes of ``utility serve``, as a Starlette application.

- ``POST /stream/<dataset>``: items land (see ``intake``); ``202`` and what landed, only
  once they are durably on disk. Needs the bearer token, always.
- ``GET /`` (the live board), ``/api/board``, ``/api/status``, ``/api/runs``,
  ``/api/history``, ``/api/log/<job>/<dataid>``, ``/api/actions``: read-only; they need
  the token unless the server was started with ``--open-read``.
- ``POST /api/actions/<action>``: the board's actions, for a write token (``actions``).

Every refusal is one line of JSON, ``{"error": "..."}``, and lands nothing. A token in a
URL's query is refused even where none is needed. One line is logged per request (who,
method, path, status, items or why it was refused, time): never a query string, a
header, a body, nor the token (masked wherever a client puts it, the path included).
"""

from __future__ import annotations

import json
import math
import threading
import time
import traceback
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import DataflowError, Refused, StoreMissing, StoreUnavailable, UnknownJob
from ..store import DRIVER_ERRORS
from . import actions, intake, items, metrics, views
from .access import Bearer, RateLimit, Writers

Log = Callable[[str], None]
MAX_BODY = 1024 * 1024  # bytes of one request, by default
REMEMBER = 1.0  # seconds a landing's registration is taken as checked
HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}


@dataclass(frozen=True)
class Settings:
    """How a server answers (``utility serve``'s options)."""

    db: str | None
    token: bytes
    open_read: bool = False
    max_body: int = MAX_BODY
    rate: float = 0.0  # POSTs a second; 0: no limit
    datasets: Collection[str] = field(default_factory=frozenset)  # empty: every landing
    live: float = 5.0  # seconds between two refreshes of the board page
    roots: tuple[Path, ...] = ()  # folders items may land under (resolved); none: no items
    writers: Writers = field(default_factory=Writers)  # who may act from the board


def _answer(status: int, body: bytes, media: str, extra: dict | None = None) -> Response:
    return Response(body, status, headers={**HEADERS, **(extra or {})}, media_type=media)


def error(status: int, message: str, extra: dict | None = None) -> Response:
    """A refusal: one line of JSON."""
    line = json.dumps({"error": " ".join(message.split())}) + "\n"
    return _answer(status, line.encode(), "application/json", extra)


def _status_of(exc: Exception) -> int:
    if isinstance(exc, Refused):
        return exc.status
    if isinstance(exc, UnknownJob):
        return 404
    if isinstance(exc, (StoreMissing, StoreUnavailable, *DRIVER_ERRORS)):
        return 503
    return 400


class Service:
    """The handlers, sharing the settings, the token check and the rate limit."""

    def __init__(self, settings: Settings, log: Log):
        self.settings = settings
        self.bearer = Bearer(settings.token, [token for _, token in settings.writers.tokens])
        self.log = self.bearer.masking(log)
        self.limit = RateLimit(settings.rate)
        self._targets: dict[str, tuple[float, intake.Target]] = {}  # read in worker threads
        self._lock = threading.Lock()

    def refusal(self, request: Request, writes: bool) -> Response | None:
        """401 unless the request may go: no token in its URL, a valid bearer token
        (reads need none with ``--open-read``)."""
        if self.bearer.in_query(request.query_params.multi_items()):
            return error(
                401, "a token in the URL is refused: send it as the header Authorization: Bearer"
            )
        if not writes and self.settings.open_read:
            return None
        if not self.bearer.admits(request.headers.get("authorization")):
            return error(
                401,
                "a valid token is needed: the header Authorization: Bearer TOKEN",
                {"WWW-Authenticate": 'Bearer realm="dataflow"'},
            )
        return None

    async def guarded(
        self, request: Request, writes: bool, answer: Callable[[], Awaitable[Response]]
    ) -> Response:
        refused = self.refusal(request, writes)
        if refused is not None:
            return refused
        return await self.answered(request, answer)

    async def answered(
        self, request: Request, answer: Callable[[], Awaitable[Response]]
    ) -> Response:
        """``answer()``, or a refusal of one line if it fails (a bug: 500, logged)."""
        try:
            return await answer()
        except (DataflowError, *DRIVER_ERRORS) as exc:
            status, message = _status_of(exc), str(exc) or type(exc).__name__
            if status == 403:  # a rule of this server: its log says which
                request.state.note = f"({message})"
            return error(status, message)
        except ClientDisconnect:  # gone, or closed by --body-timeout: no one reads this
            return error(408, "the body did not arrive whole")
        except Exception as exc:  # a bug: the client learns nothing of it, the log one line
            where = traceback.extract_tb(exc.__traceback__)[-1]
            self.log(
                f"error: {request.method} {shown_path(self.bearer.hide(request.url.path))}: "
                f"{type(exc).__name__}: {' '.join(str(exc).split())} "
                f"({Path(where.filename).name}:{where.lineno})"
            )
            return error(500, "internal error (see the server's log)")

    # -- writes --------------------------------------------------------------------------

    async def stream(self, request: Request) -> Response:
        return await self.guarded(request, True, lambda: self._stream(request))

    async def _stream(self, request: Request) -> Response:
        key = intake.check_key(request.headers.get("idempotency-key"))
        intake.check_name(request.path_params["dataset"], self.settings.datasets)
        wait = self.limit.take()  # counts the requests that may land
        if wait:
            seconds = max(1, math.ceil(wait))
            return error(429, f"too many requests: try again in {seconds} s",
                         {"Retry-After": str(seconds)})  # fmt: skip
        body = await self._body(request)
        found = items.parse(body, request.headers.get("content-type", ""))
        landed = await run_in_threadpool(self._land, request.path_params["dataset"], found, key)
        request.state.note = f"{landed.items} item{'' if landed.items == 1 else 's'}" + (
            " (duplicate)" if landed.duplicate else ""
        )
        body = (json.dumps(landed.as_json()) + "\n").encode()
        return _answer(202, body, "application/json")

    def _land(self, datasetid: str, found: list, key: str | None) -> intake.Landed:
        return intake.land(self._target(datasetid), found, key)

    def _target(self, datasetid: str) -> intake.Target:
        """The dataset's landing, looked up in the store at most once every ``REMEMBER``
        seconds while it takes items (a refusal is never remembered)."""
        now = time.monotonic()
        with self._lock:
            known = self._targets.get(datasetid)
        if known and known[0] > now:
            return known[1]
        where = intake.target(
            self.settings.db, datasetid, self.settings.datasets, self.settings.roots
        )
        with self._lock:
            self._targets[datasetid] = (now + REMEMBER, where)
        return where

    async def _body(self, request: Request) -> bytes:
        limit = self.settings.max_body
        too_big = Refused(413, f"the body is over {limit:,} bytes (utility serve --max-body)")
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise too_big
        parts, size = [], 0
        async for part in request.stream():
            size += len(part)
            if size > limit:
                raise too_big
            parts.append(part)
        return b"".join(parts)

    # -- reads ---------------------------------------------------------------------------

    def reader(
        self, view: Callable[..., bytes], media: str = "application/json"
    ) -> Callable[[Request], Awaitable[Response]]:
        async def handle(request: Request) -> Response:
            async def answer() -> Response:
                query = dict(request.query_params)
                params = dict(request.path_params)
                body = await run_in_threadpool(view, self.settings.db, *params.values(), query)
                return _answer(200, body, media)

            return await self.guarded(request, False, answer)

        return handle

    def page(self, db: str | None, query: dict) -> bytes:
        return views.board_page(db, query, self.settings.live, bool(self.settings.writers))


def shown_path(path: str, most: int = 200) -> str:
    """A URL's path for one line of a log: control characters escaped, cut short."""
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in path)
    return text if len(text) <= most else text[:most] + "..."


class AccessLog:
    """One line per request, once it is answered: client, method, path (the token
    masked), status, the items that landed or why it was refused, the time taken. Never
    a query string, header or body."""

    def __init__(self, app: ASGIApp, log: Log, hide: Callable[[str], str]):
        self.app = app
        self.log = log
        self.hide = hide

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started, status = time.monotonic(), [500]

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            client = (scope.get("client") or ("-", 0))[0]
            note = scope.get("state", {}).get("note")
            what = f" {note}" if note else ""
            took = (time.monotonic() - started) * 1000
            path = shown_path(self.hide(scope["path"]))
            self.log(f"{client} {scope['method']} {path} {status[0]}{what} {took:.0f} ms")


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    return error(exc.status_code, exc.detail, dict(exc.headers or {}))


def create(settings: Settings, log: Log) -> ASGIApp:
    """The server's application: its routes behind the access log."""
    service = Service(settings, log)
    routes = [
        Route("/stream/{dataset}", service.stream, methods=["POST"]),
        Route("/", service.reader(service.page, "text/html; charset=utf-8"), methods=["GET"]),
        Route("/api/board", service.reader(views.board_json), methods=["GET"]),
        Route("/api/status", service.reader(views.job_status), methods=["GET"]),
        Route("/api/runs", service.reader(views.runs), methods=["GET"]),
        Route("/api/history", service.reader(views.history), methods=["GET"]),
        Route(
            "/api/log/{job}/{dataid}",
            service.reader(views.log, "text/plain; charset=utf-8"),
            methods=["GET"],
        ),
        Route("/api/actions", service.reader(views.actions), methods=["GET"]),
        Route("/metrics", service.reader(metrics.scrape, metrics.MEDIA), methods=["GET"]),
        Route("/api/actions/{action}", actions.Actions(service, _answer).answer, methods=["POST"]),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error})
    threading.Thread(target=_count_runs, args=(settings.db,), daemon=True).start()
    return AccessLog(app, service.log, service.bearer.hide)


def _count_runs(db: str | None) -> None:
    """/metrics' count of the ended runs, read once at the start (seconds at a million
    runs) rather than by the first scrape; a store it cannot read is the scrape's to tell."""
    try:
        metrics.warm(db)
    except (DataflowError, *DRIVER_ERRORS):
        pass
