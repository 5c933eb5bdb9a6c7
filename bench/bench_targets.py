"""Issue 15's "done means" in one run: every target, the measured ratio, met or missed.

Measured with the other benches' own code, on tmpfs (PostgreSQL: a throwaway local server, ``fsync=off``):

- small files (``bench_compare``: ``--files`` 1 KiB files in 20 directories, best of ``--rounds``): SQLite and
  PostgreSQL write, read and ``ls+stat`` against raw ``os``; memory ``read_bytes`` against fsspec's memory
  filesystem; the peers' rows are printed beside them;
- streams of ``--stream-mib`` MiB (distinct 1 MiB pieces, so nothing is deduplicated), best of
  ``--stream-rounds``: SQLite as a share of raw ``os``, PostgreSQL in MiB/s;
- flatness: per-file write and read of 1,000 new files in a workspace of ``--scale-files`` against one of 1,000
  (the target is at 100,000: ``--scale-files 100000``; the default is smaller to keep the run short);
- host (``bench_host``: ``--host-files`` files): write and read against raw ``os``, list per entry against
  ``os.scandir`` with ``stat``;
- the service (``bench_server``: 50 keep-alive clients, ``--requests`` per phase, best of ``--repeat``):
  authenticated 1 KiB GET and PUT as a share of the no-table floor (``GET /healthz``) and, beside it, of the
  authenticated floor (``GET /v1/agents``: the token's row only), with p50/p99, the service's CPU µs per request
  and errors (there must be none).

Run: ``make bench`` or ``python bench/bench_targets.py [--scale-files 100000] [--only small streams scaling
host service ...]``. The default run takes a few minutes on two cores.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import bench_compare as compare
import bench_host
import bench_server
from _workload import timed

from workspacefs import InMemoryFilesystem, SqlFilesystem, SqlStore
from workspacefs.protocol import SnapshotableFilesystem
from workspacefs.testing._postgres import running_postgres

MIB = 1024 * 1024
SECTIONS = ("small", "streams", "scaling", "host", "service")


@dataclass(frozen=True)
class Target:
    """One line of issue 15's table: ``measured`` against ``limit`` (``at_most``: lower is better)."""

    name: str
    measured: float
    limit: float
    at_most: bool
    unit: str = "x"

    @property
    def met(self) -> bool:
        return self.measured <= self.limit if self.at_most else self.measured >= self.limit

    def line(self) -> str:
        bound = f"{'≤' if self.at_most else '≥'} {self.limit:g}{self.unit}"
        return f"  {self.name:58} {bound:>12} {self.measured:>10.2f}{self.unit:<6} {'met' if self.met else 'MISSED'}"


def small_files(stores: dict[str, SqlStore], files: int, rounds: int, tmp: Path) -> list[Target]:
    """The small-file table (every library, printed) and its targets."""
    libraries: list[compare.Library] = [
        compare.RawOs(),
        compare.Fsspec("memory"),
        compare.Fsspec("local"),
        compare.PyFilesystem2("memory"),
        compare.PyFilesystem2("OSFS"),
        compare.Ours("memory", lambda _: InMemoryFilesystem()),
        compare.Ours("SQLite", lambda _: SqlFilesystem(stores["sqlite"], f"small-{os.urandom(4).hex()}")),
        compare.Ours("PostgreSQL", lambda _: SqlFilesystem(stores["postgresql"], f"small-{os.urandom(4).hex()}")),
    ]
    print(f"\n{files:,} files of 1 KiB in {compare.DIRS} directories on tmpfs; best of {rounds} interleaved rounds\n")
    best = compare.measure(libraries, files, rounds, tmp)
    compare.print_tables(best)
    raw, sqlite, pg = best["raw os"], best["workspacefs SQLite"], best["workspacefs PostgreSQL"]
    memory, fsspec_memory = best["workspacefs memory"], best["fsspec memory"]
    return [
        Target("SQLite small-file write ÷ raw os", sqlite["write"] / raw["write"], 5, True),
        Target("SQLite small-file read ÷ raw os", sqlite["read"] / raw["read"], 4, True),
        Target("SQLite ls+stat per entry ÷ raw os", sqlite["ls+stat"] / raw["ls+stat"], 5, True),
        Target("PostgreSQL small-file write ÷ raw os", pg["write"] / raw["write"], 20, True),
        Target("PostgreSQL small-file read ÷ raw os", pg["read"] / raw["read"], 10, True),
        Target("memory read_bytes ÷ fsspec memory cat_file", memory["read"] / fsspec_memory["read"], 1.0, True),
    ]


def stream_rates(library: compare.Library, pieces: list[bytes], rounds: int, tmp: Path) -> tuple[float, float]:
    """Best MiB/s writing then reading ``pieces`` as one file, over ``rounds`` fresh stores."""
    best_write = best_read = 0.0
    for round_ in range(rounds):
        scratch = tmp / f"stream-{round_}-{library.name.replace(' ', '-')}"
        scratch.mkdir()
        library.setup(scratch)
        seconds, _ = timed(lambda lib=library: lib.stream_write("stream.bin", iter(pieces)))
        best_write = max(best_write, len(pieces) / seconds)
        seconds, size = timed(lambda lib=library: lib.stream_read("stream.bin"))
        assert size == len(pieces) * MIB, (library.name, size)
        best_read = max(best_read, len(pieces) / seconds)
        library.teardown()
        shutil.rmtree(scratch, ignore_errors=True)
    return best_write, best_read


def streams(stores: dict[str, SqlStore], mib: int, rounds: int, tmp: Path) -> list[Target]:
    """One ``mib`` MiB file written and read through raw ``os``, SQLite and PostgreSQL."""
    base = os.urandom(MIB)
    pieces = [index.to_bytes(8, "big") + base[8:] for index in range(mib)]  # distinct: no chunk deduplicated
    rates = {
        name: stream_rates(library, pieces, rounds, tmp)
        for name, library in (
            ("raw os", compare.RawOs()),
            ("SQLite", compare.Ours("SQLite", lambda _: SqlFilesystem(stores["sqlite"], f"s-{os.urandom(4).hex()}"))),
            (
                "PostgreSQL",
                compare.Ours("PostgreSQL", lambda _: SqlFilesystem(stores["postgresql"], f"s-{os.urandom(4).hex()}")),
            ),
        )
    }
    print(f"\n{mib} MiB stream, best of {rounds} (MiB/s):")
    for name, (write, read) in rates.items():
        print(f"  {name:11} write {write:8.0f}  read {read:8.0f}")
    raw, sqlite, pg = rates["raw os"], rates["SQLite"], rates["PostgreSQL"]
    return [
        Target(f"SQLite {mib} MiB stream write, share of raw os", sqlite[0] / raw[0] * 100, 50, False, "%"),
        Target(f"SQLite {mib} MiB stream read, share of raw os", sqlite[1] / raw[1] * 100, 50, False, "%"),
        Target(f"PostgreSQL {mib} MiB stream write", pg[0], 400, False, "MiB/s"),
        Target(f"PostgreSQL {mib} MiB stream read", pg[1], 400, False, "MiB/s"),
    ]


def probed(fs: SnapshotableFilesystem, first: int) -> tuple[float, float]:
    """The best per-file write and read µs of two probes of 1,000 new files each (one probe alone is noisy)."""
    runs = [compare.per_file(fs, [f"probe{n}/p{i:04d}.txt" for i in range(1000)], first + n * 1000) for n in range(2)]
    return min(w for w, _ in runs), min(r for _, r in runs)


def flatness(kind: str, make: Callable[[], SnapshotableFilesystem], total: int) -> list[Target]:
    """Per-file write and read of 1,000 new files in a workspace of ``total`` files against one of 1,000."""
    small = make()
    compare.fill(small, 1000, "fill")
    write_1k, read_1k = probed(small, 10_000_000)
    big = make()
    compare.fill(big, total, "fill")
    write_n, read_n = probed(big, 20_000_000)
    print(
        f"  {kind:11} write {write_1k:7.1f} → {write_n:7.1f} µs, read {read_1k:7.1f} → {read_n:7.1f} µs"
        f" (1,000 → {total:,} files)"
    )
    return [
        Target(f"{kind} per-file write at {total:,} ÷ at 1,000", write_n / write_1k, 1.3, True),
        Target(f"{kind} per-file read at {total:,} ÷ at 1,000", read_n / read_1k, 1.3, True),
    ]


def host(files: int, rounds: int, tmp: Path) -> list[Target]:
    """HostFilesystem against raw ``os`` (``bench_host``'s workload)."""
    base = tmp / "host"
    base.mkdir()
    rows = bench_host.measure(base, files, rounds, (bench_host.Ours, bench_host.RawOs))
    ours, raw = rows["workspacefs"], rows["raw os"]
    print(f"\nhost, {files:,} files of 1 KiB, best of {rounds} (µs per file; list: per entry):")
    for name, row in rows.items():
        print(f"  {name:11} write {row['write']:7.2f}  read {row['read']:7.2f}  list {row['list']:7.2f}")
    return [
        Target("host write ÷ raw os", ours["write"] / raw["write"], 1.5, True),
        Target("host read ÷ raw os", ours["read"] / raw["read"], 1.3, True),
        Target("host list per entry ÷ os.scandir (with stat)", ours["list"] / raw["list"], 3, True),
    ]


def service(clients: int, requests: int, repeat: int) -> list[Target]:
    """The service's authenticated 1 KiB GET and PUT as shares of the no-table floor, on both databases."""
    print(f"\nservice: {clients} keep-alive clients, {requests} requests per phase, best of {repeat} interleaved runs")
    head = f"{'backend':<11} {'op':<6} {'reqs':>7} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}"
    print(f"{head} {'CPU µs/req':>10} {'÷floor':>8} {'÷none':>8}")
    targets: list[Target] = []
    with tempfile.TemporaryDirectory(prefix="wsfs-bench-targets-", dir=str(Path.home())) as scratch:
        sqlite_url = f"sqlite:///{scratch}/service.db"
        results = {"SQLite": bench_server.run_backend("sqlite", sqlite_url, clients, requests, repeat)}
    with running_postgres("wsfs_bench_targets_service") as url:
        results["PostgreSQL"] = bench_server.run_backend("postgresql", url, clients, requests, repeat)
    for kind, rows in results.items():
        none, floor = rows["none"].rps, rows["floor"].rps
        targets += [
            Target(f"service {kind} GET ÷ no-table floor (/healthz)", rows["read"].rps / none, 0.8, False),
            Target(f"service {kind} PUT ÷ no-table floor (/healthz)", rows["write"].rps / none, 0.5, False),
            Target(f"service {kind} GET ÷ authenticated floor (token row)", rows["read"].rps / floor, 0.8, False),
            Target(f"service {kind} PUT ÷ authenticated floor (token row)", rows["write"].rps / floor, 0.5, False),
        ]
    errors = sum(row.errors for rows in results.values() for row in rows.values())
    targets.append(Target("service errors (all phases, both databases)", errors, 0, True, ""))
    return targets


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=2_000, help="small files per library")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stream-mib", type=int, default=256)
    parser.add_argument("--stream-rounds", type=int, default=2)
    parser.add_argument("--scale-files", type=int, default=20_000, help="the target is at 100,000")
    parser.add_argument("--host-files", type=int, default=10_000)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=3000, help="service requests per phase")
    parser.add_argument("--repeat", type=int, default=2, help="interleaved service runs; the fastest is kept")
    parser.add_argument("--only", choices=SECTIONS, action="append", help="run only these sections (repeatable)")
    args = parser.parse_args()
    run = set(args.only or SECTIONS)
    targets: list[Target] = []
    tmp = Path(tempfile.mkdtemp(prefix="wsfs-bench-targets-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    try:
        if run & {"small", "streams", "scaling"}:
            with running_postgres("wsfs_bench_targets") as pg_url:
                stores = {"sqlite": SqlStore(f"sqlite:///{tmp / 'bench.db'}"), "postgresql": SqlStore(pg_url)}
                try:
                    if "small" in run:
                        targets += small_files(stores, args.files, args.rounds, tmp)
                    if "streams" in run:
                        targets += streams(stores, args.stream_mib, args.stream_rounds, tmp)
                    if "scaling" in run:
                        print("\nflat in size: per-file µs of 1,000 new files")
                        for kind, store in (("SQLite", stores["sqlite"]), ("PostgreSQL", stores["postgresql"])):
                            targets += flatness(
                                kind, lambda s=store: SqlFilesystem(s, f"scale-{os.urandom(4).hex()}"), args.scale_files
                            )
                finally:
                    for store in stores.values():
                        store.close()
        if "host" in run:
            targets += host(args.host_files, args.rounds, tmp)
        if "service" in run:
            targets += service(args.clients, args.requests, args.repeat)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("\nissue 15 targets")
    for target in targets:
        print(target.line())
    missed = sum(not target.met for target in targets)
    print(f"  {len(targets) - missed} of {len(targets)} met")


if __name__ == "__main__":
    main()
