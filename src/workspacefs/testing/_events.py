"""A small Server-Sent Events client over a plain socket, for tests and benchmarks of ``GET …/events``.

A background thread parses the stream into :class:`ServerEvent` values on a queue; :meth:`EventClient.drop`
cuts the connection the way a network failure does (the socket shut down under a blocked read), so a test
can reconnect with the last id it saw, as ``EventSource`` does.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import queue
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

__all__ = ["EventClient", "ServerEvent"]


@dataclass(frozen=True, slots=True)
class ServerEvent:
    """One event: its ``id`` (``None``: none given), ``event`` name, ``data`` (JSON-decoded) and arrival time."""

    id: str | None
    event: str
    data: Any
    received: float


class EventClient:
    """``GET url`` as an event stream (``headers`` e.g. the bearer token and ``Last-Event-ID``)."""

    def __init__(self, url: str, headers: dict[str, str] | None = None, *, timeout: float = 60.0) -> None:
        parts = urlsplit(url)
        self._connection = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port, timeout=timeout)
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        self._connection.request("GET", target, headers={"Accept": "text/event-stream", **(headers or {})})
        self.response = self._connection.getresponse()
        self.status = self.response.status
        self.events: queue.Queue[ServerEvent | None] = queue.Queue()
        self.comments: list[str] = []
        self._thread = threading.Thread(target=self._read, name="sse-client", daemon=True)
        if self.status == 200:
            self._thread.start()

    def _read(self) -> None:
        fields: dict[str, str] = {}
        data: list[str] = []
        try:
            while True:
                raw = self.response.fp.readline()
                if not raw:
                    break
                line = raw.decode("utf-8").rstrip("\r\n")
                if not line:
                    if data:
                        self.events.put(
                            ServerEvent(
                                fields.get("id"),
                                fields.get("event", "message"),
                                json.loads("\n".join(data)),
                                time.perf_counter(),
                            )
                        )
                    fields, data = {}, []
                elif line.startswith(":"):
                    self.comments.append(line[1:].strip())
                else:
                    name, _, value = line.partition(":")
                    value = value[1:] if value.startswith(" ") else value
                    if name == "data":
                        data.append(value)
                    else:
                        fields[name] = value
        except (OSError, ValueError, AttributeError):
            pass  # dropped (a closed response has no fp)
        finally:
            self.events.put(None)

    def next(self, timeout: float = 60.0) -> ServerEvent:
        """The next event (``TimeoutError`` after ``timeout`` seconds, ``EOFError`` when the stream ended)."""
        try:
            event = self.events.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"no event within {timeout} s") from None
        if event is None:
            self.events.put(None)
            raise EOFError("the stream ended")
        return event

    def take(self, count: int, timeout: float = 60.0) -> list[ServerEvent]:
        """The next ``count`` events."""
        return [self.next(timeout) for _ in range(count)]

    def drop(self) -> None:
        """Cut the connection under the reader, as a failing network does."""
        sock = self._connection.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        self._connection.close()
        self._thread.join(30)

    close = drop

    def __enter__(self) -> EventClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.drop()
