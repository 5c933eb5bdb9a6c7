"""What the journal costs: a small write with history on vs off, on every backend that keeps one, in one run.

Each backend writes the same 1 KiB files (half new, half overwrites) with its journal on and off, in
interleaved repetitions; the minimum per file counts. The ratio (on / off) is the journal's overhead per
small write (issue 20's target: at most 1.15). A second table does the same with content of its own per file
and write (as an agent's edits are: with history off each overwrite then collects the content it replaced, which
the journal keeps for undo), and of its own per repetition and flag too: the SQL stores are shared by the
repetitions (and on SQLite the two flags share one file), so content an earlier repetition wrote would already be
stored, and still referenced by its journal, and the write would store and collect nothing (the first table's
case again: 1.3 where new content measures about 1.0-1.1). Then a 10,000-entry journal is queried: the newest 100
entries, one path's entries, one actor's entries (µs per query).

``--s3`` adds the object store on moto's S3 server (loopback), in a bucket with and one without versioning:
every request is a round trip there, and the journal adds two (three when a write replaces a file in an
unversioned bucket, the last beside the entry's first ``PUT``), so expect about 2x rather than 1.15x. Its
journal is not queried (10,000 writes through moto take minutes). ``--only NAME`` measures only the backends
whose name starts so (``--only host``: one backend's journal, run after run).

Run: ``python bench/bench_history.py [--files N] [--reps R] [--no-postgres] [--s3] [--only NAME]``.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any

from workspacefs import HostFilesystem, InMemoryFilesystem, SqlFilesystem, SqlStore
from workspacefs.history import acting_as

CONTENT = b"x" * 1023 + b"\n"


def fast_dir() -> Path:
    """A directory on tmpfs where there is one (the disk is not what is measured)."""
    shm = Path("/dev/shm")
    return Path(tempfile.mkdtemp(prefix="wsfs-bench-history-", dir=shm if shm.is_dir() else None))


def write_files(fs: Any, files: int, _seed: int = 0) -> float:
    """Seconds per file to write ``files`` new files and overwrite each once (the same two contents every time)."""
    start = time.perf_counter()
    for i in range(files):
        fs.write_bytes(f"d{i % 20}/f{i}.txt", CONTENT)
    for i in range(files):
        fs.write_bytes(f"d{i % 20}/f{i}.txt", CONTENT[::-1])
    return (time.perf_counter() - start) / (2 * files)


def write_distinct_files(fs: Any, files: int, seed: int = 0) -> float:
    """:func:`write_files` with content of its own per file and per write (as an agent's edits are), and per
    ``seed`` (each repetition and flag its own: no content is already stored): history off then collects each
    overwritten content, which the journal keeps for undo."""
    new = [b"%06d-%08d" % (seed, i) + CONTENT[15:] for i in range(files)]
    changed = [b"%06d-%08d" % (seed, i) + CONTENT[15:][::-1] for i in range(files)]
    start = time.perf_counter()
    for i in range(files):
        fs.write_bytes(f"d{i % 20}/f{i}.txt", new[i])
    for i in range(files):
        fs.write_bytes(f"d{i % 20}/f{i}.txt", changed[i])
    return (time.perf_counter() - start) / (2 * files)


DISTINCT_REPS = 10_000
"""Added to a repetition's number for the distinct-content row (fresh sessions and directories, not the first's)."""


def ratios(
    kinds: dict[str, Factory], files: int, reps: int, write: Callable[[Any, int, int], float], first: int
) -> None:
    """One line per backend: µs per write with history off and on (min of ``reps``, interleaved), and their ratio."""
    for name, make in kinds.items():
        best = {False: float("inf"), True: float("inf")}
        for rep in range(first, first + reps):
            for history in (False, True):  # interleaved: a busy moment hits both alike
                best[history] = min(best[history], write(make(history, rep), files, 2 * rep + history))
        print(f"{name:<24}{best[False] * 1e6:>14.1f}{best[True] * 1e6:>14.1f}{best[True] / best[False]:>10.2f}")


Factory = Callable[[bool, int], Any]


@contextmanager
def object_stores() -> Iterator[dict[str, Factory]]:
    """``name -> make(history, rep)`` on a fresh prefix of moto's S3 server, per kind of bucket."""
    from workspacefs import ObjectStoreFilesystem  # noqa: PLC0415 - the s3 extra, only when asked
    from workspacefs.testing._s3 import running_s3  # noqa: PLC0415

    with running_s3() as server:
        server.make_bucket("bench-plain")
        server.make_bucket("bench-versioned", versioned=True)

        def make(bucket: str) -> Factory:
            def fs(history: bool, rep: int) -> Any:
                s3: Any = server.filesystem()
                return ObjectStoreFilesystem(s3, f"{bucket}/h{history}-{rep}", history=history)

            return fs

        yield {"S3, moto (no versions)": make("bench-plain"), "S3, moto (versioned)": make("bench-versioned")}


@contextmanager
def backends(postgres: bool) -> Iterator[dict[str, Factory]]:
    """``name -> make(history, rep)``: a fresh, empty filesystem of each kind."""
    base = fast_dir()
    made: list[Any] = []
    stores: dict[tuple[str, bool], SqlStore] = {}

    def memory(history: bool, _rep: int) -> Any:
        return InMemoryFilesystem(history=history)

    def host(history: bool, rep: int) -> Any:
        root = base / f"host-{history}-{rep}"
        root.mkdir()
        fs = HostFilesystem(root, snapshot_dir=base / f"snap-{history}-{rep}", history=history, durable=False)
        made.append(fs)
        return fs

    def sql(url: str, kind: str) -> Factory:
        def make(history: bool, rep: int) -> Any:
            store = stores.get((kind, history))
            if store is None:
                store = stores[(kind, history)] = SqlStore(url, history=history)
            return SqlFilesystem(store, f"bench-{history}-{rep}")

        return make

    found: dict[str, Factory] = {
        "memory": memory,
        "host (tmpfs)": host,
        "SQLite (tmpfs)": sql(f"sqlite:///{base / 'bench.db'}", "sqlite"),
    }

    def close_all() -> None:  # before the server stops: a pooled connection then closes quietly
        for fs in made:
            fs.close()
        for store in stores.values():
            store.close()
        made.clear()
        stores.clear()

    try:
        if postgres:
            from workspacefs.testing._postgres import postgres_server  # noqa: PLC0415 - only when asked

            with postgres_server() as server:
                found["PostgreSQL (loopback)"] = sql(server.url, "postgresql")
                try:
                    yield found
                finally:
                    close_all()
        else:
            yield found
    finally:
        close_all()
        shutil.rmtree(base, ignore_errors=True)


def queries(make: Factory) -> dict[str, float]:
    """µs per query on a journal of 10,000 entries by three actors over 1,000 paths."""
    fs = make(True, 999)
    for i in range(10_000):
        with acting_as(f"agent-{i % 3}"):
            fs.write_bytes(f"q{i % 50}/f{i % 1000}.txt", str(i).encode())
    timings: dict[str, float] = {}
    for name, query in (
        ("newest 100", lambda: fs.history(limit=100)),
        ("one path", lambda: fs.history("q7/f7.txt")),
        ("one actor, 100", lambda: fs.history(actor="agent-1", limit=100)),
    ):
        best = min(_timed(query) for _ in range(5))
        timings[name] = best * 1e6
    return timings


def _timed(work: Callable[[], object]) -> float:
    start = time.perf_counter()
    work()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument("--s3", action="store_true", help="also the object store, on moto's S3 server")
    parser.add_argument("--only", help="only the backends whose name starts with this (memory, host, SQLite, ...)")
    args = parser.parse_args()

    def chosen(name: str) -> bool:
        return args.only is None or name.lower().startswith(args.only.lower())

    with (
        backends(not args.no_postgres and chosen("PostgreSQL")) as found,
        object_stores() if args.s3 else nullcontext({}) as remote,
    ):
        local = {k: v for k, v in found.items() if chosen(k)}
        kinds = {**local, **{k: v for k, v in remote.items() if chosen(k)}}
        print(f"Small writes ({args.files} new + {args.files} overwrites of 1 KiB), µs per write, min of {args.reps}")
        print(f"{'backend':<24}{'history off':>14}{'history on':>14}{'on / off':>10}")
        ratios(kinds, args.files, args.reps, write_files, 0)
        print()
        print(f"The same, each file's content its own (an agent's edits), µs per write, min of {args.reps}")
        print(f"{'backend':<24}{'history off':>14}{'history on':>14}{'on / off':>10}")
        ratios(kinds, args.files, args.reps, write_distinct_files, DISTINCT_REPS)
        print()
        print("Queries on a 10,000-entry journal, µs per query (min of 5)")
        print(f"{'backend':<24}{'newest 100':>14}{'one path':>14}{'one actor, 100':>16}")
        for name, make in local.items():
            timing = queries(make)
            print(
                f"{name:<24}{timing['newest 100']:>14.0f}{timing['one path']:>14.0f}{timing['one actor, 100']:>16.0f}"
            )


if __name__ == "__main__":
    main()
