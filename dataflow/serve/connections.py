"""The server's connections: how many it holds at once and how long a request may take
to arrive, so that slow and idle clients cannot keep the others from being answered.

- A request's line and headers must arrive within ``header_timeout`` seconds (of the
  connection, or of the answer before it on a connection kept alive), its body within
  ``body_timeout`` seconds of its headers; else the connection is closed (a request
  begun gets ``408`` first).
- At most ``most`` connections at once. One past that closes the oldest connection with
  no request under way (headers half sent, idle between two requests), else the oldest
  still sending its body; if every one has a request under way, the new one gets
  ``503`` and is closed. ``most`` is kept below the open-file limit (``ulimit -n``),
  leaving room for the store and the landing files.

The connections closed this way are logged together, one line a second at most.
"""

from __future__ import annotations

import asyncio
import resource
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

MOST = 1000  # connections at once, by default
HEADER_TIMEOUT = 10.0  # seconds a request's line and headers may take, by default
BODY_TIMEOUT = 30.0  # seconds its body may take, by default
RESERVED = 256  # open files kept for the store, the landing files, the worker threads
BUSY = b"HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\n"
TIMED_OUT = b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n"
CLOSE = b"Connection: close\r\n\r\n"


@dataclass(frozen=True)
class Limits:
    """``utility serve``'s ``--max-connections``, ``--header-timeout``, ``--body-timeout``."""

    most: int = MOST
    header_timeout: float = HEADER_TIMEOUT
    body_timeout: float = BODY_TIMEOUT


def most_open(wanted: int) -> int:
    """``wanted`` connections, or fewer if this process's open-file limit leaves no
    room for them beside its other files."""
    files = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    if files == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, files - min(RESERVED, files // 4)))


class Guard:
    """The connections of one server, oldest first, and the tally of those it closed."""

    def __init__(self, limits: Limits, log: Callable[[str], None]):
        self.limits = limits
        self._log = log
        self._open: dict[Connection, None] = {}  # in the order they came
        self._closed: Counter[str] = Counter()
        self._flush: asyncio.TimerHandle | None = None

    def admit(self, connection: Connection) -> bool:
        """Whether ``connection`` may stay: room is made by closing another if needed."""
        while len(self._open) >= self.limits.most:
            victim = self._victim()
            if victim is None:
                self.closed(f"over --max-connections {self.limits.most}, every one busy")
                return False
            if not victim.transport.is_closing():  # else it was going anyway
                self.closed(f"over --max-connections {self.limits.most}")
            victim.close(None)
        self._open[connection] = None
        return True

    def forget(self, connection: Connection) -> None:
        self._open.pop(connection, None)

    def _victim(self) -> Connection | None:
        sending = None
        for connection in self._open:
            if not connection.under_way():
                return connection
            if sending is None and connection.sending():
                sending = connection
        return sending

    def closed(self, why: str) -> None:
        """Count a connection closed for ``why``; logged within a second."""
        self._closed[why] += 1
        if self._flush is None:
            self._flush = asyncio.get_running_loop().call_later(1.0, self._report)

    def _report(self) -> None:
        self._flush = None
        total = sum(self._closed.values())
        why = ", ".join(f"{count} {reason}" for reason, count in self._closed.items())
        self._closed.clear()
        self._log(f"closed {total} connection{'' if total == 1 else 's'}: {why}")


class Connection(H11Protocol):
    """uvicorn's HTTP/1.1 connection, held to the ``guard``'s limits."""

    guard: Guard  # set on the class made for each server (``protocol_for``)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._phase = ""  # what is awaited from the client: "headers", "body" or ""
        self._timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if self.guard.admit(self):
            self._watch()
        else:
            transport.write(BUSY + CLOSE)
            transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self.guard.forget(self)
        self._stop_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._watch()

    def under_way(self) -> bool:
        """Whether the application has a request of this connection in hand."""
        return self.cycle is not None and not self.cycle.response_complete

    def sending(self) -> bool:
        return self.conn.their_state is h11.SEND_BODY

    def close(self, answer: bytes | None) -> None:
        """Close, sending ``answer`` first if the client is not in the middle of one."""
        self.guard.forget(self)
        self._stop_timer()
        if not self.transport.is_closing():
            if answer and not self.under_way() and self.conn.our_state is h11.IDLE:
                self.transport.write(answer + CLOSE)
            self.transport.close()

    def _watch(self) -> None:
        """(Re)arm the timer for what the client is to send next."""
        state = self.conn.their_state
        if self.transport.is_closing():
            phase = ""
        elif state is h11.IDLE:
            phase = "headers"
        elif state is h11.SEND_BODY:
            phase = "body"
        else:  # the request is whole: the application answers, no client is awaited
            phase = ""
        if phase == self._phase:
            return
        self._stop_timer()
        self._phase = phase
        if phase:
            limits = self.guard.limits
            seconds = limits.header_timeout if phase == "headers" else limits.body_timeout
            self._timer = self.loop.call_later(seconds, self._expired, phase, seconds)

    def _expired(self, phase: str, seconds: float) -> None:
        self._timer = None
        begun = phase == "body" or bool(self.conn.trailing_data[0])
        if not self.under_way():  # a request under way is logged by its own answer
            option = "--header-timeout" if phase == "headers" else "--body-timeout"
            what = "no whole request" if phase == "headers" else "no whole body"
            self.guard.closed(f"{what} within {option} {seconds:g} s")
        self.close(TIMED_OUT if begun else None)

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._phase = ""


def protocol_for(guard: Guard) -> type[Connection]:
    """The connection class of one server (uvicorn makes one per connection)."""
    return type("Connection", (Connection,), {"guard": guard})
