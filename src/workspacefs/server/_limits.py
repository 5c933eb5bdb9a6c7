"""How much a request may carry and how often a token may ask: the JSON body limit and per-token rate limits.

JSON bodies are read into memory, so they are bounded well below what storage accepts; content of any size
goes as a raw body (``Content-Type: application/octet-stream``), which the upload endpoints stream in fixed
memory and this limit never touches. Rate limits are token buckets kept in this process's memory: checking
one costs no database round trip (see README: with several processes each one counts on its own).
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from urllib.parse import unquote_to_bytes

from workspacefs.server._errors import ASGIApp, Message, Receive, Scope, Send, error_body

__all__ = ["DEFAULT_MAX_JSON_BYTES", "DEFAULT_RATE_LIMIT", "BodyLimit", "RateLimiter", "refuse_undecodable_url"]

DEFAULT_MAX_JSON_BYTES = 4 * 1024 * 1024
"""A JSON request body is held in memory whole: 4 MiB covers any source file; larger content streams raw."""
DEFAULT_RATE_LIMIT = 1200
"""Requests per minute a token may send unless it carries its own limit (0: no limit)."""
_MAX_BUCKETS = 50_000


Streams = Callable[[str, str], bool]
"""Whether a request (method, path) goes to an endpoint that streams a raw body (``_files.streams_raw``)."""


class BodyLimit:
    """ASGI middleware: refuse (413) a non-streaming request body over ``max_bytes`` before reading it all.

    Raw uploads (``application/octet-stream``) to the endpoints that stream and count them (``streams``) are
    exempt; every other endpoint reads its body whole, whatever its type, so every other body is bounded (a
    raw body to ``POST /v1/signin``, which needs no token, was held whole in memory: 256 MiB took 514 MiB).
    """

    def __init__(self, app: ASGIApp, *, max_bytes: int, streams: Streams) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.streams = streams

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS"):
            await self.app(scope, receive, send)
            return
        headers = {k.lower(): v for k, v in scope.get("headers", [])}
        raw = headers.get(b"content-type", b"").split(b";")[0].strip().lower() == b"application/octet-stream"
        path, mounted = scope.get("path", ""), scope.get("root_path", "")
        if raw and self.streams(scope["method"], path[len(mounted) :] if path.startswith(mounted) else path):
            await self.app(scope, receive, send)
            return
        declared = headers.get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                await self._refuse(send)
                return
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Send) -> None:
        limit = f"{self.max_bytes // (1024 * 1024)} MiB" if self.max_bytes >= 1024 * 1024 else f"{self.max_bytes} bytes"
        message = (
            f"Request bodies other than raw uploads are limited to {limit}; send larger content as a raw body "
            "(Content-Type: application/octet-stream) to POST or PUT …/fs/{path}, which streams it"
        )
        payload = json.dumps(error_body("too_large", message)).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 413,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": payload})


class RateLimiter:
    """A token bucket per API token: it holds up to one minute's allowance and refills continuously, so a
    token may send ``per_minute`` requests at once and ``per_minute`` a minute after that."""

    def __init__(self, default_per_minute: int = DEFAULT_RATE_LIMIT) -> None:
        if default_per_minute < 0:
            raise ValueError("a rate limit is a number of requests per minute, 0 for none")
        self.default_per_minute = default_per_minute
        self._buckets: dict[str, tuple[float, float]] = {}  # key -> (allowance left, when it was counted)
        self._lock = threading.Lock()

    def take(self, key: str, per_minute: int | None) -> int | None:
        """Count one request of ``key``: ``None`` if allowed, else the whole seconds until one would be."""
        limit = self.default_per_minute if per_minute is None else per_minute
        if limit <= 0:
            return None
        refill = limit / 60.0  # per second
        now = time.monotonic()
        with self._lock:
            if len(self._buckets) > _MAX_BUCKETS:  # only valid tokens get here; forget the idle ones (full again)
                self._buckets = {k: v for k, v in self._buckets.items() if now - v[1] < 60.0}
            left, then = self._buckets.get(key, (float(limit), now))
            left = min(float(limit), left + (now - then) * refill)
            allowed = left >= 1.0
            self._buckets[key] = (left - 1.0 if allowed else left, now)
        return None if allowed else max(1, math.ceil((1.0 - left) / refill))


async def refuse_undecodable_url(scope: Scope, send: Send) -> bool:
    """Refuse (400) a URL whose percent-escapes are not UTF-8, and say so; ``True`` when it did.

    The server decodes such escapes to U+FFFD, so ``POST …/fs/caf%E9`` (Latin-1) would create a file named
    ``caf\ufffd``, and two different names would land on the same file. Only a URL holding ``%`` is looked at.
    """
    for part, code, raw in (
        ("path", "invalid_path", scope.get("raw_path") or b""),
        ("query string", "bad_request", scope.get("query_string") or b""),
    ):
        if b"%" not in raw:
            continue
        try:
            unquote_to_bytes(raw).decode("utf-8")
        except UnicodeDecodeError as exc:
            message = (
                f"The URL's {part} has percent-escapes that are not UTF-8 ({exc.reason} at byte {exc.start}); "
                "percent-encode names as UTF-8 bytes"
            )
            payload = json.dumps(error_body(code, message)).encode()
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
            await send({"type": "http.response.start", "status": 400, "headers": headers})
            await send({"type": "http.response.body", "body": payload})
            return True
    return False
