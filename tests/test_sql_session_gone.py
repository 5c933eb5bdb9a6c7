"""A change whose session was deleted meanwhile: a foreign key refuses its row, and it reads as every other change
of a deleted session does (``FileNotFoundError``), not as a race it lost ("too many concurrent writers") or as a
file that exists."""

from __future__ import annotations

import threading
import uuid
from collections import Counter
from typing import Any

import pytest

from workspacefs import ConcurrentChangeError, Policy, Quota, SqlFilesystem, SqlStore
from workspacefs.server._approvals import ApprovalStore


@pytest.fixture
def fs(service_url: str) -> SqlFilesystem:
    """A fresh session on SQLite or the real PostgreSQL."""
    return SqlFilesystem(SqlStore(service_url), f"gone-{uuid.uuid4().hex}")


def drop_session_row(fs: SqlFilesystem) -> None:
    """Delete the session's own row without its cascade: the moment a concurrent delete of the session has taken
    the row and not yet its files (the database's foreign keys off for this one statement)."""
    store, session = fs._store, fs._session  # under the filesystem, on purpose
    raw = store.engine.raw_connection()
    try:
        cursor = raw.cursor()
        if store.dialect == "sqlite":
            cursor.execute("PRAGMA foreign_keys=OFF")
            cursor.execute("DELETE FROM wsfs_sessions WHERE id = ?", (session,))
            raw.commit()
            cursor.execute("PRAGMA foreign_keys=ON")
        else:
            cursor.execute("SET session_replication_role = replica")  # no triggers: no cascade
            cursor.execute("DELETE FROM wsfs_sessions WHERE id = %s", (session,))
            cursor.execute("RESET session_replication_role")
            raw.commit()
    finally:
        raw.close()


@pytest.mark.parametrize("mode", ["overwrite", "create"])
def test_a_small_write_into_a_deleted_session_is_not_found(fs: SqlFilesystem, mode: str) -> None:
    fs.mkdir("d")
    drop_session_row(fs)
    with pytest.raises(FileNotFoundError) as raised:
        fs.write("d/new.txt", "x", mode=mode)  # type: ignore[arg-type]
    assert not isinstance(raised.value, ConcurrentChangeError)


def test_a_mkdir_into_a_deleted_session_is_not_found(fs: SqlFilesystem) -> None:
    fs.mkdir("d")
    drop_session_row(fs)
    with pytest.raises(FileNotFoundError):
        fs.mkdir("d/e", exist_ok=False)  # (with exist_ok, the FileExistsError it raised was looked at again)


def _streamed(fs: SqlFilesystem) -> None:
    with fs.open_write("d/streamed.txt") as writer:
        writer.write(b"x")


CHANGES = {
    "large write": lambda fs: fs.write("d/big.txt", "x" * 400_000),
    "append": lambda fs: fs.write("d/old.txt", "x", mode="append"),
    "stream": _streamed,
    "copy": lambda fs: fs.copy("d/old.txt", "d/copy.txt"),
    "tree copy": lambda fs: fs.copy("d", "e"),
    "move": lambda fs: fs.move("d/old.txt", "d/moved.txt"),
    "flag": lambda fs: fs.set_read_only("d/old.txt"),
    "delete": lambda fs: fs.delete("d/old.txt"),
}


@pytest.mark.parametrize("change", sorted(CHANGES))
def test_every_change_of_a_deleted_session_is_not_found(fs: SqlFilesystem, change: str) -> None:
    fs.write("d/old.txt", "old")
    drop_session_row(fs)
    with pytest.raises(FileNotFoundError):
        CHANGES[change](fs)


# --- everything else that writes a row referring to the session (snapshot, usage, restore, merge, fork, open) ---


def _merged(fs: SqlFilesystem) -> None:
    base = fs.snapshot()
    fs.write("d/old.txt", "ours")
    fs._gone_merge = (base, fs.snapshot())  # type: ignore[attr-defined]


SESSION_CHANGES: dict[str, Any] = {
    "snapshot": lambda fs: fs.snapshot(),
    "usage (made now)": lambda fs: SqlFilesystem(fs.store, fs.session_id, create=False, quota=QUOTA).usage(),
    "restore": lambda fs: fs.restore(fs._gone_snapshot),
    "merge": lambda fs: fs.merge(*fs._gone_merge, fs._gone_merge[1]),
    "fork": lambda fs: fs.fork(),
}
QUOTA = Quota(max_bytes=10**9, max_files=10**6)


@pytest.mark.parametrize("change", sorted(SESSION_CHANGES))
def test_session_wide_changes_of_a_session_deleted_half_way_are_not_found(fs: SqlFilesystem, change: str) -> None:
    """The session's row gone, its files not yet (a delete under way): the row each of these writes (a snapshot, the
    usage row, journal rows, a merge result) refers to the session, and its refusal was a raw ``IntegrityError``."""
    fs.write("d/old.txt", "old")
    fs._gone_snapshot = fs.snapshot()  # type: ignore[attr-defined]
    fs.write("d/old.txt", "new")
    _merged(fs)
    drop_session_row(fs)
    with pytest.raises(FileNotFoundError):
        SESSION_CHANGES[change](fs)


@pytest.mark.parametrize("change", ["snapshot", "usage (made now)", "fork"])
def test_session_wide_changes_of_a_deleted_session_are_not_found(fs: SqlFilesystem, change: str) -> None:
    """The whole session deleted by another filesystem object: a snapshot failed on the foreign key, the usage was
    zero, and a fork made an empty session of nothing."""
    fs.write("d/old.txt", "old")
    SqlFilesystem(fs.store, fs.session_id, create=False).delete_session()
    with pytest.raises(FileNotFoundError):
        SESSION_CHANGES[change](fs)
    assert [s for s in fs.store.sessions() if s.session_id.startswith(fs.session_id)] == []  # no fork made


def test_a_session_policy_for_a_deleted_session_is_not_found(fs: SqlFilesystem) -> None:
    """The service's own row referring to the session (its policy): 404 then, not a 500 from the foreign key."""
    approvals = ApprovalStore(fs.store)
    SqlFilesystem(fs.store, fs.session_id, create=False).delete_session()
    with pytest.raises(FileNotFoundError):
        approvals.set_session_policy(fs.session_id, Policy.default())


ROUNDS = 12
USERS = 2
USES = 15


def _use(store: SqlStore, session: str, what: str, start: threading.Barrier, seen: Counter[tuple[str, str]]) -> None:
    start.wait()
    for n in range(USES):
        try:
            if what == "open":
                SqlFilesystem(store, session)
            else:
                fs = SqlFilesystem(store, session, create=False, quota=QUOTA if what == "usage" else None)
                if what == "snapshot":
                    fs.snapshot()
                elif what == "usage":
                    fs.usage()
                else:
                    fs.copy("d", f"copy-{n}")  # both users copy to the same names: one finds it there
            seen[what, "ok"] += 1
        except Exception as exc:
            seen[what, type(exc).__name__] += 1


def test_opening_and_using_a_session_while_another_connection_deletes_it(service_url: str) -> None:
    """Threads open, snapshot, count (a quota's usage row) and copy in a session while another deletes it: each
    either succeeds or finds the session gone (``FileNotFoundError``; two copies to one name: ``FileExistsError``),
    and the delete itself never fails. Before: raw ``IntegrityError`` (opening, snapshots, copies) and, on
    PostgreSQL, deadlocks that failed the delete, a snapshot or a usage count (``ConcurrentChangeError``)."""
    store = SqlStore(service_url)
    seen: Counter[tuple[str, str]] = Counter()
    try:
        for round_ in range(ROUNDS):
            for what in ("open", "snapshot", "usage", "copy"):
                session = f"race-{round_}-{what}-{uuid.uuid4().hex[:8]}"
                fs = SqlFilesystem(store, session)
                fs.write("d/a.txt", "a")
                fs.write("d/b.txt", "b")
                start = threading.Barrier(USERS + 1)
                users = [threading.Thread(target=_use, args=(store, session, what, start, seen)) for _ in range(USERS)]
                for user in users:
                    user.start()
                start.wait()
                try:
                    fs.delete_session()
                except Exception as exc:
                    seen["delete", type(exc).__name__] += 1
                for user in users:
                    user.join()
                fs.delete_session()  # an opener may have made it again
    finally:
        store.close()
    allowed = {"ok", "FileNotFoundError"}
    wrong = {key: count for key, count in seen.items() if key[1] not in allowed}
    assert wrong in ({}, {("copy", "FileExistsError"): wrong.get(("copy", "FileExistsError"))}), wrong
    assert sum(seen.values()) == ROUNDS * 4 * USERS * USES
