"""The client's own work per SQLite small write (counts, not times: the speed itself is in bench/).

SQLite runs a small write's statements in a few microseconds each, so the Python around them counts: a new
``sqlite3`` cursor per statement (``Connection.execute``) cost 0.75 µs, an ``isoformat`` of the write's time 1.3 µs.
The statements whose rows nobody reads run on the connection's own cursor, and the time's text is made once a
second. Counted with a profile hook: the C calls of ``sqlite3.Connection.execute``/``cursor`` and
``datetime.isoformat`` one write makes.
"""

from __future__ import annotations

import sqlite3
import sys
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

import pytest

from workspacefs import SqlFilesystem, SqlStore
from workspacefs.backends.sql import _driver


def c_calls(operation: Callable[[], Any]) -> Counter[str]:
    """The C calls ``operation`` makes that make a SQLite cursor or format a datetime, by name."""
    seen: Counter[str] = Counter()

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        if event != "c_call":
            return
        owner = getattr(arg, "__self__", None)
        name = getattr(arg, "__name__", "")
        if isinstance(owner, sqlite3.Connection) and name in {"execute", "cursor"}:
            seen[f"Connection.{name}"] += 1
        elif isinstance(owner, datetime) and name == "isoformat":
            seen["datetime.isoformat"] += 1

    sys.setprofile(hook)
    try:
        operation()
    finally:
        sys.setprofile(None)
    return seen


@pytest.mark.parametrize("history", ["on", "off"])
def test_a_small_write_makes_no_cursor_and_formats_no_time(fast_tmp: Path, history: str) -> None:
    """No new cursor per write (BEGIN, the blob, the rows read, the file row, the journal row, the collection and
    COMMIT run on the connection's own), no ``isoformat``. The old code made six or seven cursors and one isoformat."""
    store = SqlStore(f"sqlite:///{fast_tmp}/w.db", history=history == "on")
    try:
        fs = SqlFilesystem(store, "s")
        fs.write_bytes("dir/a.txt", b"first")  # the connection's own cursor is made here, once
        new = c_calls(lambda: fs.write_bytes("dir/b.txt", b"a new file"))
        overwrite = c_calls(lambda: fs.write_bytes("dir/a.txt", b"replaced content"))  # collects "first" when off
        assert new == Counter()
        assert overwrite == Counter()
        assert fs.read_bytes("dir/a.txt").content == b"replaced content"
        assert fs.read_bytes("dir/b.txt").content == b"a new file"
    finally:
        store.close()


def test_the_sqlite_time_text_is_isoformat() -> None:
    """The text made once a second plus the microseconds is what ``isoformat(" ", "microseconds")`` writes."""
    before = datetime.now(UTC).replace(tzinfo=None)
    stamp = _driver._sqlite_now()
    after = datetime.now(UTC).replace(tzinfo=None)
    parsed = datetime.fromisoformat(stamp)
    assert before <= parsed <= after
    assert stamp == parsed.isoformat(" ", "microseconds")
