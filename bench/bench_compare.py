"""Every backend beside raw ``os`` and the peers, in one run, as ratios (issue 15's table).

Workload: 2,000 files of 1 KiB in 20 directories on tmpfs; the minimum of 5 interleaved repetitions
(round 1 of every library, then round 2 …), the same calls for everyone. Columns, in µs per file
(per entry for the listings): ``write`` (overwrite-or-create a whole file), ``read`` (whole file as
bytes), ``ls`` (names and kinds), ``ls+stat`` (with size and mtime), ``grep`` (a regex over every
file, after one untimed grep that brings the SQL trigram index up to date; the peers have none, so
theirs is the loop a user writes), then a 32 MiB stream written and read (MiB/s). Every round writes
new content, so no write is a deduplicated one. The second table divides each cell by raw ``os`` (for
the stream: ``os`` ÷ ours).

Then, for the SQL backends: per-file write and read cost at ``--scale-files`` against 1,000 files
(flatness), ``snapshot()`` (a session's first, and its next 20 changes later), ``fork()``, and ``restore()``
and ``diff()`` after 20 changes at that size, the
statements and round trips of one small write/read on PostgreSQL, and the floor (a no-op ``SELECT
1``). PostgreSQL is a throwaway local server on loopback with ``fsync=off`` (the tmpfs peers do not
sync either).

Run: ``make bench`` or ``python bench/bench_compare.py [--files N] [--rounds R] [--scale-files N]
[--only tables|scaling|grep|floor ...]``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import tempfile
import time
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from _workload import GREP, best_of, make_content, timed

from workspacefs import HostFilesystem, InMemoryFilesystem, SqlFilesystem, SqlStore
from workspacefs.protocol import Filesystem, SnapshotableFilesystem
from workspacefs.testing._postgres import running_postgres

warnings.filterwarnings("ignore", category=DeprecationWarning)
warnings.filterwarnings("ignore", category=UserWarning)

import fs.memoryfs  # noqa: E402 - after the warning filters: PyFilesystem2 warns about pkg_resources
import fs.osfs  # noqa: E402
import fsspec.implementations.local  # noqa: E402
import fsspec.implementations.memory  # noqa: E402

MIB = 1024 * 1024
DIRS = 20
COLUMNS = ("write", "read", "ls", "ls+stat", "grep")
STREAM_MIB = 32


def paths(count: int) -> list[str]:
    return [f"dir{i % DIRS:02d}/file{i:05d}.txt" for i in range(count)]


class Library(ABC):
    """One library's way of doing each column, on a fresh empty store made by :meth:`setup`."""

    name = ""

    @abstractmethod
    def setup(self, scratch: Path) -> None:
        """Start from nothing, with the workload's directories made."""

    @abstractmethod
    def write(self, path: str, data: bytes) -> None: ...

    @abstractmethod
    def read(self, path: str) -> bytes: ...

    @abstractmethod
    def ls(self, directory: str) -> int: ...

    @abstractmethod
    def ls_stat(self, directory: str) -> int: ...

    @abstractmethod
    def grep(self, pattern: re.Pattern[bytes]) -> int: ...

    @abstractmethod
    def stream_write(self, path: str, pieces: Iterator[bytes]) -> None: ...

    @abstractmethod
    def stream_read(self, path: str) -> int: ...

    def teardown(self) -> None:
        """Release what :meth:`setup` made."""


def pour(handle: Any, pieces: Iterator[bytes]) -> None:
    """Write every piece to an open binary file of any library."""
    for piece in pieces:
        handle.write(piece)


def drain(handle: Any) -> int:
    """Read an open binary file of any library to its end, a MiB at a time; the bytes read."""
    total = 0
    while piece := handle.read(MIB):
        total += len(piece)
    return total


def count_lines(data: bytes, pattern: re.Pattern[bytes]) -> int:
    return sum(1 for line in data.split(b"\n") if pattern.search(line))


class RawOs(Library):
    name = "raw os"

    def setup(self, scratch: Path) -> None:
        self.root = str(scratch / "raw")
        for d in range(DIRS):
            os.makedirs(f"{self.root}/dir{d:02d}")

    def write(self, path: str, data: bytes) -> None:
        with open(f"{self.root}/{path}", "wb") as handle:
            handle.write(data)

    def read(self, path: str) -> bytes:
        with open(f"{self.root}/{path}", "rb") as handle:
            return handle.read()

    def ls(self, directory: str) -> int:
        return sum(1 for e in os.scandir(f"{self.root}/{directory}") if e.is_file() or e.is_dir())

    def ls_stat(self, directory: str) -> int:
        return sum(1 for e in os.scandir(f"{self.root}/{directory}") if e.stat().st_mtime)

    def grep(self, pattern: re.Pattern[bytes]) -> int:
        found = 0
        for dirpath, _, names in os.walk(self.root):
            for name in names:
                with open(os.path.join(dirpath, name), "rb") as handle:
                    found += count_lines(handle.read(), pattern)
        return found

    def stream_write(self, path: str, pieces: Iterator[bytes]) -> None:
        with open(f"{self.root}/{path}", "wb") as handle:
            pour(handle, pieces)

    def stream_read(self, path: str) -> int:
        with open(f"{self.root}/{path}", "rb") as handle:
            return drain(handle)


class Fsspec(Library):
    """fsspec's memory or local filesystem."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.name = f"fsspec {kind}"

    def setup(self, scratch: Path) -> None:
        if self.kind == "memory":
            self.fs: Any = fsspec.implementations.memory.MemoryFileSystem(skip_instance_cache=True)
            self.fs.store = {}
            self.fs.pseudo_dirs = [""]
            self.root = "/bench"
        else:
            self.fs = fsspec.implementations.local.LocalFileSystem()
            self.root = str(scratch / "fsspec")
        for d in range(DIRS):
            self.fs.makedirs(f"{self.root}/dir{d:02d}", exist_ok=True)

    def write(self, path: str, data: bytes) -> None:
        self.fs.pipe_file(f"{self.root}/{path}", data)

    def read(self, path: str) -> bytes:
        return bytes(self.fs.cat_file(f"{self.root}/{path}"))

    def ls(self, directory: str) -> int:
        return len(self.fs.ls(f"{self.root}/{directory}", detail=False))

    def ls_stat(self, directory: str) -> int:
        return len(self.fs.ls(f"{self.root}/{directory}", detail=True))

    def grep(self, pattern: re.Pattern[bytes]) -> int:
        return sum(count_lines(self.fs.cat_file(p), pattern) for p in self.fs.find(self.root))

    def stream_write(self, path: str, pieces: Iterator[bytes]) -> None:
        with self.fs.open(f"{self.root}/{path}", "wb") as handle:
            pour(handle, pieces)

    def stream_read(self, path: str) -> int:
        with self.fs.open(f"{self.root}/{path}", "rb") as handle:
            return drain(handle)


class PyFilesystem2(Library):
    """PyFilesystem2's MemoryFS or OSFS."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.name = f"PyFilesystem2 {kind}"

    def setup(self, scratch: Path) -> None:
        if self.kind == "memory":
            self.fs: Any = fs.memoryfs.MemoryFS()
        else:
            (scratch / "pyfs").mkdir()
            self.fs = fs.osfs.OSFS(str(scratch / "pyfs"))
        for d in range(DIRS):
            self.fs.makedir(f"dir{d:02d}")

    def write(self, path: str, data: bytes) -> None:
        self.fs.writebytes(path, data)

    def read(self, path: str) -> bytes:
        return bytes(self.fs.readbytes(path))

    def ls(self, directory: str) -> int:
        return len(self.fs.listdir(directory))

    def ls_stat(self, directory: str) -> int:
        return sum(1 for _ in self.fs.scandir(directory, namespaces=["details"]))

    def grep(self, pattern: re.Pattern[bytes]) -> int:
        return sum(count_lines(self.fs.readbytes(p), pattern) for p in self.fs.walk.files())

    def stream_write(self, path: str, pieces: Iterator[bytes]) -> None:
        with self.fs.openbin(path, "w") as handle:
            pour(handle, pieces)

    def stream_read(self, path: str) -> int:
        with self.fs.openbin(path, "r") as handle:
            return drain(handle)

    def teardown(self) -> None:
        self.fs.close()


class Ours(Library):
    """A workspacefs backend, made by ``make``."""

    def __init__(self, name: str, make: Callable[[Path], Filesystem]) -> None:
        self.name = f"workspacefs {name}"
        self.make = make

    def setup(self, scratch: Path) -> None:
        self.fs = self.make(scratch)
        for d in range(DIRS):
            self.fs.mkdir(f"dir{d:02d}")

    def write(self, path: str, data: bytes) -> None:
        self.fs.write_bytes(path, data)

    def read(self, path: str) -> bytes:
        return self.fs.read_bytes(path).content

    def ls(self, directory: str) -> int:
        return len(self.fs.list(directory))

    def ls_stat(self, directory: str) -> int:
        return len(self.fs.list_stats(directory))

    def grep(self, pattern: re.Pattern[bytes]) -> int:
        return len(self.fs.grep(pattern.pattern.decode(), max_matches=1_000_000))

    def stream_write(self, path: str, pieces: Iterator[bytes]) -> None:
        with self.fs.open_write(path) as writer:
            pour(writer, pieces)

    def stream_read(self, path: str) -> int:
        with self.fs.open_read(path) as reader:
            return drain(reader)

    def teardown(self) -> None:
        self.fs.close()


def measure(libraries: list[Library], count: int, rounds: int, tmp: Path) -> dict[str, dict[str, float]]:
    """Per-file µs (per entry for listings) and stream MiB/s; the best of ``rounds`` interleaved rounds."""
    names = paths(count)
    pattern = re.compile(GREP.encode())
    piece = os.urandom(MIB)
    best: dict[str, dict[str, float]] = {}
    for round_ in range(rounds):
        for library in libraries:
            scratch = tmp / f"r{round_}-{library.name.replace(' ', '-')}"
            scratch.mkdir()
            library.setup(scratch)
            row = best.setdefault(library.name, {})
            # new content every round: a store shared by the rounds must not turn writes into dedup hits
            contents = [make_content(i + round_ * count) for i in range(count)]

            def keep(column: str, seconds: float, per: int, row: dict[str, float] = row) -> None:
                row[column] = min(row.get(column, float("inf")), seconds * 1e6 / per)

            keep(
                "write",
                timed(lambda lib=library, new=contents: [lib.write(p, c) for p, c in zip(names, new, strict=True)])[0],
                count,
            )
            keep("read", timed(lambda lib=library: [lib.read(p) for p in names])[0], count)
            seconds, entries = timed(lambda lib=library: sum(lib.ls(f"dir{d:02d}") for d in range(DIRS)))
            keep("ls", seconds, entries)
            seconds, entries = timed(lambda lib=library: sum(lib.ls_stat(f"dir{d:02d}") for d in range(DIRS)))
            keep("ls+stat", seconds, entries)
            library.grep(pattern)  # the first grep indexes new content (the at-scale section times that one)
            seconds, hits = timed(lambda lib=library: lib.grep(pattern))
            assert hits == count // 10, (library.name, hits)
            keep("grep", seconds, count)
            seconds, _ = timed(lambda lib=library: lib.stream_write("stream.bin", iter([piece] * STREAM_MIB)))
            row["stream write"] = max(row.get("stream write", 0.0), STREAM_MIB / seconds)
            seconds, size = timed(lambda lib=library: lib.stream_read("stream.bin"))
            assert size == STREAM_MIB * MIB
            row["stream read"] = max(row.get("stream read", 0.0), STREAM_MIB / seconds)
            library.teardown()
            shutil.rmtree(scratch, ignore_errors=True)
    return best


def print_tables(best: dict[str, dict[str, float]]) -> None:
    columns = (*COLUMNS, "stream write", "stream read")
    header = f"{'':26}" + "".join(f"{c:>13}" for c in columns)
    print("µs per file (per entry for ls); stream in MiB/s\n" + header)
    for name, row in best.items():
        print(f"{name:26}" + "".join(f"{row[c]:13.1f}" for c in columns))
    raw = best["raw os"]
    print("\nx raw os (lower is better; streams: raw os MiB/s ÷ ours)\n" + header)
    for name, row in best.items():
        cells = [row[c] / raw[c] for c in COLUMNS] + [raw[c] / row[c] for c in ("stream write", "stream read")]
        print(f"{name:26}" + "".join(f"{cell:13.2f}" for cell in cells))


def per_file(fs: Filesystem, names: list[str], first: int) -> tuple[float, float]:
    """µs per file to write ``names`` (new files of new content, numbered from ``first``), then to read
    them back."""
    contents = [make_content(first + i) for i in range(len(names))]
    write = timed(lambda: [fs.write_bytes(p, c) for p, c in zip(names, contents, strict=True)])[0]
    read = timed(lambda: [fs.read_bytes(p) for p in names])[0]
    return write * 1e6 / len(names), read * 1e6 / len(names)


def fill(fs: Filesystem, count: int, prefix: str) -> None:
    content = make_content(7)
    for i in range(count):
        fs.write_bytes(f"{prefix}{i % 100:02d}/f{i:06d}.txt", content)


def scaling(kind: str, make: Callable[[], SnapshotableFilesystem], total: int) -> None:
    """Per-file cost at 1,000 files vs at ``total``; snapshot/fork/diff/restore at ``total``."""
    probe = [f"probe/p{i:04d}.txt" for i in range(1000)]
    small = make()
    fill(small, 1000, "fill")
    w1, r1 = per_file(small, probe, 10_000_000)
    big = make()
    fill(big, total, "fill")
    wn, rn = per_file(big, probe, 20_000_000)
    print(
        f"  {kind:11} write {w1:7.1f} → {wn:7.1f} µs ({wn / w1:4.2f}x)  read {r1:7.1f} → {rn:7.1f} µs ({rn / r1:4.2f}x)"
    )
    snap_s, snap = timed(big.snapshot)
    for i in range(20):
        big.write_bytes(f"fill{i:02d}/f{i:06d}.txt", b"changed %d" % i)
    diff_s, diff = timed(lambda: big.diff(snap))
    assert len(diff.modified) == 20, diff
    again_s, _ = timed(big.snapshot)  # a session's next snapshot, 20 changes after its first
    restore_s, _ = timed(lambda: big.restore(snap))
    forkable: Any = big
    fork_s = timed(forkable.fork)[0] * 1e3 if big.capabilities.fork else float("nan")
    print(
        f"  {'':11} at {total:,} files: snapshot {snap_s * 1e3:.1f} ms, diff after 20 changes {diff_s * 1e3:.1f} ms,"
        f" next snapshot {again_s * 1e3:.1f} ms, restore {restore_s * 1e3:.1f} ms, fork {fork_s:.1f} ms"
    )


def grep_at_scale(kind: str, make: Callable[[], SnapshotableFilesystem], total: int) -> None:
    """grep over ``total`` distinct 1 KiB files: the first call (which indexes what is new), then a rare
    literal, a rare regex with a literal, and a literal in every file (stops at 1,000 matches)."""
    fs = make()
    fill_s = timed(lambda: [fs.write_bytes(f"g{i % 100:02d}/f{i:06d}.txt", make_content(i)) for i in range(total)])[0]
    first_s, first = timed(lambda: fs.grep("needle-120"))
    cells = [f"fill {fill_s * 1e6 / total:.0f} µs/file", f"first grep {first_s * 1e3:.0f} ms ({len(first)} hits)"]
    searches = (("rare literal", "file 04240 has needle"), ("rare regex", r"needle-12\d"), ("common", "lorem"))
    for label, pattern in searches:
        seconds, hits = best_of(3, lambda p=pattern: fs.grep(p))
        cells.append(f"{label} {seconds * 1e3:.1f} ms ({len(hits)})")
    print(f"  {kind:11} " + ", ".join(cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=2_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--scale-files", type=int, default=100_000)
    parser.add_argument(
        "--only",
        choices=["tables", "scaling", "grep", "floor"],
        action="append",
        help="run only these sections (repeatable; default: all)",
    )
    args = parser.parse_args()
    run = set(args.only or ["tables", "scaling", "grep", "floor"])
    tmp = Path(tempfile.mkdtemp(prefix="wsfs-bench-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    counter = iter(range(1_000_000))
    try:
        with ExitStack() as stack:
            pg_url = stack.enter_context(running_postgres("wsfs_bench"))
            stores = {"sqlite": SqlStore(f"sqlite:///{tmp / 'bench.db'}"), "postgresql": SqlStore(pg_url)}
            for store in stores.values():
                stack.callback(store.close)

            def sql(kind: str) -> Callable[..., SnapshotableFilesystem]:
                return lambda *_: SqlFilesystem(stores[kind], f"bench-{next(counter)}")

            def host(scratch: Path) -> HostFilesystem:
                (scratch / "host").mkdir()
                return HostFilesystem(scratch / "host")

            libraries: list[Library] = [
                RawOs(),
                Fsspec("memory"),
                Fsspec("local"),
                PyFilesystem2("memory"),
                PyFilesystem2("OSFS"),
                Ours("memory", lambda _: InMemoryFilesystem()),
                Ours("host", host),
                Ours("SQLite", sql("sqlite")),
                Ours("PostgreSQL", sql("postgresql")),
            ]
            if "tables" in run:
                print(
                    f"{args.files:,} files of 1 KiB in {DIRS} directories on tmpfs;"
                    f" best of {args.rounds} interleaved rounds\n"
                )
                print_tables(measure(libraries, args.files, args.rounds, tmp))
            if "scaling" in run:
                print(
                    "\nflat in size: per-file cost of 1,000 new files in a workspace of 1,000"
                    f" vs {args.scale_files:,} files"
                )
                scaling("memory", InMemoryFilesystem, args.scale_files)
                scaling("SQLite", sql("sqlite"), args.scale_files)
                scaling("PostgreSQL", sql("postgresql"), args.scale_files)
            if "grep" in run:
                print(f"\ngrep over {args.scale_files:,} distinct 1 KiB files (ms; the trigram index on SQL)")
                grep_at_scale("memory", InMemoryFilesystem, args.scale_files)
                grep_at_scale("SQLite", sql("sqlite"), args.scale_files)
                grep_at_scale("PostgreSQL", sql("postgresql"), args.scale_files)
            if "floor" in run:
                round_trips(stores["postgresql"])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def round_trips(store: SqlStore) -> None:
    """The floor on PostgreSQL: a no-op statement's round trip, against one small write and read."""
    fs = SqlFilesystem(store, "bench-round-trips")
    fs.write_bytes("a.txt", b"x")
    with store.engine.connect() as connection:
        raw: Any = connection.connection.driver_connection
        raw.autocommit = True
        try:
            start = time.perf_counter()
            for _ in range(2000):
                raw.execute("SELECT 1")
            floor = (time.perf_counter() - start) / 2000 * 1e6
        finally:
            raw.autocommit = False
    write = timed(lambda: [fs.write_bytes("a.txt", b"%d" % i) for i in range(2000)])[0] / 2000 * 1e6
    read = timed(lambda: [fs.read_bytes("a.txt") for _ in range(2000)])[0] / 2000 * 1e6
    print(
        f"\nPostgreSQL floor: SELECT 1 round trip {floor:.1f} µs;"
        f" small write {write:.1f} µs ({write / floor:.1f} round trips' worth),"
        f" read {read:.1f} µs ({read / floor:.1f})"
    )


if __name__ == "__main__":
    main()
