"""SQLite journal retention: every 256th journaled commit drops the entries older than the newest
``history_entries`` rows, found from the newest number (a session's rows are numbered one after another), not by
walking the newest rows with ``OFFSET``: that walk read 10,000 index entries per pass at the default retention
(about 10 µs per write, amortized)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy as sa

from workspacefs import SqlFilesystem, SqlStore


def test_retention_keeps_exactly_the_newest_rows_without_walking_them(tmp_path: Path) -> None:
    store = SqlStore(f"sqlite:///{tmp_path / 'retention.db'}", history_entries=100)
    fs = SqlFilesystem(store, "s")
    statements: list[str] = []

    def seen(_connection: Any, _cursor: Any, statement: str, *_: Any) -> None:
        statements.append(statement)

    sa.event.listen(store.engine, "before_cursor_execute", seen)  # retention's own statements go through it
    for i in range(700):  # one journal row per write; passes after the 256th and the 512th commit
        fs.write_bytes(f"f{i}.txt", b"%d" % i)
    sa.event.remove(store.engine, "before_cursor_execute", seen)
    ids = [entry.entry_id for entry in fs.history(limit=None)]
    assert len(ids) == 100 + (700 - 512)  # the newest 100 at the 512th commit, and every write since
    assert min(ids) == 512 - 100 + 1 and max(ids) == 700
    assert any("DELETE FROM wsfs_journal" in s for s in statements)  # the passes ran here
    assert not [s for s in statements if "OFFSET" in s.upper()]  # the old code walked the newest 100 with OFFSET
    store.close()
