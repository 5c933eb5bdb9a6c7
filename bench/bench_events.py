"""Change events: how long from a write to its Server-Sent Event at a client, SQLite vs PostgreSQL.

``workspacefs serve`` runs as users run it (uvicorn, bearer auth on, loopback). One client holds
``GET …/events`` open; another sends ``PUT /fs/{path}`` of 1 KiB, one at a time, and the time from just before
the write is sent to the arrival of its ``change`` event at the stream's reader is one sample (so it holds the
write's own round trip too, which is printed beside it). Rows:

- ``sqlite``: the write and the stream on one ``serve`` process (the process's watchers hear its commits);
- ``postgresql``: the same on a throwaway local PostgreSQL (``fsync=off``), where the stream hears the change
  through ``LISTEN``/``NOTIFY``;
- ``postgresql, 2 procs``: the write through a second ``serve`` process on the same database.

It prints the median and p99 of the event latency and of the write alone, and checks every event arrived once.

Run: ``python bench/bench_events.py [--writes 300]``.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx

from workspacefs import SqlStore
from workspacefs.server import TokenStore
from workspacefs.testing._events import EventClient
from workspacefs.testing._postgres import running_postgres
from workspacefs.testing._service import running_service

AGENT = "bench"
BODY = "x" * 1023 + "\n"


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


@contextmanager
def services(url: str, count: int) -> Iterator[tuple[list[str], str]]:
    """``count`` serve processes on database ``url`` and a token of the bench agent."""
    store = SqlStore(url)
    token = TokenStore(store).create(agent_id=AGENT, rate_limit=0)[0]
    store.close()
    with ExitStack() as stack:
        urls = [stack.enter_context(running_service(url)).url for _ in range(count)]
        yield urls, token


def measure(writer_url: str, stream_url: str, token: str, writes: int) -> tuple[list[float], list[float]]:
    """Event latencies and write latencies (seconds) of ``writes`` sequential writes."""
    headers = {"Authorization": f"Bearer {token}"}
    session = f"events-{time.monotonic_ns()}"
    base = f"/v1/agents/{AGENT}/sessions/{session}"
    with httpx.Client(base_url=writer_url, headers=headers, timeout=60) as api:
        assert api.post(f"/v1/agents/{AGENT}/sessions", json={"id": session}).status_code == 201
        for n in range(20):  # the files exist, so every measured write is an overwrite
            assert api.post(f"{base}/fs/f{n}.txt", json={"content": BODY}).status_code == 201
        stream = EventClient(stream_url + base + "/events", headers)
        assert stream.status == 200
        events, requests = [], []
        try:
            for n in range(writes + 10):
                body = {"content": f"{n}\n" + BODY}
                start = time.perf_counter()
                answer = api.put(f"{base}/fs/f{n % 20}.txt", json=body)
                answered = time.perf_counter()
                assert answer.status_code == 200, answer.text
                event = stream.next(60)
                assert event.data["path"] == f"/f{n % 20}.txt", event.data
                if n >= 10:  # warm-up: connections, statement caches
                    events.append(event.received - start)
                    requests.append(answered - start)
        finally:
            stream.drop()
    return events, requests


def row(name: str, events: list[float], requests: list[float]) -> str:
    ms = 1000
    return (
        f"{name:<22} {len(events):>6} {statistics.median(events) * ms:>9.2f} {percentile(events, 0.99) * ms:>9.2f}"
        f" {statistics.median(requests) * ms:>9.2f} {percentile(requests, 0.99) * ms:>9.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writes", type=int, default=300)
    arguments = parser.parse_args()
    print(f"{'write → SSE event':<22} {'events':>6} {'p50 ms':>9} {'p99 ms':>9} {'write p50':>9} {'write p99':>9}")
    with tempfile.TemporaryDirectory() as scratch, services(f"sqlite:///{Path(scratch) / 'events.db'}", 1) as sqlite:
        ([url], token) = sqlite
        print(row("sqlite", *measure(url, url, token, arguments.writes)), flush=True)
    with running_postgres() as pg, services(pg, 2) as ([first, second], token):
        print(row("postgresql", *measure(first, first, token, arguments.writes)), flush=True)
        print(row("postgresql, 2 procs", *measure(second, first, token, arguments.writes)), flush=True)


if __name__ == "__main__":
    main()
