"""ObjectStoreFilesystem beside plain s3fs on the same S3 server (moto's, over HTTP on loopback), in one run.

Small files (1 KiB: write, read, list), a large stream (write and read, MiB/s and the process's RSS growth
while streaming), and what a snapshot costs (the first, one with nothing changed, one after 1% changed).
Times are per file (µs) or MiB/s; the ratio column is ObjectStoreFilesystem / s3fs (lower is better for
times). The server is a local Python process, so absolute numbers say little about AWS; ratios say how
much the workspace semantics (directory checks, content ids, atomic streams) cost on top of s3fs. The small
files also show the HTTP requests each side sends per file: on a loaded machine the times swing from run to
run, the counts do not (and each request is a round trip to a real store too).

Run: ``python bench/bench_objectstore.py [--files N] [--big-mib M]``.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from _workload import DIRS, file_path, make_content, timed

from workspacefs import ObjectStoreFilesystem
from workspacefs.testing._s3 import S3Server, running_s3

MIB = 1024 * 1024
VERSIONED_BUCKET = "wsfs-bench-versioned"
BUCKET = "wsfs-bench"
PLAIN_BUCKET = "wsfs-bench-plain"
OURS_BUCKET = "wsfs-bench-ours"
PART = 5 * MIB
ROUNDS = 3
"""Rounds of the small reads and listings; the best counts (a round that met a busy machine says little)."""


def rss() -> int:
    """Resident set size of this process, in bytes."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


@contextmanager
def rss_growth() -> Iterator[list[int]]:
    """Sample RSS every 5 ms while the block runs; yields a list that ends up holding the peak growth."""
    result = [0]
    base = rss()
    peak = [base]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.005):
            peak[0] = max(peak[0], rss())

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield result
    finally:
        done.set()
        sampler.join()
        result[0] = max(peak[0], rss()) - base


class SmallFiles:
    """One contender's small-file operations (write, read, list: how many entries a directory has) and the
    HTTP requests its s3fs client sends (counted by an observer on botocore's events, one per request)."""

    def __init__(
        self,
        s3: Any,
        write: Callable[[str, bytes], Any],
        read: Callable[[str], bytes],
        listing: Callable[[str], int],
    ) -> None:
        self.write, self.read, self.listing = write, read, listing
        self.requests = 0
        s3._s3.meta.events.register("before-send.s3", self._sent)

    def _sent(self, **_: Any) -> None:
        self.requests += 1


def small_files(count: int, contenders: list[SmallFiles]) -> list[tuple[dict[str, float], dict[str, float]]]:
    """µs and requests per file of each operation for each contender. The contenders take turns operation by
    operation, round by round, so a change in the machine's load does not land on one side only; reads and
    listings (which change nothing) take the best of :data:`ROUNDS` rounds, writes one (new files)."""
    files = [(file_path(i), make_content(i)) for i in range(count)]
    dirs = sorted({p.rsplit("/", 1)[0] for p, _ in files})
    work: dict[str, tuple[int, Callable[[SmallFiles], Any]]] = {
        "write": (1, lambda side: [side.write(p, d) for p, d in files]),
        "read": (ROUNDS, lambda side: [side.read(p) for p, _ in files]),
        "list": (ROUNDS, lambda side: sum(side.listing(d) for d in dirs)),
    }
    rows: list[tuple[dict[str, float], dict[str, float]]] = [({}, {}) for _ in contenders]
    for name, (rounds, action) in work.items():
        for _ in range(rounds):
            for (times, requests), side in zip(rows, contenders, strict=True):
                side.requests = 0
                seconds, result = timed(lambda side=side, action=action: action(side))
                assert name != "list" or result == count, result
                times[name] = min(times.get(name, float("inf")), seconds * 1e6 / count)
                requests[name] = side.requests / count
    return rows


def stream(mib: int, open_write: Callable[[], Any], open_read: Callable[[], Any]) -> dict[str, float]:
    chunk = os.urandom(MIB)
    with rss_growth() as grown_write:
        started = time.perf_counter()
        with open_write() as writer:
            for _ in range(mib):
                writer.write(chunk)
        wrote = time.perf_counter() - started
    with rss_growth() as grown_read:
        started = time.perf_counter()
        total = 0
        with open_read() as reader:
            while data := reader.read(MIB):
                total += len(data)
        read = time.perf_counter() - started
    assert total == mib * MIB, total
    return {
        "write MiB/s": mib / wrote,
        "read MiB/s": mib / read,
        "write RSS+ MiB": grown_write[0] / MIB,
        "read RSS+ MiB": grown_read[0] / MIB,
    }


def stream_child(kind: str, server: S3Server, mib: int) -> dict[str, float]:
    """One stream measurement in a fresh process, so both start from the same RSS (freed memory of one
    would otherwise make the other look lean)."""
    s3 = server.filesystem()
    s3.ls(BUCKET)  # start the session (botocore's models) before anything is measured
    if kind == "s3fs":
        big = f"{BUCKET}/plain/big.bin"
        return stream(mib, lambda: s3.open(big, "wb", block_size=PART), lambda: s3.open(big, "rb", block_size=PART))
    ours = ObjectStoreFilesystem(s3, f"{BUCKET}/ours")
    return stream(mib, lambda: ours.open_write("big.bin"), lambda: ours.open_read("big.bin"))


def snapshot_costs(server: S3Server, bucket: str, count: int) -> dict[str, float]:
    """Snapshot, 1%-changed snapshot and restore times, and the copies kept, in one bucket."""
    fs = ObjectStoreFilesystem(server.filesystem(), f"{bucket}/snapshots")
    for i in range(count):
        fs.write_bytes(file_path(i), make_content(i))
    first, _ = timed(fs.snapshot)
    unchanged, _ = timed(fs.snapshot)
    for i in range(0, count, 100):
        fs.write_bytes(file_path(i), make_content(i) + b"changed\n")
    changed, _ = timed(fs.snapshot)
    restore_target = fs.snapshots()[0]
    restored, _ = timed(lambda: fs.restore(restore_target))
    s3 = server.filesystem()
    blobs = s3.find(f"{bucket}/.wsfs-store/snapshots/blobs/")
    return {
        "first (ms)": first * 1e3,
        "unchanged (ms)": unchanged * 1e3,
        "1% changed (ms)": changed * 1e3,
        "restore 1% (ms)": restored * 1e3,
        "blobs copied": float(len(blobs)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--big-mib", type=int, default=256)
    args = parser.parse_args()
    with running_s3() as server:
        # a bucket each for the small files: moto reads a whole bucket to answer a LIST, so sharing one would
        # make whichever side runs second list (and check) through the other's objects too
        for bucket in (BUCKET, PLAIN_BUCKET, OURS_BUCKET):
            server.make_bucket(bucket)
        s3 = server.filesystem()
        s3.ls(BUCKET)  # start the session before anything is timed
        ours = ObjectStoreFilesystem(server.filesystem(), f"{OURS_BUCKET}/ours")
        ours.fsspec_filesystem.ls(BUCKET)
        plain_root = f"{PLAIN_BUCKET}/plain"

        (plain, plain_requests), (mine, my_requests) = small_files(
            args.files,
            [
                SmallFiles(
                    s3,
                    lambda p, d: s3.pipe_file(f"{plain_root}/{p}", d),
                    lambda p: s3.cat_file(f"{plain_root}/{p}"),
                    lambda d: len(s3.ls(f"{plain_root}/{d}", refresh=True)),
                ),
                SmallFiles(
                    ours.fsspec_filesystem,
                    ours.write_bytes,
                    lambda p: ours.read_bytes(p).content,
                    lambda d: len(ours.list(d)),
                ),
            ],
        )
        print(f"{args.files} files of 1 KiB in {min(DIRS, args.files)} directories, µs per file")
        print(f"{'':8}{'s3fs':>10}{'ours':>10}{'ratio':>8}   requests per file: s3fs  ours")
        for name in plain:
            print(
                f"{name:8}{plain[name]:10.0f}{mine[name]:10.0f}{mine[name] / plain[name]:8.2f}"
                f"{plain_requests[name]:24.2f}{my_requests[name]:6.2f}"
            )

        with multiprocessing.get_context("spawn").Pool(1) as pool:
            plain_stream = pool.apply(stream_child, ("s3fs", server, args.big_mib))
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            ours_stream = pool.apply(stream_child, ("ours", server, args.big_mib))
        print(f"\n{args.big_mib} MiB stream, each in a fresh process (1 MiB writes and reads; s3fs with 5 MiB blocks)")
        print(f"{'':16}{'s3fs':>10}{'ours':>10}{'ratio':>8}")
        for name in plain_stream:
            before, after = plain_stream[name], ours_stream[name]
            ratio = before / after if "MiB/s" in name else (after / before if before else float("nan"))
            print(f"{name:16}{before:10.1f}{after:10.1f}{ratio:8.2f}")
        print("(ratio: time ours/s3fs for MiB/s rows, RSS growth ours/s3fs for RSS rows)")

        server.make_bucket(VERSIONED_BUCKET, versioned=True)
        copying = snapshot_costs(server, BUCKET, args.files)
        naming = snapshot_costs(server, VERSIONED_BUCKET, args.files)
        print(f"\nsnapshots of {args.files} files (1 KiB each): copies into blobs vs names bucket versions")
        print(f"{'':18}{'blobs':>10}{'versions':>10}")
        for name, value in copying.items():
            print(f"{name:18}{value:10.1f}{naming[name]:10.1f}")


if __name__ == "__main__":
    main()
