"""Review of the read-only flag in SQL history and of the host journal's retention: the traps found."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from workspacefs import HostFilesystem


def test_host_prune_before_drops_an_old_entry_written_after_a_younger_one(tmp_path: Path) -> None:
    """``prune_history(before=...)`` drops every entry older than ``before``, also one whose rows came after a
    younger entry's (another process's group written late, or a clock stepped back): the cut from the oldest
    row up stopped at the first young row and kept it."""
    (tmp_path / "root").mkdir()
    fs = HostFilesystem(tmp_path / "root", snapshot_dir=tmp_path / "snaps", durable=False)
    journal = fs._changes
    assert journal is not None
    for index in range(5):
        fs.write(f"f{index}.txt", "x")
    journal.flush()
    journal._db.execute("UPDATE journal SET at = 0 WHERE seq = (SELECT max(seq) FROM journal)")  # written late
    journal._db.commit()

    dropped = fs.prune_history(before=datetime.now(UTC) - timedelta(hours=1))

    assert dropped == 1
    assert [e.changes[0].path for e in fs.history(limit=None)] == [f"f{i}.txt" for i in reversed(range(4))]
    fs.close()
