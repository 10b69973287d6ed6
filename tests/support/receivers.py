"""Receivers of what the toolkit sends over HTTP (alerts' webhooks, OpenLineage events), on
127.0.0.1, for the tests that check what was sent."""

from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def http_receiver(record, status: int = 200):
    """A receiver of POSTs on 127.0.0.1 (``server_address``: its address, ``url`` for the
    caller to set); ``got``: what ``record(path, headers, body)`` made of each POST, in
    the order it took them; each answered ``status``."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Taking(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.server.got.append(record(self.path, self.headers, body))  # type: ignore[attr-defined]
            self.send_response(status)
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Taking)
    server.got = []  # type: ignore[attr-defined]
    # polled every 50 ms, not 500: its shutdown at the end of each test waits one poll
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def lineage_receiver():
    """An OpenLineage HTTP receiver on 127.0.0.1 (its ``url``, for OPENLINEAGE_URL);
    ``got``: (path, body) of each POST it took, in the order it took them."""
    with http_receiver(lambda path, _, body: (path, body.decode()), 201) as server:
        server.url = f"http://127.0.0.1:{server.server_address[1]}"  # type: ignore[attr-defined]
        yield server


def lineage_events(receiver, secrets: tuple[str, ...] = ()) -> list[dict]:
    """The events a :func:`lineage_receiver` took, each checked against the OpenLineage
    RunEvent schema (tests/data, its formats too), sent to the client's path and holding
    none of ``secrets``."""
    from jsonschema import Draft202012Validator

    schema = (
        Path(__file__).parent.parent / "data" / "openlineage-runevent.schema.json"
    ).read_text()
    checker = Draft202012Validator.FORMAT_CHECKER
    validator = Draft202012Validator(json.loads(schema), format_checker=checker)
    events = []
    for path, body in receiver.got:
        assert path == "/api/v1/lineage"
        assert not [secret for secret in secrets if secret in body]
        event = json.loads(body)
        validator.validate(event)
        events.append(event)
    return events
