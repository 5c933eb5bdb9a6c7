"""SQLite: why ``bench_history.py``'s second table (content of its own per file) read 1.3 with its shared stores and
about 1.1 with a store per run: what one small write changes, counted, with history off and on.

The workload is that table's (1,000 new files of 1 KiB, then each overwritten, every content its own), measured on
its last repetition of ``--reps`` in three set-ups: ``repeated`` (the bench before: one database file for both flags,
shared by the repetitions, each repetition writing the same bytes), ``own`` (the same sharing, content of its own per
repetition and flag, as the bench now writes) and ``fresh`` (a new database file per repetition and flag). Per write:
statements (SQLite's trace), rows changed (``total_changes``), read system calls (``/proc/self/io``: pages from
outside SQLite's cache), WAL frames per commit and the B-trees they belong to (``dbstat``), with automatic
checkpoints off for the measured repetition, so CPU time is not printed (a WAL of 20,000 frames slows every page
lookup); ``bench_history.py`` has the times.

Run: ``python bench/bench_sql_history_content.py [--reps 3] [--files 1000]`` (Linux: ``/proc/self/io``).
"""

from __future__ import annotations

import argparse
import collections
import shutil
import sqlite3
import struct
import tempfile
from pathlib import Path
from typing import Any

from workspacefs import SqlFilesystem, SqlStore

CONTENT = b"x" * 1023 + b"\n"
SETUPS = ("repeated", "own", "fresh")


def contents(setup: str, rep: int, history: bool, files: int) -> tuple[list[bytes], list[bytes]]:
    """The new and the overwriting content of each file (``repeated``: the same in every repetition)."""
    seed = 0 if setup == "repeated" else 2 * rep + history
    new = [b"%06d-%08d" % (seed, i) + CONTENT[15:] for i in range(files)]
    return new, [b"%06d-%08d" % (seed, i) + CONTENT[15:][::-1] for i in range(files)]


def write(fs: SqlFilesystem, data: tuple[list[bytes], list[bytes]]) -> None:
    """Write every file new, then overwrite each once."""
    for content in data:
        for i, one in enumerate(content):
            fs.write_bytes(f"d{i % 20}/f{i}.txt", one)


def read_calls() -> int:
    """This process's read system calls so far."""
    with open("/proc/self/io", encoding="ascii") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("syscr"))


def wal_pages(database: Path) -> list[tuple[int, int]]:
    """``(page number, commit size)`` of every valid frame of the database's WAL (commit size 0: not a commit)."""
    data = Path(f"{database}-wal").read_bytes()
    page_size, salts = struct.unpack(">I", data[8:12])[0], data[16:24]
    frames, offset = [], 32
    while offset + 24 + page_size <= len(data) and data[offset + 8 : offset + 16] == salts:
        frames.append(struct.unpack(">II", data[offset : offset + 8]))
        offset += 24 + page_size
    return frames


def owners(database: Path) -> dict[int, str]:
    """Page number -> the table or index it belongs to."""
    with sqlite3.connect(database) as reader:
        return {page: name for name, page in reader.execute("SELECT name, pageno FROM dbstat")}


class Bench:
    """The databases of one set-up and the filesystem of each repetition and flag."""

    def __init__(self, setup: str, base: Path) -> None:
        self.setup, self.base = setup, base
        self.stores: dict[Any, SqlStore] = {}

    def database(self, history: bool, rep: int) -> Path:
        return self.base / (f"{self.setup}-{history}-{rep}.db" if self.setup == "fresh" else f"{self.setup}.db")

    def filesystem(self, history: bool, rep: int) -> SqlFilesystem:
        key = (history, rep) if self.setup == "fresh" else history
        store = self.stores.get(key)
        if store is None:
            store = self.stores[key] = SqlStore(f"sqlite:///{self.database(history, rep)}", history=history)
        return SqlFilesystem(store, f"bench-{history}-{rep}")

    def close(self) -> None:
        for store in self.stores.values():
            store.close()


def measure(bench: Bench, history: bool, rep: int, files: int) -> None:
    """Print what the repetition's writes changed, per write, and the WAL frames per commit by B-tree."""
    fs = bench.filesystem(history, rep)
    fs.mkdir("d0")  # the session and the driver's connection exist before the count
    driver = fs.store.driver
    connection, pipeline = held = driver._checkout()  # the one connection the writes then use
    connection.execute("PRAGMA wal_autocheckpoint=0")
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    ran: list[str] = []
    connection.set_trace_callback(ran.append)
    changes, reads = connection.total_changes, read_calls()
    driver._checkin(held)
    write(fs, contents(bench.setup, rep, history, files))
    reads = read_calls() - reads
    assert driver._checkout() == (connection, pipeline)
    connection.set_trace_callback(None)
    changes = connection.total_changes - changes
    connection.execute("PRAGMA wal_autocheckpoint=1000")
    driver._checkin(held)
    database = bench.database(history, rep)
    frames = wal_pages(database)
    commits = sum(1 for _, size in frames if size)
    statements = sum(1 for i, s in enumerate(ran) if i == 0 or s != ran[i - 1])  # a trigger repeats its statement
    count = 2 * files
    print(
        f"{bench.setup:<9}{'on' if history else 'off':<5}{statements / count:>11.2f}{changes / count:>9.2f}"
        f"{reads / count:>8.2f}{len(frames) / commits:>12.2f}"
    )
    pages = owners(database)
    for name, frames_of in collections.Counter(pages.get(page, "(free)") for page, _ in frames).most_common():
        print(f"{'':<14}{name:<32}{frames_of / commits:>6.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--files", type=int, default=1000)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="wsfs-bench-content-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    print(f"Per write of the last of {args.reps} repetitions ({args.files} new + {args.files} overwrites of 1 KiB)")
    print(f"{'set-up':<9}{'hist':<5}{'statements':>11}{'rows':>9}{'reads':>8}{'WAL frames':>12}  per commit, by B-tree")
    try:
        for setup in SETUPS:
            bench = Bench(setup, base)
            try:
                for rep in range(args.reps - 1):
                    for history in (False, True):
                        write(bench.filesystem(history, rep), contents(setup, rep, history, args.files))
                for history in (False, True):
                    measure(bench, history, args.reps - 1, args.files)
            finally:
                bench.close()
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
