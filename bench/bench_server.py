"""The workspace service under load: 50 concurrent clients on loopback, SQLite vs PostgreSQL.

``workspacefs serve`` runs as users run it (one uvicorn process, bearer auth on). Fifty keep-alive HTTP/1.1
connections, driven by a minimal asyncio client (so the client costs little of the machine's CPU), send:

- ``none``: ``GET /healthz``, no token, no table: the framework's own floor (routing, HTTP, the middleware);
- ``floor``: ``GET /v1/agents`` with an agent-scoped token, which reads only the token's row (one indexed
  lookup, never cached, so revocation is immediate): the framework's cost per *authenticated* request. Issue
  15's target is a share of ``none`` (its floor is "a request that touches no table"); this one is shown beside
  it, since a file request pays the token's lookup too (in the same statement as its session);
- ``read``: ``GET /fs/{path}`` of a random 1 KiB file (JSON with content and ETag);
- ``write``: ``PUT /fs/{path}`` of new 1 KiB content, each client over its own 20 files.

It prints requests per second, p50 and p99 latency, errors (any non-2xx answer or a broken connection;
there must be none), the service process's CPU time per request (user + system, from ``/proc``), and each
row's throughput as a ratio of the authenticated floor (``÷floor``) and of the
no-table one (``÷none``). PostgreSQL runs on a throwaway
local server (``fsync=off``, like the tests); the SQLite file lives in a temporary directory on disk.

Each phase runs ``--repeat`` times (default 3), interleaved with the others, and the fastest run of each is
shown: on a shared machine the load drifts, and the ratios must compare phases run under the same conditions.

Run: ``python bench/bench_server.py [--clients 50] [--requests 4000] [--repeat 3]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workspacefs import SqlFilesystem, SqlStore
from workspacefs.server import SessionCatalog, TokenStore
from workspacefs.testing._postgres import running_postgres
from workspacefs.testing._service import running_service

AGENT = "bench"
SESSION = "bench-session"
FILES = 1000
BODY = "x" * 1000 + "\n"


@dataclass
class Result:
    """One phase of one backend."""

    requests: int
    seconds: float
    latencies: list[float]
    errors: int
    cpu_seconds: float = float("nan")
    """The service process's CPU time (user + system) over the phase."""

    @property
    def cpu_us(self) -> float:
        """The service's CPU microseconds per request."""
        return self.cpu_seconds * 1e6 / self.requests

    @property
    def rps(self) -> float:
        return self.requests / self.seconds

    def percentile(self, fraction: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))] * 1000


async def _read_response(reader: asyncio.StreamReader) -> int:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = 0
    for line in lines[1:]:
        name, _, value = line.partition(":")
        if name.lower() == "content-length":
            length = int(value)
    if length:
        await reader.readexactly(length)
    return status


RequestMaker = Callable[[int, int], bytes]


async def _client(port: int, make: RequestMaker, client: int, count: int, latencies: list[float]) -> int:
    errors = 0
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for n in range(count):
            request = make(client, n)
            started = time.perf_counter()
            writer.write(request)
            try:
                status = await _read_response(reader)
            except (asyncio.IncompleteReadError, ConnectionError):
                errors += 1
                writer.close()
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                continue
            latencies.append(time.perf_counter() - started)
            if not 200 <= status < 300:
                errors += 1
    finally:
        writer.close()
    return errors


async def phase(ports: int | Sequence[int], make: RequestMaker, clients: int, total: int) -> Result:
    """``total`` requests from ``clients`` keep-alive connections; with several ports (several processes of
    one service), client ``c`` talks to ``ports[c % len(ports)]``: round robin, as a load balancer would."""
    spread = [ports] if isinstance(ports, int) else list(ports)
    per_client = max(1, total // clients)
    latencies: list[float] = []
    started = time.perf_counter()
    errors = await asyncio.gather(
        *(_client(spread[c % len(spread)], make, c, per_client, latencies) for c in range(clients))
    )
    elapsed = time.perf_counter() - started
    return Result(per_client * clients, elapsed, latencies, sum(errors))


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds process ``pid`` has used so far (``nan`` where ``/proc`` has no such file)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _request(method: str, path: str, token: str, body: bytes = b"") -> bytes:
    head = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", f"Authorization: Bearer {token}", "Connection: keep-alive"]
    if body:
        head += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def seed(url: str, **store_options: Any) -> str:
    """The session the load runs in, with FILES small files; returns an agent-scoped token. ``store_options``
    go to ``SqlStore`` (a content store, its threshold)."""
    store = SqlStore(url, **store_options)
    catalog = SessionCatalog(store)
    entry = catalog.get(AGENT, SESSION) or catalog.create(AGENT, SESSION)
    fs = SqlFilesystem(store, entry.storage_id, create=False)
    for index in range(FILES):
        fs.write(f"data/d{index % 10}/f{index:04d}.txt", BODY)
    token, _ = TokenStore(store).create(agent_id=AGENT, label="bench", rate_limit=0)  # load, not a rate limit
    store.close()
    return token


def request_makers(token: str) -> dict[str, RequestMaker]:
    """The phases' requests with ``token``: ``none`` (``/healthz``: no token, no table), ``floor`` (the token's
    row only), ``read`` (a random seeded file), ``write`` (new content)."""
    base = f"/v1/agents/{AGENT}/sessions/{SESSION}/fs"
    rng = random.Random(7)

    def none(_client: int, _n: int) -> bytes:
        return b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n"

    def floor(_client: int, _n: int) -> bytes:
        return _request("GET", "/v1/agents", token)

    def read(_client: int, _n: int) -> bytes:
        index = rng.randrange(FILES)
        return _request("GET", f"{base}/data/d{index % 10}/f{index:04d}.txt", token)

    def write(client: int, n: int) -> bytes:
        index = client * 20 + n % 20
        payload = json.dumps({"content": f"{client}:{n}:" + BODY}).encode()  # new content every time
        return _request("PUT", f"{base}/data/d{index % 10}/f{index:04d}.txt", token, payload)

    return {"none": none, "floor": floor, "read": read, "write": write}


def run_backend(name: str, url: str, clients: int, total: int, repeat: int = 1) -> dict[str, Result]:
    """Each phase ``repeat`` times, interleaved (a shared machine's load drifts between phases), keeping each
    phase's fastest run; errors are summed over all runs."""
    makers = request_makers(seed(url))
    results: dict[str, Result] = {}
    with running_service(url) as service:
        port = int(service.url.rsplit(":", 1)[1])
        asyncio.run(phase(port, makers["read"], clients, min(total, 1000)))  # warm up: connections, caches, pools
        for _ in range(repeat):
            for label, make in makers.items():
                used = cpu_seconds(service.pid)
                row = asyncio.run(phase(port, make, clients, total))
                row.cpu_seconds = cpu_seconds(service.pid) - used
                kept = results.get(label)
                if kept is not None:
                    row.errors += kept.errors
                    if kept.rps >= row.rps:
                        kept.errors = row.errors
                        row = kept
                results[label] = row
        for label, row in results.items():
            print(
                f"{name:<11} {label:<6} {row.requests:>7} {row.rps:>9.0f} {row.percentile(0.5):>8.1f}"
                f" {row.percentile(0.99):>8.1f} {row.errors:>7} {row.cpu_us:>10.0f}"
                f" {row.rps / results['floor'].rps:>8.2f}"
                f" {row.rps / results['none'].rps:>8.2f}",
                flush=True,
            )
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=4000, help="requests per phase")
    parser.add_argument("--repeat", type=int, default=3, help="interleaved runs of each phase; the fastest is shown")
    parser.add_argument("--skip-postgres", action="store_true")
    args = parser.parse_args()
    print(
        f"{args.clients} concurrent keep-alive clients, {args.requests} requests per phase, 1 KiB files,"
        f" best of {args.repeat} interleaved runs"
    )
    head = f"{'backend':<11} {'op':<6} {'reqs':>7} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}"
    print(f"{head} {'CPU µs/req':>10} {'÷floor':>8} {'÷none':>8}")
    errors = 0
    with tempfile.TemporaryDirectory(prefix="wsfs-bench-server-", dir=str(Path.home())) as scratch:
        for row in run_backend(
            "sqlite", f"sqlite:///{scratch}/service.db", args.clients, args.requests, args.repeat
        ).values():
            errors += row.errors
    if not args.skip_postgres:
        with running_postgres("wsfs_bench_server") as pg_url:
            for row in run_backend("postgresql", pg_url, args.clients, args.requests, args.repeat).values():
                errors += row.errors
    if errors:
        raise SystemExit(f"{errors} requests failed")


if __name__ == "__main__":
    main()
