"""Where a small host write's CPU goes: the whole write with history off and on, and the journal's steps alone.

CPU time (``time.process_time``: every thread of the process, the journal's committer included) per 1 KiB
write or step, best of ``--reps`` runs of ``--count`` each, on tmpfs. Rows:

- whole writes of new files and of overwrites (paths this object wrote: the write looks at the file first),
  history off and on;
- the journal's parts measured alone: the new content's id (SHA-256), one ``note`` (its row, the group, its
  share of the group's insert and commit), building the row, the insert and commit per row in groups of 64,
  and keeping what an overwrite replaces (one open that checks the entry, reads, hashes and closes; content kept
  a moment ago is not touched again).

Run: ``python bench/bench_host_write_steps.py [--count N] [--reps R]``.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from workspacefs import HostFilesystem
from workspacefs.backends.host import _journal as host_journal
from workspacefs.history import Change, current_actor
from workspacefs.streams import content_id_of

CONTENT = b"x" * 1023 + b"\n"


def best(action: Callable[[], object], count: int, reps: int) -> float:
    """CPU µs per unit of the fastest of ``reps`` calls of ``action`` (which does ``count`` units)."""
    runs = []
    for _ in range(reps):
        gc.collect()
        start = time.process_time()
        action()
        runs.append((time.process_time() - start) / count * 1e6)
    return min(runs)


def whole_writes(base: Path, history: bool, count: int, reps: int) -> tuple[float, float]:
    """µs per new-file write and per overwrite of those files."""
    made: list[HostFilesystem] = []

    def new() -> None:
        root = base / f"writes-{history}-{len(made)}"
        root.mkdir()
        fs = HostFilesystem(root, snapshot_dir=Path(f"{root}-snapshots"), history=history)
        for d in range(20):
            fs.mkdir(f"d{d}")
        made.append(fs)
        for i in range(count):
            fs.write_bytes(f"d{i % 20}/f{i}.txt", CONTENT)
        if fs._changes is not None:
            fs._changes.flush()

    def overwrite() -> None:
        fs = made.pop(0)
        for i in range(count):
            fs.write_bytes(f"d{i % 20}/f{i}.txt", CONTENT[::-1])
        if fs._changes is not None:
            fs._changes.flush()
        fs.close()

    return best(new, count, reps), best(overwrite, count, reps)


def journal_steps(base: Path, count: int, reps: int) -> dict[str, float]:
    """The journal's parts, each alone."""
    steps: dict[str, float] = {}
    steps["content id of the new content (SHA-256)"] = best(
        lambda: [content_id_of(CONTENT) for _ in range(count)], count, reps
    )
    journal = host_journal.HostJournal(base / "journal")
    actor, content = current_actor(), content_id_of(CONTENT)
    changes = [[Change(f"d{i % 20}/f{i}.txt", None, content, 0, 1024)] for i in range(count)]

    def notes() -> None:
        for change in changes:
            journal.note("write", change, actor)
        journal.flush()

    steps["journal: one note, all of it (row, group, its share of insert + commit)"] = best(notes, count, reps)
    steps["  building its row"] = best(
        lambda: [host_journal._rows("write", c, actor, None, None) for c in changes], count, reps
    )
    rows = [host_journal._rows("write", c, actor, None, None) for c in changes]

    def inserts() -> None:
        for start in range(0, count, 64):
            journal._db.execute("BEGIN IMMEDIATE")
            host_journal._insert_and_commit(journal._db, rows[start : start + 64])

    steps["  SQLite insert + commit per row (groups of 64)"] = best(inserts, count, reps)
    journal.close()
    root = base / "keeping"
    root.mkdir()
    (root / "f").write_bytes(CONTENT)
    fs = HostFilesystem(root, snapshot_dir=base / "keeping-snapshots")
    dir_fd = os.open(root, os.O_PATH | os.O_DIRECTORY)
    steps["keeping what an overwrite replaces (open, check, read, hash, close)"] = best(
        lambda: [fs._replaced_at(dir_fd, "f", "f") for _ in range(count)], count, reps
    )
    os.close(dir_fd)
    fs.close()
    return steps


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--count", type=int, default=4000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="wsfs-bench-steps-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None))
    try:
        rows: dict[str, float] = {}
        for history in (False, True):
            new, overwrite = whole_writes(base, history, args.count, args.reps)
            state = "on" if history else "off"
            rows[f"write of a new file, history {state}"] = new
            rows[f"overwrite, history {state}"] = overwrite
        rows.update(journal_steps(base, args.count, args.reps))
        print(f"CPU µs per 1 KiB write or step, best of {args.reps} runs of {args.count}\n")
        for name, micros in rows.items():
            print(f"{name:76}{micros:8.1f}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
