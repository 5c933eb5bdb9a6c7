"""What the benchmarks share: the 10,000-file workload's content, its columns, and how time is taken."""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import Any

DIRS = 100
"""Files are spread over this many directories."""
GREP = r"needle-\d{3}"
"""The pattern every grep column searches for (in one file of ten)."""
COLUMNS = ("write", "read", "list", "glob", "grep")


def make_content(index: int) -> bytes:
    """1 KiB of text in 16 lines; one file in ten holds a needle."""
    lines = [f"line {n:02d} of file {index:05d} lorem ipsum dolor sit amet consectetur adipiscing\n" for n in range(16)]
    if index % 10 == 0:
        lines[7] = f"line 07 of file {index:05d} has needle-{index % 1000:03d} in it, padded to size....\n"
    return ("".join(lines) + "x" * 1024)[:1023].encode() + b"\n"


def file_path(index: int) -> str:
    """Where file ``index`` of the workload lives."""
    return f"dir{index % DIRS:03d}/file{index:05d}.txt"


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    """Seconds one call takes (after a collection, with the garbage collector on as users have it)."""
    gc.collect()
    started = time.perf_counter()
    result = action()
    return time.perf_counter() - started, result


def best_of(rounds: int, action: Callable[[], Any], prepare: Callable[[], Any] | None = None) -> tuple[float, Any]:
    """Fastest of ``rounds`` timed calls, each after ``prepare``."""
    best, result = float("inf"), None
    for _ in range(rounds):
        if prepare is not None:
            prepare()
        seconds, result = timed(action)
        best = min(best, seconds)
    return best, result
