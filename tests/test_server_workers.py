"""The service's worker threads (``server/_workers.py``): what anyio's ``to_thread.run_sync`` gave, kept — the
caller's context, a bound on the threads, errors raised in the caller, a cancelled caller waiting for its call."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time

import anyio
import pytest

from workspacefs.server._workers import WorkerPool

_WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")


def test_a_call_runs_in_a_worker_thread_with_the_callers_context_variables() -> None:
    pool = WorkerPool(2)

    def seen() -> tuple[str, bool]:
        return _WHO.get(), threading.current_thread() is threading.main_thread()

    async def main() -> tuple[str, bool]:
        _WHO.set("agent-7")
        return await pool.run(seen)

    assert asyncio.run(main()) == ("agent-7", False)


def test_no_more_calls_run_at_once_than_the_pool_has_threads() -> None:
    pool = WorkerPool(2)
    lock = threading.Lock()
    running = peak = 0
    release = threading.Event()

    def work(n: int) -> int:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        release.wait(10)
        with lock:
            running -= 1
        return n * n

    async def main() -> list[int]:
        calls = [asyncio.ensure_future(pool.run(work, n)) for n in range(6)]
        while True:  # until two calls run (the others wait in the queue)
            with lock:
                if running == 2:
                    break
            await asyncio.sleep(0.01)
        release.set()
        return list(await asyncio.gather(*calls))

    assert asyncio.run(main()) == [0, 1, 4, 9, 16, 25]
    assert peak == 2 and pool.threads <= 2


def test_a_calls_error_is_raised_in_the_caller() -> None:
    pool = WorkerPool(1)

    def fail() -> None:
        raise FileNotFoundError("a.txt")

    def stop() -> None:
        raise StopIteration  # a future cannot carry it: it arrives as a RuntimeError

    with pytest.raises(FileNotFoundError, match=r"a\.txt"):
        asyncio.run(pool.run(fail))
    with pytest.raises(RuntimeError, match="StopIteration"):
        asyncio.run(pool.run(stop))
    assert asyncio.run(pool.run(len, "abc")) == 3  # the thread lives on


def test_a_cancelled_caller_waits_until_its_call_has_ended() -> None:
    """As anyio's ``run_sync``: a call is never abandoned (a writer must never be used by two threads at once)."""
    pool = WorkerPool(1)
    started, release = threading.Event(), threading.Event()
    ended: list[str] = []

    def work() -> None:
        started.set()
        release.wait(10)
        ended.append("call")

    async def main() -> None:
        async with anyio.create_task_group() as group:
            group.start_soon(pool.run, work)
            while not started.is_set():
                await asyncio.sleep(0.01)
            group.cancel_scope.cancel()
            threading.Timer(0.1, release.set).start()
        ended.append("caller")

    asyncio.run(main())
    assert ended == ["call", "caller"]


def test_idle_threads_leave_and_come_back_when_needed() -> None:
    pool = WorkerPool(3, idle_seconds=0.05)

    async def burst() -> list[int]:
        return list(await asyncio.gather(*(pool.run(abs, -n) for n in range(20))))

    assert asyncio.run(burst()) == list(range(20))
    assert 1 <= pool.threads <= 3
    deadline = time.monotonic() + 30
    while pool.threads and time.monotonic() < deadline:
        time.sleep(0.02)
    assert pool.threads == 0
    assert asyncio.run(burst()) == list(range(20))
    assert pool.threads >= 1
