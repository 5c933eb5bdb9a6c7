"""The service's worker threads: where blocking (database) work runs, off the event loop.

anyio's ``to_thread.run_sync`` spent about 60 µs of CPU per call on top of the work (a capacity limiter, a
cancel scope, the lookup of its worker, a future per call), more than a small file's read in SQLite; this pool
hands a call to a waiting thread through a ``SimpleQueue`` and its outcome back with one ``call_soon_threadsafe``
(about 8 µs; ``bench/bench_server.py``). What anyio gave is kept: the caller's context variables travel with
the call (the request's actor, ``_actor.py``), at most ``size`` calls run at once and the rest wait in order,
and a caller cancelled while its call runs waits for the call to end before the cancellation goes on (never
abandoned, so a writer is never used by two threads at once). Threads start on demand and leave after
``idle_seconds`` without work, so a service that is never stopped leaves none behind for long.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import queue
import threading
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import anyio

__all__ = ["WorkerPool"]

T = TypeVar("T")


class _Call(Generic[T]):
    """One call on its way to a worker thread and its outcome on its way back to the event loop."""

    __slots__ = ("args", "context", "finished", "function", "future", "loop", "reported")

    def __init__(self, loop: asyncio.AbstractEventLoop, function: Callable[..., T], args: tuple[Any, ...]) -> None:
        self.loop = loop
        self.future: asyncio.Future[T] = loop.create_future()
        self.context = contextvars.copy_context()
        self.function = function
        self.args = args
        self.reported = False
        self.finished: asyncio.Future[None] | None = None
        """Made when the caller was cancelled while the call ran: set when it ends."""

    def run(self) -> None:
        """In a worker thread: run the call, then hand its outcome to the event loop."""
        error: BaseException | None = None
        result: Any = None
        try:
            result = self.context.run(self.function, *self.args)
        except StopIteration as exc:  # a future refuses it: it would end the awaiting coroutine quietly
            error = RuntimeError(f"{self.function!r} raised StopIteration")
            error.__cause__ = exc
        except BaseException as exc:  # the caller's to raise, as anyio's run_sync did
            error = exc
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits any more
            self.loop.call_soon_threadsafe(self.report, result, error)

    def report(self, result: T, error: BaseException | None) -> None:
        """On the event loop: the caller's answer (unless it was cancelled) and the end of any wait for it."""
        self.reported = True
        if not self.future.done():
            if error is None:
                self.future.set_result(result)
            else:
                self.future.set_exception(error)
        if self.finished is not None and not self.finished.done():
            self.finished.set_result(None)


class WorkerPool:
    """At most ``size`` threads running blocking calls for one event loop's coroutines (``await pool.run(f, x)``)."""

    def __init__(self, size: int, *, idle_seconds: float = 10.0) -> None:
        if size < 1:
            raise ValueError("a worker pool needs at least one thread")
        self.size = size
        self._idle_seconds = idle_seconds
        self._calls: queue.SimpleQueue[_Call[Any]] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        """One permit per thread waiting for work (a call that takes one needs no new thread)."""
        self._lock = threading.Lock()
        self._threads = 0

    @property
    def threads(self) -> int:
        """How many worker threads are alive now."""
        return self._threads

    async def run(self, function: Callable[..., T], *args: Any) -> T:
        """``function(*args)`` in a worker thread, in the caller's context; its result or its exception."""
        call = _Call(asyncio.get_running_loop(), function, args)
        self._calls.put(call)
        if not self._idle.acquire(blocking=False):
            self._grow()
        try:
            return await call.future
        except asyncio.CancelledError:
            if not call.reported:  # the call still runs: wait for it, as anyio's run_sync does
                call.finished = call.loop.create_future()
                with anyio.CancelScope(shield=True):
                    await call.finished
            raise

    def _grow(self) -> None:
        with self._lock:
            if self._threads >= self.size:
                return  # every thread is busy: the call waits in the queue for the first one free
            self._threads += 1
        threading.Thread(target=self._work, name="workspacefs-worker", daemon=True).start()

    def _work(self) -> None:
        while True:
            try:
                call = self._calls.get(timeout=self._idle_seconds)
            except queue.Empty:
                if self._retire():
                    return
                continue
            call.run()
            del call
            self._idle.release()

    def _retire(self) -> bool:
        """After ``idle_seconds`` without work: leave, unless a call came meanwhile and counts on this thread."""
        with self._lock:
            if not self._idle.acquire(blocking=False):
                return False  # a new call took this thread's permit: it is in the queue, or about to be
            if not self._calls.empty():
                self._idle.release()
                return False
            self._threads -= 1
            return True
