"""The trigram index that lets ``grep`` skip small files that cannot match (migration ``0004``).

Every blob below one chunk has a key row (a trigger adds it as the blob is stored). ``grep`` first
indexes the keys still pending, in batches, then asks the index which keys hold every trigram of the
pattern's required literal. Candidates are those files, the files whose key is still pending (another
process may be indexing them), and every file of a chunk or more (a literal may straddle two chunks).
The index only narrows the search: the regex still runs on every candidate, so a false positive costs a
read and nothing else, and only a missed match would be a bug. The indexed text is the content decoded
as UTF-8 with replacement, which keeps every valid UTF-8 literal the bytes contain.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from workspacefs.paths import ROOT
from workspacefs.search import is_binary

__all__ = ["BATCH", "candidate_query", "candidates", "index_pending", "indexed_text", "rebuild_if_stale", "usable"]

_MIN_LITERAL = 3
"""A literal shorter than a trigram cannot use the index."""
BATCH = 500
"""Keys indexed per transaction (the ``LIMIT`` below): a writer waits at most one batch (about 50 ms on
SQLite)."""
_MAX_TRIGRAMS = 64

_PENDING_BATCH = (
    "SELECT k.id, coalesce(b.data, c.data) FROM wsfs_grep_keys k JOIN wsfs_blobs b ON b.id = k.blob_id"
    " LEFT JOIN wsfs_blob_chunks bc ON bc.blob_id = b.id AND bc.seq = 0"
    " LEFT JOIN wsfs_chunks c ON c.hash = bc.chunk_hash WHERE NOT k.indexed ORDER BY k.id LIMIT 500"
)
_PENDING = {
    "sqlite": _PENDING_BATCH,
    # SKIP LOCKED: two processes catching up at once take different batches
    "postgresql": _PENDING_BATCH + " FOR UPDATE OF k SKIP LOCKED",
}
_MARK_INDEXED = {
    "sqlite": "UPDATE wsfs_grep_keys SET indexed = TRUE WHERE id = ?",
    "postgresql": "UPDATE wsfs_grep_keys SET indexed = TRUE WHERE id = %s",
}
_ADD_TEXT = {
    "sqlite": "INSERT INTO wsfs_grep_text (rowid, body) VALUES (?, ?)",
    "postgresql": "INSERT INTO wsfs_grep_text (key_id, body) VALUES (%s, %s) ON CONFLICT (key_id) DO NOTHING",
}
_MATCHED = {
    "sqlite": "SELECT rowid AS key_id FROM wsfs_grep_text WHERE wsfs_grep_text MATCH :query",
    "postgresql": "SELECT key_id FROM wsfs_grep_text WHERE body LIKE :query",
}
_CANDIDATES = (
    "WITH m AS MATERIALIZED (MATCHED_),"
    " p AS MATERIALIZED (SELECT blob_id FROM wsfs_grep_keys WHERE NOT indexed)"
    " SELECT f.path FROM m JOIN_ wsfs_grep_keys k ON k.id = m.key_id"
    " JOIN_ wsfs_files f ON f.blob_id = k.blob_id WHERE SESSION_ = :session AND WITHIN_"
    " UNION ALL"
    " SELECT f.path FROM p JOIN_ wsfs_files f ON f.blob_id = p.blob_id WHERE SESSION_ = :session AND WITHIN_"
    " UNION ALL"
    " SELECT f.path FROM wsfs_files f WHERE f.session_id = :session AND f.size_bytes >= 262144"
    " AND NOT f.is_directory AND WITHIN_"
)
"""Files whose key matched, files whose key is pending, and files of a chunk (262,144 bytes) or more.

The few matched and pending keys come first and lead to their files by blob, never the other way round
(a ``MATCH`` or ``LIKE`` per file of the session): the keys are materialized, SQLite takes ``CROSS
JOIN`` as a fixed join order, and a unary ``+`` keeps it from the session's index (which holds every
file). The upper-case words are filled per dialect and scope."""
_WITHIN = {True: "f.path <> ''", False: "f.path > :low AND f.path < :high"}


def indexed_text(data: bytes | None) -> str | None:
    """What the index holds for content: its text, or ``None`` for binary content (grep skips it)."""
    if data is None or is_binary(data):
        return None
    # PostgreSQL text holds no NUL; a literal with NUL or U+FFFD never uses the index (see ``usable``)
    return data.decode("utf-8", "replace").replace("\x00", "\ufffd")


def index_pending(connection: Connection, dialect: str) -> int:
    """Index one batch of pending keys in the caller's write transaction; returns how many it took."""
    rows = connection.exec_driver_sql(_PENDING[dialect]).all()
    texts = [(key, text) for key, data in rows if (text := indexed_text(_bytes(data))) is not None]
    if texts:
        connection.exec_driver_sql(_ADD_TEXT[dialect], texts)
    if rows:
        connection.exec_driver_sql(_MARK_INDEXED[dialect], [(key,) for key, _ in rows])
    return len(rows)


def _bytes(data: Any) -> bytes | None:
    return None if data is None else bytes(data)


def candidate_query(dialect: str, session: str, base: str, literal: str) -> tuple[str, dict[str, Any]]:
    """The statement and parameters that list the files under ``base`` that may contain ``literal``."""
    params: dict[str, Any] = {"session": session, "query": _query(dialect, literal)}
    if base != ROOT:
        params |= {"low": base + "/", "high": base + "0"}  # '0' is the character after '/'
    sqlite = dialect == "sqlite"
    sql = (
        _CANDIDATES.replace("MATCHED_", _MATCHED[dialect])
        .replace("JOIN_", "CROSS JOIN" if sqlite else "JOIN")
        .replace("SESSION_", "+f.session_id" if sqlite else "f.session_id")
        .replace("WITHIN_", _WITHIN[base == ROOT])
    )
    return sql, params


def candidates(connection: Connection, dialect: str, session: str, base: str, literal: str) -> list[str]:
    """Files under ``base`` that may contain ``literal`` (check :func:`usable` first)."""
    sql, params = candidate_query(dialect, session, base, literal)
    return [row[0] for row in connection.execute(sa.text(sql), params)]


def usable(literal: str) -> bool:
    """Whether the index can answer for ``literal`` (long enough, and nothing the indexed text replaces)."""
    return len(literal) >= _MIN_LITERAL and "\x00" not in literal and "\ufffd" not in literal


def _query(dialect: str, literal: str) -> str:
    """The index's question: every trigram of ``literal`` (SQLite FTS5) or a ``LIKE`` (``pg_trgm``)."""
    if dialect == "postgresql":
        escaped = literal.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        return f"%{escaped}%"
    trigrams = list(dict.fromkeys(literal[i : i + 3] for i in range(len(literal) - 2)))
    if len(trigrams) > _MAX_TRIGRAMS:  # evenly spread: fewer terms still only narrow to a superset
        step = len(trigrams) / _MAX_TRIGRAMS
        trigrams = [trigrams[int(i * step)] for i in range(_MAX_TRIGRAMS)]
    return " AND ".join('"' + gram.replace('"', '""') + '"' for gram in trigrams)


def rebuild_if_stale(connection: Connection, dialect: str) -> bool:
    """On SQLite, start the index afresh when collected content left it mostly stale rows (FTS5 without
    content cannot delete a row it no longer has the text of); PostgreSQL deletes with the key."""
    if dialect != "sqlite":
        return False
    rows = connection.exec_driver_sql("SELECT count(*) FROM wsfs_grep_text_docsize").scalar_one()
    live = connection.exec_driver_sql("SELECT count(*) FROM wsfs_grep_keys WHERE indexed").scalar_one()
    if rows <= 2 * live + 1000:
        return False
    connection.exec_driver_sql("INSERT INTO wsfs_grep_text (wsfs_grep_text) VALUES ('delete-all')")
    connection.exec_driver_sql("UPDATE wsfs_grep_keys SET indexed = FALSE")
    return True
