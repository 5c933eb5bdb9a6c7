"""Statements of one small write on SQLite (counts, not times: the speed itself is in bench/).

The count comes from SQLite itself: the trace callback of the connection the driver hands out, which reports every
statement run (again for each trigger the statement fires: repeats in a row are one statement).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from workspacefs import SqlFilesystem, SqlStore


def statements(store: SqlStore, operation: Callable[[], Any]) -> list[str]:
    """The statements ``operation`` runs on the driver's connection (the pool hands back the one just returned)."""
    driver = store.driver
    held = driver._checkout()
    seen: list[str] = []
    held[0].set_trace_callback(seen.append)
    driver._checkin(held)
    try:
        operation()
    finally:
        held[0].set_trace_callback(None)
    assert driver._checkout() is held  # the operation used (and returned) the traced connection
    driver._checkin(held)
    ran = [s for i, s in enumerate(seen) if i == 0 or s != seen[i - 1]]
    return [" ".join(s.split()[:2]).upper() for s in ran]


def test_a_journaled_overwrite_collects_nothing(fast_tmp: Path) -> None:
    """The journal row keeps the replaced content, so a collection could only find it referenced: none is run.
    Without a journal the replaced content is collected in the write's transaction, as before."""
    for history, collected in (("on", []), ("off", ["DELETE FROM"])):
        store = SqlStore(f"sqlite:///{fast_tmp / f'history-{history}.db'}?history={history}")
        try:
            fs = SqlFilesystem(store, "small")
            fs.write_bytes("a.txt", b"first")
            blobs = store.content_stats()["blobs"]
            ran = statements(store, lambda fs=fs: fs.write_bytes("a.txt", b"second"))
            journal = ["INSERT INTO"] if history == "on" else []
            # BEGIN, the content, the parent's and the file's rows, the file row, its journal row, COMMIT
            assert ran == [
                "BEGIN IMMEDIATE",
                "INSERT INTO",
                "SELECT PATH,",
                "UPDATE WSFS_FILES",
                *journal,
                *collected,
                "COMMIT",
            ]
            assert store.content_stats()["blobs"] == blobs + (1 if history == "on" else 0)  # kept for undo, or gone
            assert fs.read_bytes("a.txt").content == b"second"
        finally:
            store.close()
