"""The live board's actions: ``POST /api/actions/<action>`` (resubmit, hold, release,
recover) for a write token, through the CLI's own functions (:mod:`dataflow.ops.reruns`),
each recorded in the store's audit with the token's label and the client's address.

A request acts only if all of these hold, else it is refused in one line of JSON and
nothing changes: no token in its URL; no ``Origin`` other than the server's own, and no
``Sec-Fetch-Site: cross-site`` (a page elsewhere cannot post here in its visitor's
browser); ``Content-Type: application/json`` (a cross-site form cannot send it without
a preflight, which this server never answers); a write token in ``Authorization:
Bearer`` (the read token is refused: 403). No cookie is ever read: a browser holds no
credential this server would take by itself. ``"dry_run": true`` answers what would
change (the page's confirmation) and changes nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from urllib.parse import urlsplit

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from ..errors import (
    ChunkBusy,
    ChunkLive,
    DataflowError,
    Refused,
    UnknownChunk,
    UnknownJob,
    UsageError,
)
from ..ops import reruns
from ..ops.audit import Actor
from ..store import locate, open_store
from .access import Writers

NAMES = ("resubmit", "hold", "release", "recover")
MAX_BODY = 4096  # bytes: a job, a dataid, two flags
FIELDS = {"job", "dataid", "cascade", "dry_run"}


def foreign_origin(headers) -> str | None:
    """Why a request comes from another site, or None: its ``Origin`` (when sent) is
    not this server's (the host it was sent to), or its ``Sec-Fetch-Site`` says so."""
    origin = headers.get("origin")
    if origin is not None:
        host = headers.get("host", "").lower()
        if origin == "null" or urlsplit(origin).netloc.lower() != host:
            return f"a request from another site (Origin {origin[:100]}) is refused"
    if headers.get("sec-fetch-site", "").lower() == "cross-site":
        return "a request from another site (Sec-Fetch-Site: cross-site) is refused"
    return None


def is_json(content_type: str) -> bool:
    return content_type.split(";")[0].strip().lower() == "application/json"


def _text(body: dict, name: str, needed: bool) -> str | None:
    value = body.get(name)
    if value is None or value == "":
        if needed:
            raise UsageError(f'the body needs "{name}"')
        return None
    if not isinstance(value, str):
        raise UsageError(f'"{name}" must be a string')
    return value


def _flag(body: dict, name: str) -> bool:
    value = body.get(name, False)
    if not isinstance(value, bool):
        raise UsageError(f'"{name}" must be true or false')
    return value


def parse(name: str, raw: bytes) -> dict:
    """The body of an action: ``job``, ``dataid``, ``cascade``, ``dry_run``."""
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise UsageError("the body is not JSON") from None
    if not isinstance(body, dict):
        raise UsageError("the body must be a JSON object")
    if unknown := sorted(set(body) - FIELDS):
        raise UsageError(f"unknown field {unknown[0]!r} (known: {', '.join(sorted(FIELDS))})")
    return {
        "job": _text(body, "job", name != "recover"),  # recover: every job, if none
        "dataid": _text(body, "dataid", name != "recover"),  # (recover: not used)
        "cascade": _flag(body, "cascade"),
        "dry_run": _flag(body, "dry_run"),
    }


def act(db: str | None, name: str, asked: dict, by: Actor) -> list[reruns.Change]:
    """Do (or with ``dry_run``, preview) one action, as the CLI does it, for ``by``."""
    job, dataid, dry = asked["job"], asked["dataid"], asked["dry_run"]
    with open_store(locate(db)) as store:
        if name == "resubmit":
            chosen = reruns.select_dataids(store, job, dataid)
            return reruns.resubmit(store, job, chosen, asked["cascade"], dry, by=by)
        if name == "hold":
            return [reruns.hold(store, job, dataid, dry, by)]
        if name == "release":
            return [reruns.release(store, job, dataid, dry, by)]
        if dry:  # recover: every dead run of the job (of every job, without one)
            return reruns.dead_runs(store, job)
        return reruns.recover(store, job, by).changes


def status_of(exc: DataflowError) -> int:
    """The HTTP status of a refused action: 404 an unknown job or chunk, 409 a chunk
    that cannot change now (live, held, not held), 400 a malformed request."""
    if isinstance(exc, Refused):
        return exc.status
    if isinstance(exc, (UnknownJob, UnknownChunk)):
        return 404
    if isinstance(exc, UsageError):
        return 400
    if isinstance(exc, (ChunkLive, ChunkBusy)) or type(exc) is DataflowError:
        return 409
    return 400


class Actions:
    """The handler of ``POST /api/actions/<action>``, for the server's ``service``
    (``app.Service``: its settings, its read token, its answers); ``reply(status, body,
    media)``: the server's answer."""

    def __init__(self, service, reply: Callable[[int, bytes, str], Response]):
        self.service = service
        self.writers: Writers = service.settings.writers
        self.reply = reply

    def refusal(self, request: Request) -> tuple[int, str] | None:
        """Why a request may not act (a status and its line), or None."""
        if self.service.bearer.in_query(request.query_params.multi_items()):
            return 401, "a token in the URL is refused: send it as the header Authorization: Bearer"
        if request.path_params["action"] not in NAMES:
            return 404, f"no such action: give one of {', '.join(NAMES)}"
        if not self.writers:
            return 403, "this server takes no actions: start it with --write-token-file LABEL=FILE"
        if why := foreign_origin(request.headers):
            return 403, why
        if not is_json(request.headers.get("content-type", "")):
            return 415, "an action's body must be JSON, sent as Content-Type: application/json"
        authorization = request.headers.get("authorization")
        if self.writers.label_of(authorization) is None:
            if self.service.bearer.admits(authorization):
                return 403, "the read token cannot act: a write token is needed"
            return 401, "a write token is needed: the header Authorization: Bearer TOKEN"
        return None

    async def answer(self, request: Request) -> Response:
        """The action done (or previewed): 200 and its changes, as JSON; or a refusal."""
        return await self.service.answered(request, lambda: self._act(request))

    async def _act(self, request: Request) -> Response:
        refused = self.refusal(request)
        if refused is not None:
            raise Refused(*refused)
        name = request.path_params["action"]
        label = self.writers.label_of(request.headers.get("authorization")) or ""
        client = request.client.host if request.client else None
        request.state.note = f"{label}: {name} refused"
        try:
            asked = parse(name, await _body(request))
            by = Actor(label, client)
            db = self.service.settings.db
            changes = await run_in_threadpool(act, db, name, asked, by)
        except DataflowError as exc:
            raise Refused(status_of(exc), str(exc)) from None
        done = sum(1 for c in changes if c.after != "unchanged")
        verb = "would change" if asked["dry_run"] else "changed"
        request.state.note = f"{label}: {name} {verb} {done}"
        answer = {
            "action": name,
            "dry_run": asked["dry_run"],
            "who": label,
            "changes": [asdict(c) for c in changes],
            "summary": f"{done} chunk{'' if done == 1 else 's'} {verb}",
        }
        return self.reply(200, (json.dumps(answer) + "\n").encode(), "application/json")


async def _body(request: Request) -> bytes:
    parts, size = [], 0
    async for part in request.stream():
        size += len(part)
        if size > MAX_BODY:
            raise Refused(413, f"an action's body is over {MAX_BODY} bytes")
        parts.append(part)
    return b"".join(parts)
