"""In-memory backends side by side: workspacefs vs fsspec's MemoryFileSystem vs PyFilesystem2's MemoryFS.

Workload: 10,000 files of 1 KiB in 100 directories. Columns: write all (directories included), read
all as text, list every directory, glob ``**/*.txt``, regex grep across every file (the peers have
no grep, so theirs is the loop a user would write). Times are per file (per entry for list), best of
several rounds, in microseconds; the last row is our time divided by the fastest peer's (<= 1.00
means we are at least as fast). Then ``snapshot()`` at 1k, 10k and 100k files.

Run: ``make bench`` or ``python bench/bench_memory.py [--files N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import re
import warnings
from abc import ABC, abstractmethod

from _workload import COLUMNS, DIRS, GREP, best_of, file_path, make_content

from workspacefs import InMemoryFilesystem

warnings.filterwarnings("ignore", category=DeprecationWarning)
warnings.filterwarnings("ignore", category=UserWarning)

import fs.memoryfs  # noqa: E402 - after the warning filters: PyFilesystem2 warns about pkg_resources
import fsspec.implementations.memory  # noqa: E402


class Adapter(ABC):
    """One library's way of doing each column."""

    name = ""

    @abstractmethod
    def setup(self) -> None:
        """Start from an empty filesystem."""

    @abstractmethod
    def write_all(self, files: list[tuple[str, str]], dirs: list[str]) -> None:
        """Create the directories and write every file."""

    @abstractmethod
    def read_all(self, paths: list[str]) -> None:
        """Read every file as text."""

    @abstractmethod
    def list_all(self, dirs: list[str]) -> int:
        """List every directory; the number of entries seen."""

    @abstractmethod
    def glob_all(self) -> int:
        """Glob ``**/*.txt``; the number of matches."""

    @abstractmethod
    def grep_all(self, pattern: re.Pattern[str]) -> int:
        """Search every file; the number of matching lines."""


class Ours(Adapter):
    name = "workspacefs"

    def setup(self) -> None:
        self.fs = InMemoryFilesystem()

    def write_all(self, files: list[tuple[str, str]], dirs: list[str]) -> None:
        write = self.fs.write
        for path, text in files:
            write(path, text)

    def read_all(self, paths: list[str]) -> None:
        read = self.fs.read
        for path in paths:
            read(path)

    def list_all(self, dirs: list[str]) -> int:
        return sum(len(self.fs.list(d)) for d in dirs)

    def glob_all(self) -> int:
        return len(self.fs.glob("**/*.txt"))

    def grep_all(self, pattern: re.Pattern[str]) -> int:
        return len(self.fs.grep(pattern.pattern, max_matches=1_000_000))


class Fsspec(Adapter):
    name = "fsspec"

    def setup(self) -> None:
        self.fs = fsspec.implementations.memory.MemoryFileSystem(skip_instance_cache=True)
        self.fs.store = {}
        self.fs.pseudo_dirs = [""]

    def write_all(self, files: list[tuple[str, str]], dirs: list[str]) -> None:
        for directory in dirs:
            self.fs.makedirs("/" + directory, exist_ok=True)
        pipe = self.fs.pipe_file
        for path, text in files:
            pipe("/" + path, text.encode())

    def read_all(self, paths: list[str]) -> None:
        cat = self.fs.cat_file
        for path in paths:
            cat("/" + path).decode()

    def list_all(self, dirs: list[str]) -> int:
        return sum(len(self.fs.ls("/" + d, detail=False)) for d in dirs)

    def glob_all(self) -> int:
        return len(self.fs.glob("/**/*.txt"))

    def grep_all(self, pattern: re.Pattern[str]) -> int:
        found = 0
        for path in sorted(self.fs.find("/")):
            for line in self.fs.cat_file(path).decode().split("\n"):
                if pattern.search(line):
                    found += 1
        return found


class PyFilesystem2(Adapter):
    name = "PyFilesystem2"

    def setup(self) -> None:
        self.fs = fs.memoryfs.MemoryFS()

    def write_all(self, files: list[tuple[str, str]], dirs: list[str]) -> None:
        for directory in dirs:
            self.fs.makedirs(directory, recreate=True)
        write = self.fs.writetext
        for path, text in files:
            write(path, text)

    def read_all(self, paths: list[str]) -> None:
        read = self.fs.readtext
        for path in paths:
            read(path)

    def list_all(self, dirs: list[str]) -> int:
        return sum(len(self.fs.listdir(d)) for d in dirs)

    def glob_all(self) -> int:
        return sum(1 for _ in self.fs.glob("**/*.txt"))

    def grep_all(self, pattern: re.Pattern[str]) -> int:
        found = 0
        for path in sorted(self.fs.walk.files()):
            for line in self.fs.readtext(path).split("\n"):
                if pattern.search(line):
                    found += 1
        return found


def measure_all(adapters: list[Adapter], count: int, rounds: int) -> dict[str, dict[str, float]]:
    """Per-file microseconds of every column for every adapter.

    Rounds interleave the libraries (round 1 of each, then round 2 of each …), so a slow spell of
    the machine hits all of them alike; each keeps its best round.
    """
    dirs = [f"dir{d:03d}" for d in range(DIRS)]
    files = [(file_path(i), make_content(i).decode()) for i in range(count)]
    paths = [p for p, _ in files]
    pattern = re.compile(GREP)
    best: dict[str, dict[str, float]] = {a.name: dict.fromkeys(COLUMNS, float("inf")) for a in adapters}
    entries = 0
    for _ in range(rounds):
        for adapter in adapters:
            row = best[adapter.name]
            # a new, empty filesystem every round, made (and the last one freed) outside the timing
            seconds, _ = best_of(1, lambda a=adapter: a.write_all(files, dirs), prepare=adapter.setup)
            row["write"] = min(row["write"], seconds)
            seconds, _ = best_of(1, lambda a=adapter: a.read_all(paths))
            row["read"] = min(row["read"], seconds)
            seconds, entries = best_of(1, lambda a=adapter: a.list_all(dirs))  # first listing of this tree
            row["list"] = min(row["list"], seconds)
            seconds, globbed = best_of(1, adapter.glob_all)
            row["glob"] = min(row["glob"], seconds)
            seconds, grepped = best_of(1, lambda a=adapter: a.grep_all(pattern))
            row["grep"] = min(row["grep"], seconds)
            assert globbed == count, (adapter.name, globbed)
            assert grepped == count // 10, (adapter.name, grepped)
    for row in best.values():
        for column in COLUMNS:
            row[column] *= 1e6 / (entries if column == "list" else count)
    return best


SNAPSHOT_BATCH = 200


def snapshot_times(sizes: list[int], rounds: int) -> list[tuple[int, float]]:
    results = []
    for size in sizes:
        fs = InMemoryFilesystem()
        for i in range(size):
            fs.write(f"dir{i % DIRS:03d}/file{i:06d}.txt", "x" * 64)

        # one call right after gc.collect() measures cold caches, not the snapshot: time a batch
        def many(target: InMemoryFilesystem = fs) -> None:
            for _ in range(SNAPSHOT_BATCH):
                target.snapshot()

        seconds, _ = best_of(rounds, many)
        results.append((size, seconds / SNAPSHOT_BATCH * 1e6))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()

    rows = measure_all([Ours(), Fsspec(), PyFilesystem2()], args.files, args.rounds)
    print(f"{args.files} files of 1 KiB in {DIRS} directories; microseconds per file (list: per entry)\n")
    print(f"{'':16}" + "".join(f"{c:>10}" for c in COLUMNS))
    for name, row in rows.items():
        print(f"{name:16}" + "".join(f"{row[c]:10.2f}" for c in COLUMNS))
    ours = rows["workspacefs"]
    ratios = {c: ours[c] / min(row[c] for name, row in rows.items() if name != "workspacefs") for c in COLUMNS}
    print(f"{'ratio to best':16}" + "".join(f"{ratios[c]:10.2f}" for c in COLUMNS))

    print("\nsnapshot() of InMemoryFilesystem, microseconds:")
    snaps = snapshot_times([1_000, 10_000, 100_000], args.rounds)
    for size, micros in snaps:
        print(f"{size:>8} files {micros:10.2f}")
    print(f"100k/1k ratio: {snaps[-1][1] / snaps[0][1]:.2f} (flat is 1.0)")


if __name__ == "__main__":
    main()
