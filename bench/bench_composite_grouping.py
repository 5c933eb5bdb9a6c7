"""What grouping costs on a composite of three in-memory mounts: a composite ``mkdir`` (an operation that groups
its mount's changes), an empty ``grouped`` block (which opens every mount's group), and a block of 8 writes made
through ``asyncio.to_thread`` (with the entries it leaves). Minimum over repetitions, µs per operation.

Run: ``python bench/bench_composite_grouping.py [--reps R] [--ops N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Callable

from workspacefs import CompositeFilesystem, InMemoryFilesystem


def composite() -> CompositeFilesystem:
    return CompositeFilesystem({f"/{m}": InMemoryFilesystem() for m in "abc"})


def per_op(work: Callable[[int], object], reps: int, ops: int) -> float:
    """The fastest repetition's µs per call of ``work(i)``."""
    best = float("inf")
    for rep in range(reps):
        start = time.perf_counter()
        for i in range(ops):
            work(rep * ops + i)
        best = min(best, (time.perf_counter() - start) / ops)
    return best * 1e6


def threaded_block(fs: CompositeFilesystem, i: int) -> None:
    async def main() -> None:
        with fs.grouped("batch"):
            await asyncio.gather(
                *[asyncio.to_thread(fs.write_bytes, f"/{m}/{i}-{n}.txt", b"x") for n in range(4) for m in "ab"]
            )

    asyncio.run(main())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--ops", type=int, default=200)
    args = parser.parse_args()
    fs = composite()
    print(f"composite mkdir:        {per_op(lambda i: fs.mkdir(f'/a/d{i}'), args.reps, args.ops):8.1f} µs")
    grouped = composite()

    def empty(_: int) -> None:
        with grouped.grouped("g"):
            pass

    print(f"empty grouped block:    {per_op(empty, args.reps, args.ops):8.1f} µs")
    threaded = composite()
    cost = per_op(lambda i: threaded_block(threaded, i), max(1, args.reps // 4), max(1, args.ops // 10))
    blocks = max(1, args.reps // 4) * max(1, args.ops // 10)
    entries = len(threaded.history(limit=None))
    print(f"8 to_thread writes:     {cost:8.1f} µs per block, {entries / blocks:.1f} entries per block")


if __name__ == "__main__":
    main()
