"""``GET …/events``: a session's changes as Server-Sent Events, resumable from the journal.

One ``change`` event per path of a journal entry, ``id: <entry_id>:<index>`` (the change's position in its
entry), ``data`` the :class:`~workspacefs.server._history_models.EventModel` JSON. A client that reconnects
with ``Last-Event-ID: 12:0`` (what ``EventSource`` sends by itself) first gets the rest of entry 12, then every
later entry from the journal oldest first, then live events: the stream subscribes (``fs.watch``) *before*
it reads that backlog, and drops a live event already sent, so nothing is lost between the two and nothing
comes twice. ``Last-Event-ID: 12`` means all of entry 12 was seen.

Why per change with the entry's index: an operation made of several transactions (a move, a tree copy, an
undo) reaches watchers as each commits, so one entry can grow after its first event; counting the changes
sent per entry lets the stream send exactly the new ones. A live event is rendered from the journal entry
(``fs.history_entry``), so it carries the operation and the entry's actor, like the backlog.

A change made outside workspacefs (a host directory edited by hand) has no entry: its event has no ``id``
(``EventSource`` keeps the last one). A comment (``: keep-alive``) goes out when nothing else did for
``keepalive`` seconds, which is also how a vanished client is noticed at the latest; every ``keepalive`` seconds,
busy or quiet, the stream also reads its credentials and session again. The stream ends when
the client disconnects or the service stops, closing its watcher.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import anyio
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from workspacefs.errors import HistoryEntryNotFoundError
from workspacefs.history import ChangeEvent, ChangeWatcher, JournalEntry
from workspacefs.paths import ROOT, is_within
from workspacefs.server._errors import ApiError, TooManyStreamsError
from workspacefs.server._history_models import event_model

__all__ = [
    "DEFAULT_KEEPALIVE",
    "DEFAULT_STREAMS_PER_TOKEN",
    "EventStream",
    "EventStreamResponse",
    "StreamPlaces",
    "parse_last_event_id",
]

DEFAULT_KEEPALIVE = 15.0
"""Seconds of silence before a keep-alive comment (proxies close idle connections; a gone client shows)."""
_REMEMBERED = 10_000
"""Entries whose sent changes are counted (an entry still growing is recent)."""
DEFAULT_STREAMS_PER_TOKEN = 32
"""Event streams one token may hold open at once (per process): each holds a thread and a watcher for as long as
it lasts, so without a bound one token could hold every thread the machine can start."""
_LAST_EVENT_ID = re.compile(r"^(\d{1,18})(?::(\d{1,9}))?$")
_POLL = 0.5
"""How often the stream looks whether the service is stopping, at most."""


class StreamPlaces:
    """How many event streams each token holds open (``""``: the service runs without auth), at most ``per_token``."""

    def __init__(self, per_token: int = DEFAULT_STREAMS_PER_TOKEN) -> None:
        self.per_token = per_token
        self._open: dict[str, int] = {}
        self._lock = threading.Lock()

    def take(self, key: str) -> Callable[[], None]:
        """A place for one more stream of ``key`` (429 ``too_many_streams`` when it holds ``per_token``): the
        function that gives it back (calling it again does nothing)."""
        with self._lock:
            held = self._open.get(key, 0)
            if held >= self.per_token:
                raise TooManyStreamsError(
                    f"This token already holds {held} open event streams (at most {self.per_token}); close one"
                )
            self._open[key] = held + 1
        given_back = threading.Event()

        def give_back() -> None:
            with self._lock:
                if given_back.is_set():
                    return
                given_back.set()
                left = self._open[key] - 1
                if left:
                    self._open[key] = left
                else:
                    del self._open[key]

        return give_back

    def held(self, key: str) -> int:
        """How many streams ``key`` holds open now."""
        with self._lock:
            return self._open.get(key, 0)


def parse_last_event_id(text: str | None) -> tuple[int, int | None] | None:
    """``"12:3"`` → ``(12, 3)``, ``"12"`` → ``(12, None)``, nothing → ``None``; 400 for anything else."""
    if text is None or not text.strip():
        return None
    found = _LAST_EVENT_ID.match(text.strip())
    if found is None:
        raise ApiError(400, "invalid_last_event_id", "Last-Event-ID must be an event id of this stream: ENTRY[:INDEX]")
    return int(found.group(1)), None if found.group(2) is None else int(found.group(2))


def _frame(entry: JournalEntry | None, index: int | None, event: ChangeEvent | None = None) -> bytes:
    data = event_model(entry, index, event).model_dump_json()
    head = f"id: {entry.entry_id}:{index}\n" if entry is not None else ""
    return f"{head}event: change\ndata: {data}\n\n".encode()


class EventStream:
    """The events of one connection: its backlog (on resume), then what its watcher hears.

    ``watcher`` is subscribed before the response starts (and before the backlog is read), so a client that
    has the response's headers misses nothing; :meth:`close` ends it. ``run`` runs blocking work (journal
    reads) in the service's thread pool; ``stopping`` is set when the service shuts down; ``allowed`` is asked
    again every ``keepalive`` seconds however busy the stream is (a revoked or expired token, or a deleted session,
    ends the stream then: a session changing more often than that once kept streaming to a revoked token)."""

    def __init__(
        self,
        fs: Any,
        watcher: ChangeWatcher,
        path: str,
        resume: tuple[int, int | None] | None,
        run: Callable[..., Any],
        *,
        keepalive: float = DEFAULT_KEEPALIVE,
        stopping: threading.Event | None = None,
        allowed: Callable[[], bool] | None = None,
        release: Callable[[], None] | None = None,
    ) -> None:
        self._fs = fs
        self._release = release
        self._watcher = watcher
        self._path = path
        self._resume = resume
        self._run = run
        self._keepalive = keepalive
        self._stopping = stopping or threading.Event()
        self._allowed = allowed
        self._sent: OrderedDict[int, int] = OrderedDict()
        """Entry id → how many of its changes were considered (sent, or outside ``path``)."""
        self._floor = resume[0] if resume is not None else None
        """Entries up to this id that the stream has not counted were seen before the reconnect."""
        self._floor_time: datetime | None = None if resume is None else datetime.now(UTC)
        """The time of the floor's entry (read with the backlog; while it cannot be read, the time the stream
        was opened, after its watcher subscribed): an entry up to the floor's id but later than this is new
        all the same (a composite's ids grow within each mount, not across them)."""

    def _wanted(self, entry: JournalEntry, index: int) -> bool:
        if self._path == ROOT:
            return True
        change = entry.changes[index]
        return any(p is not None and is_within(p, self._path) for p in (change.path, change.from_path))

    def _counted(self, entry_id: int, upto: int) -> None:
        self._sent[entry_id] = upto
        self._sent.move_to_end(entry_id)
        while len(self._sent) > _REMEMBERED:
            self._sent.popitem(last=False)

    def _rest_of(self, entry: JournalEntry, start: int) -> list[bytes]:
        """The frames of the entry's changes from ``start`` on, counted as sent."""
        frames = [_frame(entry, i) for i in range(start, len(entry.changes)) if self._wanted(entry, i)]
        self._counted(entry.entry_id, max(start, len(entry.changes)))
        return frames

    def backlog(self) -> list[bytes]:
        """What a resuming client missed: the rest of its last entry, then every later one, oldest first."""
        assert self._resume is not None
        last, index = self._resume
        frames: list[bytes] = []
        with contextlib.suppress(HistoryEntryNotFoundError):
            floor: JournalEntry = self._fs.history_entry(last)
            self._floor_time = floor.time
            if index is not None:
                frames += self._rest_of(floor, index + 1)
        path = None if self._path == ROOT else self._path
        for entry in reversed(self._fs.history(path, since=last, limit=None)):
            frames += self._rest_of(entry, 0)
        return frames

    def render(self, events: Sequence[ChangeEvent]) -> list[bytes]:
        """Frames for live events: each entry's changes not sent yet, read from the journal."""
        frames: list[bytes] = []
        done: set[int] = set()
        for event in events:
            entry_id = event.entry_id
            if entry_id is None:
                frames.append(_frame(None, None, event))
                continue
            if entry_id in done:
                continue
            done.add(entry_id)
            start = self._sent.get(entry_id)
            old = start is None and self._floor is not None and entry_id <= self._floor
            if old and self._floor_time is None:
                continue  # the client had it before it reconnected
            try:
                entry = self._fs.history_entry(entry_id)
            except HistoryEntryNotFoundError:  # pruned already: the event is all there is
                if not old:
                    frames.append(_frame(None, None, event))
                continue
            if old and self._floor_time is not None and entry.time <= self._floor_time:
                continue  # the client had it before it reconnected
            frames += self._rest_of(entry, start or 0)
        return frames

    async def body(self) -> AsyncIterator[bytes]:
        """The response body: subscribe, send the backlog, then live events and keep-alives until the end."""
        watcher = self._watcher
        queue: asyncio.Queue[ChangeEvent | None] = asyncio.Queue()
        threading.Thread(
            target=_pump, args=(watcher, asyncio.get_running_loop(), queue), name="wsfs-events", daemon=True
        ).start()
        try:
            yield b"retry: 1000\n: connected\n\n"
            if self._resume is not None:
                for frame in await self._run(self.backlog):
                    yield frame
            quiet_since = checked_at = time.monotonic()
            while not self._stopping.is_set():
                if time.monotonic() - checked_at >= self._keepalive:  # busy or quiet: a stream never outlives its right
                    if self._allowed is not None and not await self._run(self._allowed):
                        return
                    checked_at = time.monotonic()
                try:
                    first = await asyncio.wait_for(queue.get(), timeout=min(self._keepalive, _POLL))
                except TimeoutError:
                    if time.monotonic() - quiet_since >= self._keepalive:
                        quiet_since = time.monotonic()
                        yield b": keep-alive\n\n"
                    continue
                batch = [first]
                while not queue.empty():
                    batch.append(queue.get_nowait())
                if any(event is None for event in batch):
                    return  # the watcher closed
                frames = await self._run(self.render, [e for e in batch if e is not None])
                if frames:
                    quiet_since = time.monotonic()
                    yield b"".join(frames)
        finally:
            self.close()

    def close(self) -> None:
        """Stop watching and give the stream's place back (the response calls it however it ends, even before
        the body began)."""
        self._watcher.close()
        if self._release is not None:
            self._release()


def _pump(watcher: ChangeWatcher, loop: asyncio.AbstractEventLoop, queue: asyncio.Queue[ChangeEvent | None]) -> None:
    """Hand the watcher's events to the stream's event loop (a thread of its own: it blocks until closed)."""
    while True:
        event = watcher.next_event()
        with contextlib.suppress(RuntimeError):  # the loop is gone: the stream ended
            loop.call_soon_threadsafe(queue.put_nowait, event)
        if event is None:
            return


class EventStreamResponse(StreamingResponse):
    """``text/event-stream`` that always listens for the client's disconnect while it streams (Starlette
    relies on a failing send under ASGI 2.4, which a stream that is waiting for an event never makes)."""

    media_type = "text/event-stream"

    def __init__(self, stream: EventStream) -> None:
        self._stream = stream
        super().__init__(
            stream.body(),
            media_type=self.media_type,
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with anyio.create_task_group() as group:

            async def stream() -> None:
                with contextlib.suppress(OSError):  # the client went away mid-send
                    await self.stream_response(send)
                group.cancel_scope.cancel()

            try:
                group.start_soon(stream)
                await self.listen_for_disconnect(receive)
                group.cancel_scope.cancel()
            finally:
                self._stream.close()
