"""SqlFilesystem on SQLite and PostgreSQL beside the in-memory and host backends.

The 10,000-file workload (1 KiB files in 100 directories: write, read, list, glob, grep), a 256 MiB
stream (MiB/s and peak Python-heap growth), and ``snapshot()`` at 1k and 10k files and at 10 MiB vs
1 GiB of content: a snapshot records a manifest, so its time must not grow with content size.
PostgreSQL runs on a throwaway local server (``fsync=off``, like the tests); SQLite and the host
backend live on tmpfs.

Run: ``python bench/bench_sql.py [--files N] [--big-mib M]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import tempfile
import time
import tracemalloc
from pathlib import Path

from _workload import COLUMNS, DIRS, GREP, file_path, make_content, timed

from workspacefs import HostFilesystem, InMemoryFilesystem, SqlFilesystem, SqlStore
from workspacefs.protocol import SnapshotableFilesystem
from workspacefs.testing._postgres import running_postgres

MIB = 1024 * 1024


def workload(fs: SnapshotableFilesystem, count: int) -> dict[str, float]:
    dirs = [f"dir{d:03d}" for d in range(DIRS)]
    files = [(file_path(i), make_content(i)) for i in range(count)]

    def write() -> None:
        for path, data in files:
            fs.write_bytes(path, data)

    def read() -> None:
        for path, _ in files:
            fs.read(path)

    row = {}
    row["write"], _ = timed(write)
    row["read"], _ = timed(read)
    row["list"], _ = timed(lambda: sum(len(fs.list(d)) for d in dirs))
    row["glob"], found = timed(lambda: len(fs.glob("**/*.txt")))
    row["grep"], hits = timed(lambda: len(fs.grep(GREP, max_matches=1_000_000)))
    assert found == count, found
    assert hits == count // 10, hits
    return {k: v * 1e6 / count for k, v in row.items()}


def streaming(fs: SnapshotableFilesystem, mib: int) -> tuple[float, float, float]:
    chunk = os.urandom(MIB)
    gc.collect()
    tracemalloc.start()
    started = time.perf_counter()
    with fs.open_write("stream.bin") as writer:
        for _ in range(mib):
            writer.write(chunk)
    wrote = time.perf_counter() - started
    started = time.perf_counter()
    with fs.open_read("stream.bin") as reader:
        for _ in reader:
            pass
    read = time.perf_counter() - started
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    fs.delete("stream.bin")
    return mib / wrote, mib / read, peak / MIB


def snapshot_seconds(fs: SnapshotableFilesystem) -> float:
    return min(timed(fs.snapshot)[0] for _ in range(3))


def fill(fs: SnapshotableFilesystem, files: int, total_bytes: int) -> None:
    size = max(total_bytes // files, 1)
    blob = os.urandom(size)
    for index in range(files):
        path = f"d{index % DIRS:03d}/f{index:06d}.bin"
        if size <= 32 * MIB:
            fs.write_bytes(path, blob[:-8] + index.to_bytes(8, "big"))
        else:
            with fs.open_write(path) as writer:
                for offset in range(0, size, MIB):
                    writer.write(blob[offset : offset + MIB])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--stream-mib", type=int, default=256)
    parser.add_argument("--big-mib", type=int, default=1024)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="wsfs-bench-sql-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    counter = iter(range(1_000_000))
    try:
        with running_postgres("wsfs_bench") as pg_url:
            stores = {"sqlite": SqlStore(f"sqlite:///{tmp / 'bench.db'}"), "postgresql": SqlStore(pg_url)}

            def make(kind: str) -> SnapshotableFilesystem:
                if kind == "memory":
                    return InMemoryFilesystem()
                if kind == "host":
                    index = next(counter)
                    (tmp / f"host-{index}").mkdir()
                    return HostFilesystem(tmp / f"host-{index}", snapshot_dir=tmp / f"host-snaps-{index}")
                return SqlFilesystem(stores[kind], f"bench-{next(counter)}")

            kinds = ("memory", "host", "sqlite", "postgresql")
            print(f"{args.files} files of 1 KiB in {DIRS} directories; µs per file\n")
            print(f"{'':12}" + "".join(f"{c:>10}" for c in COLUMNS))
            for kind in kinds:
                row = workload(make(kind), args.files)
                print(f"{kind:12}" + "".join(f"{row[c]:10.1f}" for c in COLUMNS))

            print(f"\nstreaming {args.stream_mib} MiB: write MiB/s, read MiB/s, peak heap growth MiB")
            for kind in ("sqlite", "postgresql"):
                write_rate, read_rate, peak = streaming(make(kind), args.stream_mib)
                print(f"  {kind:12}{write_rate:8.0f}{read_rate:8.0f}{peak:8.1f}")

            print("\nsnapshot() seconds")
            for kind in ("sqlite", "postgresql"):
                cells = []
                for files in (1_000, args.files):
                    fs = make(kind)
                    fill(fs, files, files * 1024)
                    cells.append(f"{files} files {snapshot_seconds(fs):.4f}")
                for total in (10 * MIB, args.big_mib * MIB):
                    fs = make(kind)
                    fill(fs, 100, total)
                    cells.append(f"100 files / {total // MIB} MiB {snapshot_seconds(fs):.4f}")
                print(f"  {kind:12}" + "; ".join(cells))
            for store in stores.values():
                store.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
