"""The deployment under load: 1 vs 3 ``workspacefs serve`` processes over ONE PostgreSQL database and ONE S3
content store (moto's server), and where the time goes.

Everything runs on this machine, on loopback: a throwaway PostgreSQL server (``fsync=off``), moto's S3 server,
and N service processes started as users start them (``python -m workspacefs serve --db postgresql://…
--content-store s3://…``). Fifty keep-alive HTTP/1.1 clients (``bench_server``'s minimal asyncio client, in
this process) are spread round robin over the processes' ports, as a load balancer would spread them, and
send, in turn:

- ``floor``: ``GET /v1/agents`` (the token's row only: the framework's own cost per authenticated request);
- ``read``: ``GET /fs/{path}`` of a random 1 KiB file;
- ``write``: ``PUT /fs/{path}`` of new 1 KiB content;
- ``mixed``: 90 % reads and 10 % writes.

Three processes serve each layout. Each phase runs twice, back to back: with every client on the first
process (a one-process deployment; the other two sit idle), then with the clients spread over all three, so
the 3-vs-1 ratio compares two runs seconds apart (a shared machine's other load drifts less in between).
Two content layouts, each over its own database:

- ``sql``: a content store is configured with its default threshold (chunks of 256 KiB and more go to S3),
  so 1 KiB files stay in PostgreSQL: the layout a deployment of small text files has;
- ``s3``: ``content_store_min_bytes=512``, so every 1 KiB file's content is an S3 object (a read is a
  PostgreSQL lookup plus a GET from S3; a write a PUT to S3 before the row commits). The floor touches no
  content, so this layout skips it; its phases send ``--s3-requests`` each (moto is slow: keep the run short).

While each phase runs, the CPU time of every component is read from ``/proc/<pid>/stat`` (utime + stime,
before and after): each serve process, the PostgreSQL server (the postmaster and all its backends), moto,
and this client; and the whole machine's busy time from ``/proc/stat``, in the same unit (100 % = one core).
The component that uses the most CPU when the machine is busy is the bottleneck. Each row prints requests
per second, p50 and p99 latency, errors (any non-2xx answer or broken connection; there must be none), and
for 3 processes the ratio of their throughput to one process's.

Run: ``python bench/bench_deployment.py [--clients 50] [--requests 2000] [--s3-requests 600]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import sqlalchemy as sa
from bench_server import RequestMaker, Result, phase, request_makers, seed

from workspacefs.testing._postgres import create_database, running_postgres
from workspacefs.testing._s3 import S3Server, running_s3
from workspacefs.testing._service import ServiceProcess, running_service

BUCKET = "wsfs-bench"
S3_MIN_BYTES = 512
"""The ``s3`` layout's threshold: below the benchmark's ~1 KiB bodies, so their content lives in S3."""
TICKS = os.sysconf("SC_CLK_TCK")
CORES = os.cpu_count() or 1
PHASES = ("floor", "read", "write", "mixed")


# --- CPU accounting from /proc ------------------------------------------------------------------------------


def _stat(pid: int) -> tuple[int, float, float]:
    """``(ppid, own CPU seconds, reaped children's CPU seconds)`` of a live process."""
    text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    fields = text.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces
    ppid, utime, stime, cutime, cstime = int(fields[1]), *(int(fields[i]) for i in (11, 12, 13, 14))
    return ppid, (utime + stime) / TICKS, (cutime + cstime) / TICKS


def _processes() -> dict[int, tuple[int, float, float]]:
    """Every live process: pid -> ``_stat``."""
    found: dict[int, tuple[int, float, float]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found[int(entry.name)] = _stat(int(entry.name))
            except (FileNotFoundError, ProcessLookupError):
                continue  # exited meanwhile
    return found


def _find_pid(argv_has: Sequence[str], argv0_ends: str) -> int:
    """The process whose command line starts with a program ending ``argv0_ends`` and holds ``argv_has``."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
        except OSError:
            continue
        if argv and argv[0].endswith(argv0_ends) and all(word in argv for word in argv_has):
            return int(entry.name)
    raise RuntimeError(f"no process {argv0_ends} {' '.join(argv_has)}")


@dataclass
class Tree:
    """CPU seconds of a process and its descendants at one moment (pid -> own seconds, and the root's
    reaped children: a child that exits between two samples is counted through its parent)."""

    own: dict[int, float]
    reaped: float

    @classmethod
    def sample(cls, root: int, table: dict[int, tuple[int, float, float]]) -> Tree:
        members = {root}
        grew = True
        while grew:
            more = {pid for pid, (ppid, _, _) in table.items() if ppid in members} - members
            members |= more
            grew = bool(more)
        return cls({pid: table[pid][1] for pid in members if pid in table}, table.get(root, (0, 0.0, 0.0))[2])

    def since(self, before: Tree) -> float:
        """CPU seconds spent between ``before`` and this sample."""
        spent = sum(seconds - before.own.get(pid, 0.0) for pid, seconds in self.own.items())
        gone = sum(seconds for pid, seconds in before.own.items() if pid not in self.own)  # in ``reaped`` now
        return spent + (self.reaped - before.reaped) - gone


def _machine_busy() -> tuple[float, float]:
    """``(busy, total)`` jiffies of all CPUs together (``/proc/stat``)."""
    values = [int(v) for v in Path("/proc/stat").read_text(encoding="ascii").splitlines()[0].split()[1:]]
    idle = values[3] + values[4]  # idle + iowait
    total = sum(values[:8])  # user … steal (guest time is already in user)
    return total - idle, total


@dataclass
class Components:
    """The processes whose CPU each phase reports."""

    serve: list[int]
    postgres: int
    moto: int

    def sample(self) -> tuple[dict[str, Tree], float, tuple[float, float]]:
        table = _processes()
        trees = {f"serve{i}": Tree.sample(pid, table) for i, pid in enumerate(self.serve)}
        trees["postgres"] = Tree.sample(self.postgres, table)
        trees["moto"] = Tree.sample(self.moto, table)
        times = os.times()
        return trees, times.user + times.system, _machine_busy()


@dataclass
class Row:
    """One phase of one deployment: its load result and each component's CPU, in % of one core."""

    layout: str
    processes: int
    phase: str
    result: Result
    serve: list[float]
    postgres: float
    moto: float
    client: float
    machine: float
    pg_processes: int = 0
    """PostgreSQL's processes at the phase's end: the postmaster, its helpers and a backend per connection."""
    ratio: float | None = field(default=None)

    @property
    def other(self) -> float:
        """CPU % of everything else on the machine (other users of a shared machine, the kernel's own work)."""
        return max(0.0, self.machine - sum(self.serve) - self.postgres - self.moto - self.client)

    def per_request(self) -> dict[str, float]:
        """CPU milliseconds each component spent per request: what the request costs, whatever else ran."""
        shares = {"serve": sum(self.serve), "PostgreSQL": self.postgres, "moto": self.moto, "client": self.client}
        return {name: percent * 10 / self.result.rps for name, percent in shares.items()}


def measured(
    components: Components, ports: Sequence[int], make: RequestMaker, clients: int, total: int
) -> tuple[Result, dict[str, float], float, float, int]:
    """Run one phase; its result, each component's CPU % (of one core), this client's and the machine's, and
    how many processes PostgreSQL had at its end."""
    trees, client_before, (busy_before, all_before) = components.sample()
    result = asyncio.run(phase(ports, make, clients, total))
    after, client_after, (busy_after, all_after) = components.sample()
    wall = result.seconds
    cpu = {name: 100 * tree.since(trees[name]) / wall for name, tree in after.items()}
    machine = 100 * CORES * (busy_after - busy_before) / max(1.0, all_after - all_before)
    return result, cpu, 100 * (client_after - client_before) / wall, machine, len(after["postgres"].own)


# --- the deployment -----------------------------------------------------------------------------------------


@contextmanager
def serving(db_url: str, content_url: str, processes: int) -> Iterator[list[ServiceProcess]]:
    """``processes`` serve processes over one database and one content store; stopped on the way out."""
    args = ("--content-store", content_url, "--rate-limit", "0")
    with ExitStack() as stack:
        yield [stack.enter_context(running_service(db_url, extra_args=args)) for _ in range(processes)]


def _mixed(makers: dict[str, RequestMaker]) -> RequestMaker:
    """90 % reads, 10 % writes (each client writes only its own files, as in ``write``)."""
    rng = random.Random(11)
    read, write = makers["read"], makers["write"]

    def mixed(client: int, n: int) -> bytes:
        return write(client, n) if rng.random() < 0.1 else read(client, n)

    return mixed


def run_layout(
    layout: str,
    pg_url: str,
    s3: S3Server,
    *,
    pids: tuple[int, int],
    clients: int,
    total: int,
    phases: Sequence[str] = PHASES,
) -> list[Row]:
    """Three processes over one fresh database and content-store prefix; each phase runs with every client on
    the first process (a one-process deployment: the other two sit idle), then at once spread over all three,
    so the ratio compares two runs seconds apart on the same processes. Prints and returns the rows."""
    db = create_database(pg_url, f"wsfs_bench_deploy_{layout}")
    content = s3.url(BUCKET, f"bench-{layout}")
    min_bytes = S3_MIN_BYTES if layout == "s3" else None
    db_url = f"{db}?content_store_min_bytes={min_bytes}" if min_bytes else db
    makers = request_makers(seed(db, content_store=content, content_store_min_bytes=min_bytes))
    makers["mixed"] = _mixed(makers)
    rows: list[Row] = []
    with serving(db_url, content, 3) as services:
        ports = [int(service.url.rsplit(":", 1)[1]) for service in services]
        components = Components([service.pid for service in services], *pids)
        # warm up every process: connections, pools, caches
        asyncio.run(phase(ports, makers["read"], clients, min(total, 500)))
        asyncio.run(phase(ports, makers["write"], clients, min(total, 200)))
        for name in phases:
            single = 0.0
            for processes in (1, 3):
                result, cpu, client, machine, backends = measured(
                    components, ports[:processes], makers[name], clients, total
                )
                serve = [cpu[f"serve{i}"] for i in range(processes)]
                row = Row(layout, processes, name, result, serve, cpu["postgres"], cpu["moto"], client, machine)
                row.pg_processes = backends
                if processes == 1:
                    single = result.rps
                else:
                    row.ratio = result.rps / single
                rows.append(row)
                _print_row(row)
    return rows


# --- output -------------------------------------------------------------------------------------------------

HEADER = (
    f"{'content':<7} {'procs':>5} {'phase':<6} {'req/s':>6} {'p50 ms':>6} {'p99 ms':>6} {'errors':>6}"
    f" {'serve CPU% (each)':<17} {'pg%':>4} {'moto%':>5} {'client%':>7} {'other%':>6}"
    f" {'CPU ms/req serve+pg+moto':>24} {'3÷1':>5}"
)


def _print_row(row: Row) -> None:
    each = "/".join(f"{value:.0f}" for value in row.serve)
    serve = f"{sum(row.serve):.0f}" + (f" ({each})" if len(row.serve) > 1 else "")
    cost = row.per_request()
    spent = f"{cost['serve']:.2f}+{cost['PostgreSQL']:.2f}+{cost['moto']:.2f}"
    ratio = f"{row.ratio:.2f}" if row.ratio is not None else ""
    print(
        f"{row.layout:<7} {row.processes:>5} {row.phase:<6} {row.result.rps:>6.0f} {row.result.percentile(0.5):>6.1f}"
        f" {row.result.percentile(0.99):>6.1f} {row.result.errors:>6} {serve:<17} {row.postgres:>4.0f}"
        f" {row.moto:>5.0f} {row.client:>7.0f} {row.other:>6.0f} {spent:>24} {ratio:>5}",
        flush=True,
    )


def _verdict(rows: list[Row]) -> None:
    """Per phase: the 3-vs-1 ratio, what a request costs in CPU and in which component, and the throughput
    the machine's cores would allow at that cost if nothing else ran on them."""
    print(f"\nWhere the time goes ({CORES} cores; CPU per request, from the 3-process rows):")
    shares: dict[str, list[float]] = {}
    for row in rows:
        if row.processes != 3:
            continue
        cost = row.per_request()
        total = sum(cost.values())
        ceiling = CORES * 1000 / total
        busiest = max(cost, key=lambda name: cost[name])
        for name, ms in cost.items():
            shares.setdefault(name, []).append(ms / total)
        print(
            f"  {row.layout}/{row.phase}: {row.ratio or 0:.2f}x one process; "
            + ", ".join(f"{name} {ms:.2f} ms" for name, ms in cost.items())
            + f" = {total:.2f} ms: at most {ceiling:.0f} req/s on {CORES} free cores (measured {row.result.rps:.0f},"
            f" other load took {row.other:.0f} %); busiest: {busiest} ({100 * cost[busiest] / total:.0f} %)"
        )
    most = max((row.pg_processes for row in rows), default=0)
    print(f"  PostgreSQL ran at most {most} processes (helpers + one backend per connection of the 3 processes).")
    capped = [f"{row.layout}/{row.phase}" for row in rows if row.processes == 1 and row.serve[0] >= 85]
    if capped:
        print(f"  One process used about a whole core (its GIL's limit) in {', '.join(capped)}.")
    if shares:
        top = max(shares, key=lambda name: sum(shares[name]))
        spread = ", ".join(f"{name} {100 * min(v):.0f}-{100 * max(v):.0f} %" for name, v in shares.items())
        print(
            f"  Bottleneck: CPU, mostly in {top} (share of each request's CPU: {spread}). One serve process is"
            f" capped at one core, and {CORES} cores are used up by about {CORES} processes (with PostgreSQL and"
            f" the client beside them), so 3 processes on {CORES} cores cannot reach 3x."
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=2000, help="requests per phase")
    parser.add_argument(
        "--s3-requests", type=int, default=600, help="requests per phase with content in S3 (0: skip that layout)"
    )
    args = parser.parse_args()
    print(
        f"{args.clients} keep-alive clients spread round robin over the processes, {args.requests} requests per"
        f" phase, ~1 KiB files; {CORES} cores; one PostgreSQL database + one S3 content store (moto) per layout"
    )
    print(
        "content sql: content store at its default threshold (256 KiB): 1 KiB files stay in PostgreSQL;"
        f" content s3: content_store_min_bytes={S3_MIN_BYTES}: every file's content is an S3 object"
    )
    print(
        "CPU% = CPU time / wall time of the phase (100 = one core); machine% = every process on the machine;"
        " other% = machine% minus this benchmark's processes (a shared machine's other load)\n"
    )
    print(HEADER)
    rows: list[Row] = []
    with running_postgres("wsfs_bench_deployment") as pg_url, running_s3() as s3:
        s3.make_bucket(BUCKET)
        port = str(sa.engine.make_url(pg_url).port)
        postgres_pid = _find_pid(["-p", port], "/postgres")
        moto_pid = _find_pid(["moto.server", s3.endpoint_url.rsplit(":", 1)[1]], "python")
        pids = (postgres_pid, moto_pid)
        rows += run_layout("sql", pg_url, s3, pids=pids, clients=args.clients, total=args.requests)
        if args.s3_requests:
            s3_phases = ("read", "write", "mixed")  # the floor touches no content: the same as sql's
            rows += run_layout(
                "s3", pg_url, s3, pids=pids, clients=args.clients, total=args.s3_requests, phases=s3_phases
            )
    _verdict(rows)
    errors = sum(row.result.errors for row in rows)
    print(f"\nerrors: {errors}")
    if errors:
        raise SystemExit(f"{errors} requests failed")


if __name__ == "__main__":
    main()
