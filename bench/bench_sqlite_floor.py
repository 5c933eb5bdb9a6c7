"""SQLite's floor for one small write (issue 15: "the measured reason it cannot be, with the floor you measured"):
the statements workspacefs runs, replayed on a bare ``sqlite3`` connection, beside the library and raw ``os``.

Each round writes ``--ops`` new 1 KiB files in 20 directories, three ways, interleaved, on tmpfs:

- raw ``os``: ``open``/``write``/``close`` of a new file;
- the replay: the exact statements of :meth:`SqlFilesystem.write_bytes` for a new small file (``BEGIN IMMEDIATE``,
  the content's row, the parent's and target's rows, the file's row, the journal row, ``COMMIT``) with the values the
  library binds, on the same database file with the same pragmas, through the standard library's ``sqlite3``: what
  the write costs with no Python of ours around it;
- workspacefs ``write_bytes`` (journal on, the default).

It prints µs per write (min of ``--reps`` rounds; CPU and wall), each statement's share of the replay, and the WAL
frames one commit writes, by B-tree (``dbstat``): the pages the schema makes one write touch. Past the store's
journal retention (``history_entries``, 10,000 rows by default) the library also prunes its oldest entries, every
256th write; keep ``--ops`` x ``--reps`` below that to compare the write alone.

Run: ``python bench/bench_sqlite_floor.py [--ops 2000] [--reps 5]``.
"""

from __future__ import annotations

import argparse
import collections
import functools
import hashlib
import os
import shutil
import sqlite3
import struct
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workspacefs import SqlFilesystem, SqlStore
from workspacefs.backends.sql import _hot

DIRS = 20
STEPS = ("BEGIN", "content row", "parent and target rows", "file row", "journal row", "COMMIT")
NOW = "2026-01-01 00:00:00.000000"


def contents(ops: int, round_: int, way: int) -> list[bytes]:
    """1 KiB of content of its own per file, round and way (nothing is deduplicated)."""
    return [b"%03d-%03d-%08d-" % (round_, way, i) + os.urandom(1004) for i in range(ops)]


def timed(work: Callable[[], object]) -> tuple[float, float]:
    """CPU and wall seconds of one call."""
    cpu, wall = time.process_time(), time.perf_counter()
    work()
    return time.process_time() - cpu, time.perf_counter() - wall


class Replay:
    """The small write's statements on a bare ``sqlite3`` connection to the store's database."""

    def __init__(self, database: Path, session: str) -> None:
        self.connection = sqlite3.connect(database, isolation_level=None)
        for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON"):
            self.connection.execute(f"PRAGMA {pragma}")
        self.cursor = self.connection.cursor()
        self.session = session
        self.spent = dict.fromkeys(STEPS, 0)

    def write(self, path: str, data: bytes) -> None:
        """One new small file, as the library writes it, each statement timed."""
        parent, name = path.rsplit("/", 1)
        blob = "sha256:" + hashlib.sha256(data).hexdigest()
        session, run, spent = self.session, self.cursor.execute, self.spent
        statements = (
            ("BEGIN", "BEGIN IMMEDIATE", ()),
            ("content row", _hot.PUT_INLINE["sqlite"], (blob, len(data), data)),
            ("parent and target rows", _hot.ROWS_FOR_WRITE, (session, parent, session, path)),
            ("file row", _hot.INSERT_FILE, (session, path, parent, name, False, False, blob, len(data), NOW, NOW)),
            (
                "journal row",
                _hot.INSERT_JOURNAL["sqlite"],
                (session, None, NOW, "write", *(None,) * 4, path, None, None, blob, 0, len(data), None, None),
            ),
            ("COMMIT", "COMMIT", ()),
        )
        for step, sql, params in statements:
            started = time.perf_counter_ns()
            run(sql, params).fetchall()
            spent[step] += time.perf_counter_ns() - started


def frames_by_tree(database: Path, replay: Replay, ops: int) -> tuple[float, list[tuple[str, float]]]:
    """WAL frames per commit of ``ops`` replayed writes, by the B-tree each page belongs to."""
    connection = replay.connection
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.execute("PRAGMA wal_autocheckpoint=0")
    for i in range(ops):
        replay.write(f"rd{i % DIRS}/frames-{i}.txt", os.urandom(1024))
    data = Path(f"{database}-wal").read_bytes()
    page_size, salts = struct.unpack(">I", data[8:12])[0], data[16:24]
    pages: collections.Counter[int] = collections.Counter()
    offset = 32
    while offset + 24 + page_size <= len(data) and data[offset + 8 : offset + 16] == salts:
        pages[struct.unpack(">I", data[offset : offset + 4])[0]] += 1
        offset += 24 + page_size
    owner = dict(connection.execute("SELECT pageno, name FROM dbstat").fetchall())
    trees: collections.Counter[str] = collections.Counter()
    for page, count in pages.items():
        trees[owner.get(page, "(free or new)")] += count
    connection.execute("PRAGMA wal_autocheckpoint=1000")
    return sum(pages.values()) / ops, [(tree, count / ops) for tree, count in trees.most_common()]


def measure(base: Path, ops: int, reps: int) -> tuple[dict[str, tuple[float, float]], dict[str, int], Any]:
    """Best CPU and wall µs per write of each way, the replay's time per statement, and its WAL frames."""
    database = base / "store.db"
    store = SqlStore(f"sqlite:///{database}")
    best: dict[str, tuple[float, float]] = {}
    try:
        fs = SqlFilesystem(store, "floor")
        replayed = SqlFilesystem(store, "replay")  # a session of its own: the library's retention never prunes its rows
        for d in range(DIRS):
            fs.mkdir(f"d{d}")
            replayed.mkdir(f"rd{d}")
        replayed.close()
        replay = Replay(database, "replay")
        for round_ in range(reps):
            names = [f"d{i % DIRS}/r{round_}-f{i}.txt" for i in range(ops)]
            for way, (name, work) in enumerate(ways(base / f"raw{round_}", fs, replay)):
                data = contents(ops, round_, way)
                cpu, wall = timed(functools.partial(work, names, data))
                old = best.get(name, (float("inf"), float("inf")))
                best[name] = (min(old[0], cpu / ops * 1e6), min(old[1], wall / ops * 1e6))
        spent = dict(replay.spent)
        frames = frames_by_tree(database, replay, 200)
        fs.close()
    finally:
        store.close()
    return best, spent, frames


Way = Callable[[list[str], list[bytes]], None]
"""Writes each name with its content."""


def ways(raw_dir: Path, fs: SqlFilesystem, replay: Replay) -> list[tuple[str, Way]]:
    """The three ways to write ``names``, each its own files."""
    for d in range(DIRS):
        (raw_dir / f"d{d}").mkdir(parents=True)

    def raw(names: list[str], data: list[bytes]) -> None:
        for name, one in zip(names, data, strict=True):
            with open(raw_dir / name, "wb") as handle:
                handle.write(one)

    def replayed(names: list[str], data: list[bytes]) -> None:
        for name, one in zip(names, data, strict=True):
            replay.write("r" + name, one)

    def ours(names: list[str], data: list[bytes]) -> None:
        for name, one in zip(names, data, strict=True):
            fs.write_bytes(name, one)

    return [("raw os", raw), ("replayed statements", replayed), ("workspacefs write_bytes", ours)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=2000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    ops, reps = args.ops, args.reps
    shm = "/dev/shm" if Path("/dev/shm").is_dir() else None
    base = Path(tempfile.mkdtemp(prefix="wsfs-bench-sqlite-floor-", dir=shm))
    try:
        best, spent, (per_commit, trees) = measure(base, ops, reps)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    raw_wall = best["raw os"][1]
    print(f"new 1 KiB files, µs per write (min of {reps} x {ops}); load {os.getloadavg()[0]:.1f}")
    print(f"{'':<28}{'CPU':>9}{'wall':>9}{'÷ raw os (wall)':>18}")
    for name, (cpu, wall) in best.items():
        print(f"{name:<28}{cpu:>9.1f}{wall:>9.1f}{wall / raw_wall:>18.2f}")
    total = sum(spent.values())
    print("\nthe replay's statements, share of its time:")
    for step in STEPS:
        print(f"  {step:<26}{100 * spent[step] / total:>6.1f}%")
    print(f"\nWAL frames per commit: {per_commit:.1f} (pages of 4 KiB the write dirties), by B-tree:")
    for tree, count in trees:
        print(f"  {tree:<34}{count:>6.2f}")


if __name__ == "__main__":
    main()
