"""PostgreSQL: tree operations beside writers of the same tree — deadlocks PostgreSQL broke, errors callers saw.

Three writer threads overwrite and create files under ``d/``, ``e/`` and ``u/`` while another thread moves the
tree back and forth (``move``), copies it (``copy``), copies it over a copy of it and moves that copy back over it
(``moveover``: each replaces a whole tree), copies it over its copy (``copyover``), deletes and rebuilds it
(``delete``), undoes a tree copy and a tree move (``undo``) or merges a fork and applies the result (``merge``);
``nestedcopy``/``nestedmove`` copy ``d`` over ``p/u`` (or move a copy of it there) while a fourth thread moves ``p``
to ``q`` and back (a tree operation on the target's parent; its ``FileExistsError``/``FileNotFoundError`` not
counted: the copy makes ``p`` again when it is away).
Counts, not times: the database's ``pg_stat_database.deadlocks`` before and after (a fresh database per kind), and
the errors each side saw other than ``FileNotFoundError`` (a writer whose directory was moved away). A session's
usage row exists (a quota).

Run: ``python bench/bench_sql_tree_races.py [--rounds N] [--kinds move,copy,...] [--postgres URL]``.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import os
import threading
import time
from collections.abc import Callable
from contextlib import ExitStack
from typing import Any

import sqlalchemy as sa

from workspacefs import Quota, SqlFilesystem, SqlStore
from workspacefs.backends.sql import engine_url
from workspacefs.testing._postgres import create_database, running_postgres

FILES = 12
WRITERS = 3
STEPS = 6
KINDS = ("move", "copy", "moveover", "copyover", "nestedcopy", "nestedmove", "delete", "undo", "merge")
QUOTA = Quota(max_bytes=10**9, max_files=10**6)
_ids = itertools.count()


def deadlocks(url: str) -> int:
    """The database's deadlock count (statistics flushed first)."""
    engine = sa.create_engine(engine_url(url)[0])
    with engine.connect() as connection:
        connection.exec_driver_sql("SELECT pg_stat_clear_snapshot()")
        found = connection.exec_driver_sql("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        count = int(found.scalar() or 0)
    engine.dispose()
    return count


def writer(store: SqlStore, session: str, k: int, done: threading.Event, errors: collections.Counter[Any]) -> None:
    """Overwrite and create files under the three trees the mover uses, until told to stop."""
    fs = SqlFilesystem(store, session, create=False, quota=QUOTA)
    for i in itertools.count():
        if done.is_set():
            return
        top = "deu"[i % 3]
        try:
            fs.write(f"{top}/f{(i * 7 + k) % FILES}.txt", f"w{k} {i}\n", create_parents=False)
            fs.write(f"{top}/sub/new-{k}-{i % 4}.txt", "new\n", create_parents=False)
        except FileNotFoundError:
            pass
        except Exception as exc:
            errors["writer", type(exc).__name__] += 1


def steps(kind: str, fs: SqlFilesystem, i: int) -> list[Callable[[], object]]:
    """The tree operations of one step of ``kind`` (each counted, and its errors)."""
    if kind == "move":
        return [lambda: fs.move("d", "e"), lambda: fs.move("e", "d")]
    if kind == "copy":
        return [lambda: fs.copy("d", f"c{i}")]
    if kind == "moveover":
        return [lambda: fs.copy("d", "e", overwrite=True), lambda: fs.move("e", "d", overwrite=True)]
    if kind == "copyover":
        return [lambda: fs.copy("d", "u", overwrite=True)]
    if kind == "nestedcopy":
        return [lambda: fs.copy("d", "p/u", overwrite=True)]
    if kind == "nestedmove":
        return [lambda: fs.copy("d", "e", overwrite=True), lambda: fs.move("e", "p/u", overwrite=True)]
    if kind == "delete":
        return [lambda: fs.delete("d", recursive=True), lambda: fill(fs)]
    if kind == "undo":
        return [lambda: undo_copy(fs), lambda: undo_move(fs)]

    def merge() -> None:
        base = fs.snapshot()
        fork = fs.fork(base)
        for n in range(FILES):
            fork.write(f"d/f{n}.txt", f"fork {i}\n")
        result = fs.merge(base, fs.snapshot(), fork.snapshot())
        fs.restore(result.snapshot)

    return [merge]


def fill(fs: SqlFilesystem) -> None:
    """The tree the writers write in."""
    for n in range(FILES):
        fs.write(f"d/f{n}.txt", "base\n")
        fs.write(f"d/sub/g{n}.txt", "base\n")


def parent_mover(store: SqlStore, session: str, done: threading.Event, errors: collections.Counter[Any]) -> None:
    """Move ``p`` (the parent of the nested kinds' target) to ``q`` and back, until told to stop."""
    fs = SqlFilesystem(store, session, create=False, quota=QUOTA)
    for i in itertools.count():
        if done.is_set():
            return
        try:
            fs.move(*(("p", "q") if i % 2 == 0 else ("q", "p")))
        except (FileNotFoundError, FileExistsError):
            pass
        except Exception as exc:
            errors["parent mover", type(exc).__name__] += 1


def undo_copy(fs: SqlFilesystem) -> None:
    """Copy ``d`` to ``u`` (writers write there too), then undo it: a tree delete."""
    if not fs.exists("d"):
        fs.move("e", "d")
    if fs.exists("u"):
        fs.delete("u", recursive=True)
    fs.copy("d", "u")
    fs.undo(fs.history(limit=1)[0].entry_id, force=True)


def undo_move(fs: SqlFilesystem) -> None:
    """Move ``d`` to ``e``, then undo it: a tree move back, with writers in both."""
    fs.move("d", "e")
    fs.undo(fs.history(limit=1)[0].entry_id, force=True)


def measure(server: str, kind: str, rounds: int) -> tuple[int, int, dict[Any, int]]:
    """Operations, deadlocks and errors of ``rounds`` sessions of ``kind``."""
    url = create_database(server, f"tree_races_{kind}_{os.getpid()}_{next(_ids)}")
    store = SqlStore(url)
    errors: collections.Counter[Any] = collections.Counter()
    operations = 0
    before = deadlocks(url)
    for r in range(rounds):
        session = f"s{r}"
        fs = SqlFilesystem(store, session, quota=QUOTA)
        fill(fs)
        done = threading.Event()
        threads = [threading.Thread(target=writer, args=(store, session, k, done, errors)) for k in range(WRITERS)]
        if kind.startswith("nested"):
            fs.copy("d", "p/u")
            threads.append(threading.Thread(target=parent_mover, args=(store, session, done, errors)))
        for thread in threads:
            thread.start()
        try:
            for i in range(STEPS):
                for step in steps(kind, fs, i):
                    operations += 1
                    try:
                        step()
                    except Exception as exc:
                        if not (kind.startswith("nested") and isinstance(exc, (FileNotFoundError, FileExistsError))):
                            errors[kind, type(exc).__name__] += 1  # (nested: p moved away, or made again beside q)
        finally:
            done.set()
            for thread in threads:
                thread.join()
    time.sleep(1.0)  # the server's statistics are flushed within a second
    found = deadlocks(url) - before
    store.close()
    return operations, found, dict(errors)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--kinds", default=",".join(KINDS))
    parser.add_argument("--postgres", help="a server's URL (default: one started here)")
    args = parser.parse_args()
    with ExitStack() as stack:
        server = args.postgres or stack.enter_context(running_postgres())
        print(f"{'kind':<8}{'operations':>12}{'deadlocks':>11}  errors (a writer's FileNotFoundError not counted)")
        for kind in args.kinds.split(","):
            operations, found, errors = measure(server, kind, args.rounds)
            print(f"{kind:<8}{operations:>12}{found:>11}  {errors}", flush=True)


if __name__ == "__main__":
    main()
