"""The process that sends one alert with Apprise: ``python -m dataflow.run.listeners.alertsend``.

It reads ``{"urls": [...], "title": ..., "body": ..., "type": ..., "wait": s, "bound": s}``
(``type``: Apprise's notification type, ``info``, ``success``, ``warning`` or ``failure``) as JSON on
stdin (a URL may hold a token: never on a command line) and prints, per URL in order,
one JSON line ``[index, "sent" | "failed" | "unknown", why]`` as soon as it is known;
``[-1, "missing", ""]`` when Apprise is not installed. ``why`` never holds the URL.
Its parent (:mod:`.alerts`) bounds it in time (``bound``) and kills it past the bound.
"""

from __future__ import annotations

import json
import logging
import math
import re
import signal
import sys

WAIT_S = 4.0  # a server's connect and read timeouts, unless told less


def _secrets(url: str) -> list[str]:
    """The parts of a URL that may be secret: all but its scheme and host, longest first."""
    rest = url.split("://", 1)[-1]
    parts = re.split(r"[/:@?&=#,]+", rest)
    return sorted((p for p in parts if len(p) >= 3), key=len, reverse=True)


def _why(messages: list[str], url: str) -> str:
    """Apprise's last complaint, one line, without any part of the URL that may be secret."""
    text = " ".join(" ".join(messages[-2:]).split())
    for part in _secrets(url):
        text = text.replace(part, "***")
    return text[:200]


class _Heard(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            self.messages.append(record.getMessage())


def _refused(url: str) -> str | None:
    """The host's policy checked again on the URL as Apprise itself reads it (its
    scheme, host, port and every query parameter, headers and payload ones included):
    where the two readings differ, the one that sends decides."""
    from apprise.utils.parse import parse_url, parse_urls

    from dataflow.policy import load

    if parse_urls(url) != [url]:
        return "Apprise reads it as several URLs"
    parsed = parse_url(url, verify_host=False)
    if not parsed:
        return "not a URL Apprise reads"
    port = str(parsed["port"]) if parsed.get("port") else None
    params = list(parsed.get("qsd") or {})
    return load().alert_refusal(parsed["schema"], parsed.get("host") or "", port, params)


def _say(index: int, result: str, why: str = "") -> None:
    print(json.dumps([index, result, why]), flush=True)


def main() -> int:
    request = json.loads(sys.stdin.read())
    # its own bound too: a sender whose parent died (killed, with no time to kill it)
    # does not linger on a server that trickles its answer
    signal.alarm(math.ceil(float(request.get("bound", 60))) + 1)
    try:
        import apprise
    except ImportError:
        _say(-1, "missing")
        return 0
    heard = _Heard()
    logging.getLogger("apprise").addHandler(heard)
    logging.getLogger("apprise").setLevel(logging.INFO)
    wait = min(float(request.get("wait", WAIT_S)), WAIT_S)
    kind = request.get("type", "info")
    if kind not in {str(t.value) for t in apprise.NotifyType}:  # never a reason to send none
        kind = "info"
    for index, url in enumerate(request["urls"]):
        heard.messages.clear()
        # no plugin folders, nothing kept on disk: the URL (allowed by the host's policy,
        # dataflow.policy, before it reaches this process) is all Apprise is given
        sender = apprise.Apprise(asset=apprise.AppriseAsset(plugin_paths=[], storage_mode="memory"))
        if why := _refused(url):
            _say(index, "refused", why)
            continue
        if not sender.add(url):
            _say(index, "unknown", "not a URL Apprise knows")
            continue
        for server in sender:
            server.socket_connect_timeout = server.socket_read_timeout = wait
        try:
            sent = sender.notify(title=request["title"], body=request["body"], notify_type=kind)
        except Exception as exc:  # a plugin's bug: this URL failed, the others still go
            sent, heard.messages = False, [type(exc).__name__]
        _say(index, "sent" if sent else "failed", "" if sent else _why(heard.messages, url))
    return 0


if __name__ == "__main__":
    sys.exit(main())
