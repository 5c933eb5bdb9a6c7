"""What ``fork()`` costs on the SQL backends at 1,000, 10,000 and 100,000 files (issue 15).

A fork copies every file row of the session (one ``INSERT … SELECT``; content is shared). Each size's session is
filled set-based (:mod:`workspacefs.testing._sql_rows`), then forked ``--reps`` times; each fork is deleted again,
untimed. Wall and CPU time (this process's: on PostgreSQL the server's work shows in wall time only), minimum
of the repetitions, in ms.

Run: ``python bench/bench_fork.py [--reps R] [--sizes 1000,10000,100000] [--no-postgres] [--postgres-url URL]``
(without a URL a throwaway PostgreSQL server is started from the machine's binaries, as the tests do).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path

from workspacefs import SqlFilesystem, SqlStore
from workspacefs.testing._postgres import running_postgres
from workspacefs.testing._sql_rows import fill_session


def measure(store: SqlStore, sizes: list[int], reps: int) -> dict[int, tuple[float, float]]:
    """(wall, CPU) ms of one fork, minimum of ``reps``, per number of files in the session."""
    found: dict[int, tuple[float, float]] = {}
    for size in sizes:
        fs = SqlFilesystem(store, f"bench-fork-{size}-{time.time_ns()}")
        fill_session(store, fs.session_id, size)
        walls, cpus = [], []
        for _ in range(reps):
            wall, cpu = time.perf_counter(), time.process_time()
            fork = fs.fork()
            walls.append((time.perf_counter() - wall) * 1e3)
            cpus.append((time.process_time() - cpu) * 1e3)
            store.delete_session(fork.session_id)
        store.delete_session(fs.session_id)
        found[size] = (min(walls), min(cpus))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--postgres-url", help="an existing PostgreSQL database to use (it gets the store's tables)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="wsfs-bench-fork-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    results = {"sqlite": measure(SqlStore(f"sqlite:///{tmp / 'fork.db'}"), sizes, args.reps)}
    if not args.no_postgres:
        with ExitStack() as stack:
            url = args.postgres_url or stack.enter_context(running_postgres("wsfs_bench_fork"))
            results["postgresql"] = measure(SqlStore(url), sizes, args.reps)
    print(f"fork() of a session, ms (min of {args.reps})")
    print(f"{'backend':<12}{'files':>8}{'wall':>10}{'cpu':>10}")
    for name, found in results.items():
        for size in sizes:
            wall, cpu = found[size]
            print(f"{name:<12}{size:>8}{wall:>10.1f}{cpu:>10.1f}")


if __name__ == "__main__":
    main()
