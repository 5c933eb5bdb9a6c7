"""PostgreSQL's floor for one small read and write (issue 15: "the floor you measured, e.g. the round-trip time of
a no-op ``SELECT 1``"), beside what workspacefs takes, as ratios of raw ``os`` in one run.

Rows, µs per operation (min of ``--reps`` rounds of ``--ops``), on a throwaway local server (loopback, as the
tests run it) and a tmpfs directory:

- raw ``os``: read and write of a 1 KiB file (``open``/``read``/``close``; ``open``/``write``/``close``);
- ``SELECT 1`` through a psycopg cursor (autocommit), and through the store's own driver path
  (``Driver.fetch_row``: prepared, no cursor), once made to sleep on the socket as a slow statement does and once
  as it runs (a quick statement polls for its answer first: ``_poll``): one round trip that touches no table, the
  floor of any read;
- workspacefs ``read_bytes`` and ``write_bytes`` of a 1 KiB file on that server (journal on, the default).

The round trip depends on how busy the machine is: on an idle machine both processes sleep between messages and
each wake-up costs; run it twice, idle and loaded, to see the spread.

Run: ``python bench/bench_pg_floor.py [--ops 2000] [--reps 5]``.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import psycopg

from workspacefs import SqlFilesystem, SqlStore
from workspacefs.backends.sql._poll import POLL_NS
from workspacefs.backends.sql._store import engine_url
from workspacefs.testing._postgres import running_postgres

CONTENT = b"x" * 1023 + b"\n"


def best(work: Callable[[int], object], ops: int, reps: int) -> float:
    """µs per call of ``work(i)``: the fastest of ``reps`` rounds of ``ops`` calls."""
    found = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        for i in range(ops):
            work(i)
        found = min(found, (time.perf_counter() - start) / ops)
    return found * 1e6


def raw_os(base: Path, ops: int, reps: int) -> tuple[float, float]:
    """µs per raw read and write of a 1 KiB file."""
    names = [str(base / f"f{i}") for i in range(ops)]
    for name in names:
        with open(name, "wb") as handle:
            handle.write(CONTENT)

    def read(i: int) -> bytes:
        with open(names[i], "rb") as handle:
            return handle.read()

    def write(i: int) -> None:
        with open(names[i], "wb") as handle:
            handle.write(CONTENT)

    return best(read, ops, reps), best(write, ops, reps)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    ops, reps = args.ops, args.reps
    base = Path(tempfile.mkdtemp(prefix="wsfs-bench-pg-floor-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    try:
        raw_read, raw_write = raw_os(base, ops, reps)
        with running_postgres("wsfs_bench_floor") as url:
            rows: dict[str, float] = {}
            with psycopg.connect(engine_url(url)[0].replace("+psycopg", ""), autocommit=True) as connection:
                cursor = connection.cursor()
                rows["SELECT 1, psycopg cursor"] = best(lambda _: cursor.execute("SELECT 1").fetchone(), ops, reps)
            store = SqlStore(url)
            try:
                driver = store.driver
                driver.fetch_row("SELECT 1", ())
                turnaround = driver._statements["SELECT 1"].turnaround

                def sleeping(_: int) -> object:
                    turnaround.average = POLL_NS  # as a slow statement's: no polling, the call sleeps on the socket
                    return driver.fetch_row("SELECT 1", ())

                rows["SELECT 1, fetch_row, sleeping"] = best(sleeping, ops, reps)
                turnaround.average = 0
                rows["SELECT 1, Driver.fetch_row"] = best(lambda _: driver.fetch_row("SELECT 1", ()), ops, reps)
                fs = SqlFilesystem(store, "floor")
                for i in range(ops):
                    fs.write_bytes(f"d{i % 20}/f{i}.txt", CONTENT)
                rows["workspacefs read_bytes"] = best(lambda i: fs.read_bytes(f"d{i % 20}/f{i}.txt"), ops, reps)
                rows["workspacefs write_bytes"] = best(
                    lambda i: fs.write_bytes(f"d{i % 20}/f{i}.txt", CONTENT), ops, reps
                )
                fs.close()
            finally:
                store.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"1 KiB, µs per operation (min of {reps} x {ops}); load {os.getloadavg()[0]:.1f}")
    print(f"{'':<30}{'µs':>10}{'÷ raw read':>12}{'÷ raw write':>13}")
    print(f"{'raw os read':<30}{raw_read:>10.1f}{1:>12.2f}{'':>13}")
    print(f"{'raw os write':<30}{raw_write:>10.1f}{'':>12}{1:>13.2f}")
    for name, micros in rows.items():
        print(f"{name:<30}{micros:>10.1f}{micros / raw_read:>12.2f}{micros / raw_write:>13.2f}")


if __name__ == "__main__":
    main()
