"""HostFilesystem side by side with raw ``os``, fsspec's LocalFileSystem, PyFilesystem2's OSFS and ripgrep.

Runs on tmpfs (``/dev/shm``) so the disk does not drown the libraries' own cost: 10,000 files of
1 KiB in 100 directories (write, read, list, glob ``**/*.txt``, regex grep); a 256 MiB stream
(MiB/s and peak-memory growth, measured in a fresh child process); snapshot time per strategy at
1k and 10k files. Listings return sizes everywhere (ours does), so the peers list with details.
Per-file microseconds, best of several interleaved rounds; ratios are ours
divided by the reference named in each row.

Run: ``make bench`` or ``python bench/bench_host.py [--files N] [--rounds R]``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import warnings
from abc import ABC, abstractmethod
from pathlib import Path

from _workload import COLUMNS, DIRS, GREP, file_path, make_content, timed

from workspacefs import HostFilesystem
from workspacefs.backends.host._ripgrep import Ripgrep

warnings.filterwarnings("ignore", category=DeprecationWarning)
warnings.filterwarnings("ignore", category=UserWarning)

import fs.osfs  # noqa: E402 - after the warning filters: PyFilesystem2 warns about pkg_resources
import fsspec.implementations.local  # noqa: E402


class Library(ABC):
    """One library's way of doing each column on a directory."""

    name = ""

    def __init__(self, root: Path) -> None:
        self.root = root

    @abstractmethod
    def write_all(self, files: list[tuple[str, bytes]]) -> None:
        """Write every file (creating directories)."""

    @abstractmethod
    def read_all(self, paths: list[str]) -> None:
        """Read every file."""

    @abstractmethod
    def list_all(self, dirs: list[str]) -> int:
        """List every directory with sizes; the number of entries seen."""

    @abstractmethod
    def glob_all(self) -> int:
        """Glob ``**/*.txt``; the number of matches."""

    @abstractmethod
    def grep_all(self) -> int:
        """Search every file; the number of matching lines."""

    def close(self) -> None:
        """Release whatever the library holds."""


def python_walk_grep(root: Path) -> int:
    pattern = re.compile(GREP)
    found = 0
    for dirpath, _, names in os.walk(root):
        for name in sorted(names):
            with open(os.path.join(dirpath, name), "rb") as handle:
                for line in handle.read().decode("utf-8", "replace").split("\n"):
                    if pattern.search(line):
                        found += 1
    return found


class Ours(Library):
    name = "workspacefs"

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.fs = HostFilesystem(root, snapshot_dir=Path(str(root) + "-snapshots"))

    def write_all(self, files: list[tuple[str, bytes]]) -> None:
        write = self.fs.write_bytes
        for path, data in files:
            write(path, data)

    def read_all(self, paths: list[str]) -> None:
        read = self.fs.read
        for path in paths:
            read(path)

    def list_all(self, dirs: list[str]) -> int:
        return sum(len(self.fs.list(d)) for d in dirs)

    def glob_all(self) -> int:
        return len(self.fs.glob("**/*.txt"))

    def grep_all(self) -> int:
        return len(self.fs.grep(GREP, max_matches=1_000_000))

    def close(self) -> None:
        self.fs.close()


class RawOs(Library):
    name = "raw os"

    def write_all(self, files: list[tuple[str, bytes]]) -> None:
        root = str(self.root)
        for path, data in files:
            full = os.path.join(root, path)
            try:
                handle = open(full, "wb")  # noqa: SIM115
            except FileNotFoundError:
                os.makedirs(os.path.dirname(full), exist_ok=True)
                handle = open(full, "wb")  # noqa: SIM115
            with handle:
                handle.write(data)

    def read_all(self, paths: list[str]) -> None:
        root = str(self.root)
        for path in paths:
            with open(os.path.join(root, path), "rb") as handle:
                handle.read().decode()

    def list_all(self, dirs: list[str]) -> int:
        total = 0
        for directory in dirs:
            with os.scandir(os.path.join(self.root, directory)) as listing:
                total += len([(e.name, e.is_dir(), e.stat().st_size) for e in listing])
        return total

    def glob_all(self) -> int:
        return len(list(self.root.glob("**/*.txt")))

    def grep_all(self) -> int:
        return python_walk_grep(self.root)


class Fsspec(Library):
    name = "fsspec"

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.fs = fsspec.implementations.local.LocalFileSystem(auto_mkdir=True, skip_instance_cache=True)

    def write_all(self, files: list[tuple[str, bytes]]) -> None:
        root = str(self.root)
        for path, data in files:
            self.fs.pipe_file(f"{root}/{path}", data)

    def read_all(self, paths: list[str]) -> None:
        root = str(self.root)
        for path in paths:
            self.fs.cat_file(f"{root}/{path}").decode()

    def list_all(self, dirs: list[str]) -> int:
        return sum(len(self.fs.ls(f"{self.root}/{d}", detail=True)) for d in dirs)

    def glob_all(self) -> int:
        return len(self.fs.glob(f"{self.root}/**/*.txt"))

    def grep_all(self) -> int:
        return python_walk_grep(self.root)


class PyFilesystem2(Library):
    name = "PyFilesystem2"

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.fs = fs.osfs.OSFS(str(root))

    def write_all(self, files: list[tuple[str, bytes]]) -> None:
        made: set[str] = set()
        for path, data in files:
            directory = path.rsplit("/", 1)[0]
            if directory not in made:
                self.fs.makedirs(directory, recreate=True)
                made.add(directory)
            self.fs.writebytes(path, data)

    def read_all(self, paths: list[str]) -> None:
        for path in paths:
            self.fs.readtext(path)

    def list_all(self, dirs: list[str]) -> int:
        return sum(len(list(self.fs.scandir(d, namespaces=["details"]))) for d in dirs)

    def glob_all(self) -> int:
        return sum(1 for _ in self.fs.glob("**/*.txt"))

    def grep_all(self) -> int:
        return python_walk_grep(self.root)


def measure(base: Path, count: int, rounds: int, kinds: tuple[type[Library], ...] = ()) -> dict[str, dict[str, float]]:
    """Per-file µs of every column for ``kinds`` (default: ours and every peer), best of ``rounds``."""
    dirs = [f"dir{d:03d}" for d in range(DIRS)]
    files = [(file_path(i), make_content(i)) for i in range(count)]
    paths = [p for p, _ in files]
    kinds = kinds or (Ours, RawOs, Fsspec, PyFilesystem2)
    best = {kind.name: dict.fromkeys(COLUMNS, float("inf")) for kind in kinds}
    entries = count
    for round_index in range(rounds):
        for kind in kinds:
            root = base / f"{kind.name.replace(' ', '_')}-{round_index}"
            root.mkdir()
            library = kind(root)
            row = best[kind.name]
            for column, action in (
                ("write", lambda lib=library: lib.write_all(files)),
                ("read", lambda lib=library: lib.read_all(paths)),
                ("list", lambda lib=library: lib.list_all(dirs)),
                ("glob", library.glob_all),
                ("grep", library.grep_all),
            ):
                seconds, result = timed(action)
                row[column] = min(row[column], seconds)
                if column == "glob":
                    assert result == count, (kind.name, result)
                if column == "grep":
                    assert result == count // 10, (kind.name, result)
            library.close()
            shutil.rmtree(root)
            shutil.rmtree(Path(str(root) + "-snapshots"), ignore_errors=True)
    for row in best.values():
        for column in COLUMNS:
            row[column] *= 1e6 / (entries if column != "list" else count)
    return best


def ripgrep_by_hand(base: Path, count: int, rounds: int) -> tuple[float, float] | None:
    """Seconds for ``rg -n`` over the tree run directly, and for our grep, on the same tree."""
    rg = Ripgrep.find()
    if rg is None:
        return None
    root = base / "rg-tree"
    root.mkdir()
    ours = HostFilesystem(root, snapshot_dir=base / "rg-snapshots")
    for i in range(count):
        ours.write_bytes(file_path(i), make_content(i))
    by_hand = min(
        timed(lambda: subprocess.run([rg.binary, "-n", GREP, str(root)], capture_output=True, check=True))[0]
        for _ in range(rounds)
    )
    ours_seconds = min(timed(lambda: ours.grep(GREP, max_matches=1_000_000))[0] for _ in range(rounds))
    ours.close()
    shutil.rmtree(root)
    return by_hand, ours_seconds


STREAM_CHILD = """
import os, resource, sys, time
from workspacefs import HostFilesystem
root, mib = sys.argv[1], int(sys.argv[2])
fs = HostFilesystem(root, snapshot_dir=root + "-snapshots")
chunk = os.urandom(1 << 20)
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
started = time.perf_counter()
with fs.open_write("big.bin") as writer:
    for _ in range(mib):
        writer.write(chunk)
wrote = time.perf_counter() - started
started = time.perf_counter()
with fs.open_read("big.bin") as reader:
    for part in reader:
        pass
read = time.perf_counter() - started
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(mib / wrote, mib / read, (peak - base) / 1024)
"""


def streaming(base: Path, mib: int) -> tuple[float, float, float]:
    root = base / "stream"
    root.mkdir()
    out = subprocess.run(
        [sys.executable, "-c", STREAM_CHILD, str(root), str(mib)], capture_output=True, text=True, check=True
    )
    shutil.rmtree(root)
    write_rate, read_rate, growth = (float(x) for x in out.stdout.split())
    return write_rate, read_rate, growth


def snapshot_times(base: Path, sizes: list[int]) -> dict[str, list[float]]:
    results: dict[str, list[float]] = {}
    for strategy in ("git", "archive", "copy"):
        for size in sizes:
            root = base / f"snap-{strategy}-{size}"
            root.mkdir()
            with HostFilesystem(
                root, snapshot_dir=base / f"snapdir-{strategy}-{size}", snapshot_strategy=strategy
            ) as fs:
                for i in range(size):
                    fs.write_bytes(file_path(i), make_content(i))
                first, _ = timed(fs.snapshot)
                fs.write_bytes("dir000/file00000.txt", b"changed\n")
                second, _ = timed(fs.snapshot)
            results.setdefault(strategy, []).extend([first, second])
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stream-mib", type=int, default=256)
    args = parser.parse_args()
    tmpfs = "/dev/shm" if os.path.isdir("/dev/shm") else None
    base = Path(tempfile.mkdtemp(prefix="wsfs-bench-", dir=tmpfs))
    try:
        rows = measure(base, args.files, args.rounds)
        print(f"{args.files} files of 1 KiB in {DIRS} directories on {tmpfs or 'the temp dir'}; µs per file\n")
        print(f"{'':16}" + "".join(f"{c:>10}" for c in COLUMNS))
        for name, row in rows.items():
            print(f"{name:16}" + "".join(f"{row[c]:10.2f}" for c in COLUMNS))
        ours = rows["workspacefs"]
        for reference in ("raw os", "fsspec", "PyFilesystem2"):
            ratio = "".join(f"{ours[c] / rows[reference][c]:10.2f}" for c in COLUMNS)
            print(f"{'÷ ' + reference:16}{ratio}")
        rg = ripgrep_by_hand(base, args.files, args.rounds)
        if rg:
            print(f"\ngrep: rg -n by hand {rg[0]:.3f} s, workspacefs {rg[1]:.3f} s, ratio {rg[1] / rg[0]:.2f}")
        write_rate, read_rate, growth = streaming(base, args.stream_mib)
        print(
            f"\nstreaming {args.stream_mib} MiB: write {write_rate:.0f} MiB/s, read {read_rate:.0f} MiB/s, "
            f"peak RSS growth {growth:.1f} MiB"
        )
        sizes = [1_000, args.files]
        print("\nsnapshot seconds (first; after one change):")
        for strategy, times in snapshot_times(base, sizes).items():
            cells = ", ".join(
                f"{size} files {times[2 * i]:.3f}; {times[2 * i + 1]:.3f}" for i, size in enumerate(sizes)
            )
            print(f"  {strategy:8} {cells}")
        print(
            "  reflink  needs XFS or btrfs (tmpfs has none); tests/test_host_snapshots.py runs it on loop-mounted XFS"
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
