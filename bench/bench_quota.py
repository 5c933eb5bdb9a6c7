"""What a quota costs a small write on the SQL backends, at 1,000 and 20,000 files (issue 15: flat in size).

A quota asks for the session's usage before every growing change. Each backend writes 200 new 100-byte files
into a session of 1,000 and then of 20,000 files, with and without a quota, in one run; µs per write, minimum of
``--reps`` repetitions. Before migration ``0009`` usage was an aggregate over every file row (SQLite: 2.4 ms at
1,000 files, 43 ms at 20,000); now it is one row kept by triggers. A quota'd write that grows the session also
reads that row again inside its own transaction, after its statements (concurrent writers all pass the check
before it): one indexed statement, sent on PostgreSQL in the batch of the ``COMMIT`` (no round trip more).

Run: ``python bench/bench_quota.py [--reps R] [--no-postgres]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from workspacefs import Quota, SqlFilesystem, SqlStore
from workspacefs.testing._postgres import running_postgres

SIZES = (1_000, 20_000)


def measure(store: SqlStore, reps: int) -> dict[tuple[bool, int], float]:
    """µs per new small write, per (quota, files in the session)."""
    found: dict[tuple[bool, int], float] = {}
    sessions = {
        quota: SqlFilesystem(store, f"quota-{quota}", quota=Quota(max_bytes=10**12) if quota else None)
        for quota in (False, True)
    }
    filled = dict.fromkeys(sessions, 0)
    for size in SIZES:
        for quota, fs in sessions.items():
            while filled[quota] < size:
                fs.write_bytes(f"d{filled[quota] % 20}/f{filled[quota]}.txt", b"x" * 100)
                filled[quota] += 1
        for rep in range(reps):
            for quota, fs in sessions.items():  # interleaved: the same machine state for both
                start = time.perf_counter()
                for index in range(200):
                    fs.write_bytes(f"new/{size}-{rep}-{index}.txt", b"y" * 100)
                took = (time.perf_counter() - start) / 200 * 1e6
                found[quota, size] = min(found.get((quota, size), took), took)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="wsfs-bench-quota-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    results = {"sqlite": measure(SqlStore(f"sqlite:///{tmp / 'quota.db'}"), args.reps)}
    if not args.no_postgres:
        with running_postgres("wsfs_bench_quota") as url:
            results["postgresql"] = measure(SqlStore(url), args.reps)
    print(f"Small writes with and without a quota, µs per write (min of {args.reps})")
    print(f"{'backend':<12}{'files':>8}{'no quota':>12}{'quota':>10}{'quota/none':>12}")
    for name, found in results.items():
        for size in SIZES:
            none, quota = found[False, size], found[True, size]
            print(f"{name:<12}{size:>8}{none:>12.0f}{quota:>10.0f}{quota / none:>12.2f}")
        flat = found[True, SIZES[-1]] / found[True, SIZES[0]]
        print(f"{name:<12}{'':>8}quota'd write at {SIZES[-1]:,} / at {SIZES[0]:,} files: {flat:.2f} (target <= 1.3)")


if __name__ == "__main__":
    main()
