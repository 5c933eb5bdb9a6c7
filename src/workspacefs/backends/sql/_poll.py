"""Poll for a quick PostgreSQL answer before sleeping on the socket (the hot statements of :class:`Driver`).

On an idle machine a blocked client pays a wake-up per round trip: the kernel has to schedule the sleeping
thread back in once the answer arrives, and that took 60 to 70 µs of a 90 µs ``SELECT 1`` here. A client that
polls the socket for the few tens of µs the server needs answers in ~26 µs, for no more CPU than the
sleep-and-wake costs. So a statement whose recent round trips were short polls for about twice as long before
blocking. A statement slower than :data:`POLL_NS` (a write, a remote server, a busy machine) never polls: its
wait would burn a core that the server may need. Nor does one that other threads of the process are running
beside: polling threads would take the cores from one another. And a statement whose poll ran out before its
answer came sleeps for its next :data:`QUIET` calls: one whose answers are mostly quick and now and then slow (a
read that waits for the disk) kept an average under the limit and burnt a full poll on each slow one.
"""

from __future__ import annotations

import os
import time
from typing import Any

__all__ = ["POLL_NS", "QUIET", "Turnaround", "poll"]

POLL_NS = 150_000
"""The longest a statement's usual round trip may be for it to poll (ns): reads and stats on a local server, not
a small write (~250 µs, of which ~200 µs are the server's)."""

QUIET = 32
"""How many calls a statement sleeps on the socket after a poll that ran out (its answers measured all the same)."""

_clock = time.perf_counter_ns
_yield = os.sched_yield


class Turnaround:
    """A statement's recent round trips (a moving average, ns) and how long its next call may poll for."""

    __slots__ = ("average", "quiet")

    def __init__(self) -> None:
        self.average = POLL_NS
        """Starts at the limit: the first call sleeps and measures."""
        self.quiet = 0
        """How many more calls sleep without polling, after a poll that ran out (:data:`QUIET`)."""

    def budget(self, running: int) -> int:
        """How long to poll (ns; 0: do not) with ``running`` hot statements of the process in flight, this one
        included."""
        average = self.average
        if running > 1 or average >= POLL_NS or self.quiet > 0:
            return 0
        return min(2 * average, POLL_NS)

    def observe(self, took: int, *, ran_out: bool = False) -> None:
        """Fold one round trip of ``took`` ns into the average (one eighth of the way: one slow answer does not
        stop the polling, a run of them does); ``ran_out``: its poll ended before the answer came."""
        self.average += (took - self.average) // 8
        quiet = self.quiet  # read once: threads that race here write the same value, never below 0
        if ran_out:
            self.quiet = QUIET
        elif quiet > 0:
            self.quiet = quiet - 1


def poll(pgconn: Any, deadline: int) -> bool:
    """Read what has arrived on ``pgconn`` until its answer is complete or the clock passes ``deadline`` (ns,
    :func:`time.perf_counter_ns`); whether the answer came. Yields the processor between looks, and the GIL with it,
    so the process's other threads still run. The caller then waits as usual: for nothing, if the answer came."""
    if pgconn.flush() != 0:  # not all sent yet: psycopg's wait sends the rest
        return False
    while True:
        pgconn.consume_input()
        if not pgconn.is_busy():
            return True
        if _clock() > deadline:
            return False
        _yield()
