"""The lock order of a restore (and of a session's delete) on PostgreSQL: the file rows first, like every writer,
then the usage row (or the session's row).

A writer locks its file row (a new file: its parent directory, ``FOR KEY SHARE``), changes it, and only then, in
its statement's trigger (migration ``0009``), updates the session's usage row. A restore changes many rows in
several statements, and its first statement's trigger takes the usage row: had it then waited for a file row a
writer held, while that writer waited for the usage row, PostgreSQL broke the deadlock by failing one of them.
So a restore locks, in one statement and in path order, every row it may change and the directories it may add
to before it changes anything; a writer that holds one commits first, one that comes later waits for the
restore. The content a restore releases is collected after its commit, as a small write's is: a writer storing
the same content locks that blob row before it waits for the usage row.

Deleting a session is the same story with the session's row: its delete cascades to the file rows, and a writer
holding one waited to check its foreign key against the session's row the delete held. The delete locks the
session's file rows first. Then comes the session's row, then the session's advisory lock (a snapshot's, and a
first usage count's, exclusive; the triggers' shared): a snapshot takes the session's row (``FOR KEY SHARE``,
:meth:`SqlStore.hold_session`) before its advisory lock, for it had waited for the row a delete was deleting
while holding the advisory lock the delete's cascade waited for.

A move of a directory and a recursive delete are the same story again (:func:`lock_tree`): a move inserts the
copies row by row, each statement's trigger taking the usage row, and only then deletes the old rows, waiting
for any a writer held while that writer waited for the usage row (3 writers beside a thread moving their tree
back and forth: 94 deadlocks in 60 moves, each failing a move or a writer); a recursive delete's cascade reaches
a subdirectory's rows after an earlier statement of it took the usage row. Both lock every row they will delete
first, in path order. A move (or a copy over a directory) also adds rows to the target's parent, which it holds
``FOR SHARE`` (writers' ``FOR KEY SHARE`` still pass): taken after the target's rows, it waited for a tree
operation on an ancestor that held the parent and waited for those rows (a copy over ``p/u`` beside a thread moving
``p`` back and forth: up to 17 deadlocks in 90 copies; a move over it, up to 10 in 180), so it is taken at its place
in the path order (``bench/bench_sql_tree_races.py --kinds nestedcopy,nestedmove``: none).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from workspacefs.paths import ROOT, parent

__all__ = ["lock_paths", "lock_session", "lock_tree"]

_LOCK_PATHS = sa.text(
    "SELECT f.* FROM unnest(CAST(:paths AS text[])) AS p(path) CROSS JOIN LATERAL"
    " (SELECT * FROM wsfs_files w WHERE w.session_id = :session AND w.path = p.path FOR UPDATE) AS f"
)
"""One key lookup per path, locked in the order given (a nested loop over the array)."""
_LOCK_TREE = sa.text(
    "SELECT count(*) FROM (SELECT 1 FROM wsfs_files WHERE session_id = :session"
    " AND (path = :base OR (path > :low AND path < :high) OR path = ANY(CAST(:also AS text[])))"
    " ORDER BY path FOR UPDATE) AS locked"
)
"""The rows locked as the sort hands them over: in path order."""
_LOCK_TWO_TREES = sa.text(
    "SELECT count(*) FROM (SELECT 1 FROM wsfs_files WHERE session_id = :session"
    " AND (path = :base OR (path > :low AND path < :high) OR path = :other OR (path > :olow AND path < :ohigh)"
    " OR path = ANY(CAST(:also AS text[])))"
    " AND (CAST(:after AS text) IS NULL OR path > :after) AND (CAST(:before AS text) IS NULL OR path < :before)"
    " ORDER BY path FOR UPDATE) AS locked"
)
"""Two trees' rows (a move over a directory: the source's and the target's; or one tree twice), one path order
for both, between ``after`` and ``before`` (``NULL``: unbounded)."""
_LOCK_SHARED = sa.text(
    "SELECT count(*) FROM (SELECT 1 FROM wsfs_files WHERE session_id = :session AND path = :path FOR SHARE) AS locked"
)
"""The row a move or a copy over a tree adds to (the target's parent), held as every such change holds it."""
_LOCK_SESSION = sa.text(
    "SELECT count(*) FROM (SELECT 1 FROM wsfs_files WHERE session_id = :session ORDER BY path FOR UPDATE) AS locked"
)


def lock_paths(connection: Connection, session: str, paths: Iterable[str]) -> Sequence[Any]:
    """Lock the rows at ``paths`` and at their parents, in path order; the rows at ``paths`` that exist."""
    wanted = set(paths)
    every = sorted(wanted | {parent(p) for p in wanted if p != ROOT})
    rows = connection.execute(_LOCK_PATHS, {"paths": every, "session": session}).all()
    return [row for row in rows if row.path in wanted]


def lock_session(connection: Connection, session: str) -> None:
    """Lock every row of the session, in path order (a restore compared as a whole may change any)."""
    connection.execute(_LOCK_SESSION, {"session": session})


def lock_tree(
    connection: Connection,
    session: str,
    base: str,
    also: Iterable[str] = (),
    *,
    trees: Sequence[str] = (),
    shared: str | None = None,
) -> None:
    """Lock the row at ``base``, every row below it, the rows at ``also`` (a move's target) and, for one path
    in ``trees``, its row and every row below it (a target tree a move replaces), in path order; ``shared`` (the
    parent a move or a copy over a tree adds to, in neither tree) ``FOR SHARE``, at its place in that order."""
    low, high = _below(base)
    params = {"session": session, "base": base, "low": low, "high": high, "also": list(also)}
    if not trees and shared is None:
        connection.execute(_LOCK_TREE, params)
        return
    (other,) = trees or (base,)
    olow, ohigh = _below(other)
    params |= {"other": other, "olow": olow, "ohigh": ohigh}
    if shared is None:
        connection.execute(_LOCK_TWO_TREES, {**params, "after": None, "before": None})
        return
    connection.execute(_LOCK_TWO_TREES, {**params, "after": None, "before": shared})
    connection.execute(_LOCK_SHARED, {"session": session, "path": shared})
    connection.execute(_LOCK_TWO_TREES, {**params, "after": shared, "before": None})


def _below(base: str) -> tuple[str, str]:
    """The open range of paths strictly below ``base``."""
    return (ROOT, "\U0010ffff") if base == ROOT else (base + "/", base + "0")  # '0' follows '/'
