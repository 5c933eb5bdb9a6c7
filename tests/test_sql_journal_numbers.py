"""Entry ids are a session's: never given twice within a session id, growing in commit order (migration 0013).

Every reader names entries of one session (``history(since=)``, ``undo(entry_id)``, SSE ``Last-Event-ID``). SQLite
numbers each session's rows one after another (the journal is keyed by ``(session_id, seq)``), so two sessions
share numbers there and another session's writes take none of a session's; PostgreSQL numbers all sessions' rows
with one sequence. Either way a number is not given again in its session after retention or a prune dropped the
newest entries, nor after the session was deleted and made again.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from workspacefs import SqlFilesystem, SqlStore
from workspacefs.testing._postgres import create_database

_ids = itertools.count()


@pytest.fixture(params=["sqlite", "postgresql"])
def store(request: pytest.FixtureRequest, fast_tmp: Path) -> Iterator[SqlStore]:
    """A store of its own (closed after)."""
    if request.param == "sqlite":
        url = f"sqlite:///{fast_tmp / f'numbers-{next(_ids)}.db'}"
    else:
        url = create_database(request.getfixturevalue("postgres_url"), f"wsfs_numbers_{os.getpid()}_{next(_ids)}")
    made = SqlStore(url)
    yield made
    made.close()


def ids(fs: SqlFilesystem) -> list[int]:
    """The session's entry ids, oldest first."""
    return [entry.entry_id for entry in reversed(fs.history(limit=None))]


def test_a_sessions_entry_ids_grow_and_are_never_given_twice(store: SqlStore) -> None:
    a, b = SqlFilesystem(store, "a"), SqlFilesystem(store, "b")
    given: dict[str, set[int]] = {"a": set(), "b": set()}
    for i in range(4):  # interleaved: each session's ids grow in the order of its commits
        a.write_bytes("f.txt", b"a%d" % i)
        b.write_bytes("f.txt", b"b%d" % i)
    for fs in (a, b):
        assert ids(fs) == sorted(ids(fs)) and len(set(ids(fs))) == 4
        given[fs.session_id].update(ids(fs))
    if store.dialect == "sqlite":  # numbered in the session: b's writes took none of a's numbers
        assert ids(a) == ids(b) == [ids(a)[0] + n for n in range(4)]
    else:  # one sequence for all sessions
        assert not set(ids(a)) & set(ids(b))

    assert a._history.retain(3) == 1  # retention drops a's oldest only
    assert a._history.retain(3) == 0
    assert ids(a) == sorted(given["a"])[1:] and ids(b) == sorted(given["b"])
    newest = ids(a)[-1]
    assert a.prune_history(keep=0) == 3 and ids(a) == []  # a's newest went ...
    assert ids(b) == sorted(given["b"])  # ... and only a's, though b's may be the same numbers
    a.write_bytes("after-prune.txt", b"a")
    assert ids(a)[0] > newest  # ... and its number is not given again
    given["a"].update(ids(a))

    b.undo(ids(b)[-1])  # an undo names the entry of its session it undid
    assert b.history(limit=1)[0].undoes == max(given["b"])
    assert b.read_bytes("f.txt").content == b"b2"
    given["b"].update(ids(b))

    newest = ids(a)[-1]
    assert store.delete_session("a")
    again = SqlFilesystem(store, "a")  # the same id, made again
    again.write_bytes("again.txt", b"again")
    assert ids(again)[0] > newest
    assert not set(ids(again)) & given["a"]
    assert ids(b) == sorted(given["b"]) and b.read_bytes("f.txt").content == b"b2"  # b untouched by a's delete
