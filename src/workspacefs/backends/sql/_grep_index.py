"""The trigram index that lets ``grep`` skip small files that cannot match (migration ``0004``).

Every new blob below one chunk is queued (a trigger adds it as the blob is stored). ``grep`` first
indexes the queue, in batches, giving each text blob a key (the text index's row id), then asks the index
which keys hold every trigram of the pattern's required literal. Candidates are those files, the files
whose content is still queued (another process may be indexing it), and every file of a chunk or more
(a literal may straddle two chunks).
The index only narrows the search: the regex still runs on every candidate, so a false positive costs a
read and nothing else, and only a missed match would be a bug. The indexed text is the content decoded
as UTF-8 with replacement, which keeps every valid UTF-8 literal the bytes contain.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from workspacefs.paths import ROOT
from workspacefs.search import is_binary

__all__ = [
    "BATCH",
    "anything_queued",
    "candidate_query",
    "candidates",
    "index_pending",
    "indexed_text",
    "rebuild_if_stale",
    "usable",
]

_MIN_LITERAL = 3
"""A literal shorter than a trigram cannot use the index."""
BATCH = 500
"""Keys indexed per transaction (the ``LIMIT`` below): a writer waits at most one batch (about 50 ms on
SQLite)."""
_MAX_TRIGRAMS = 64

_QUEUED_BATCH = (
    "SELECT q.blob_id, coalesce(b.data, c.data), c.hash, c.stored, c.size"
    " FROM wsfs_grep_queue q JOIN wsfs_blobs b ON b.id = q.blob_id"
    " LEFT JOIN wsfs_blob_chunks bc ON bc.blob_id = b.id AND bc.seq = 0"
    " LEFT JOIN wsfs_chunks c ON c.hash = bc.chunk_hash ORDER BY q.blob_id LIMIT 500"
)
_QUEUED = {
    "sqlite": _QUEUED_BATCH,
    # two processes catching up at once take different batches; a blob being collected is left to its
    # collector (which then waits for nothing of ours: the key share lock only keeps it from going mid-batch)
    "postgresql": _QUEUED_BATCH + " FOR UPDATE OF q SKIP LOCKED FOR KEY SHARE OF b SKIP LOCKED",
}
_ADD_KEY = {
    "sqlite": "INSERT INTO wsfs_grep_keys (blob_id) VALUES (?)",
    "postgresql": "INSERT INTO wsfs_grep_keys (blob_id) VALUES (%s)",
}
_KEYS_OF = {
    "sqlite": "SELECT id, blob_id FROM wsfs_grep_keys WHERE blob_id IN (SELECT value FROM json_each(?))",
    "postgresql": "SELECT id, blob_id FROM wsfs_grep_keys WHERE blob_id = ANY(%s)",
}
_DEQUEUE = {
    "sqlite": "DELETE FROM wsfs_grep_queue WHERE blob_id = ?",
    "postgresql": "DELETE FROM wsfs_grep_queue WHERE blob_id = %s",
}
_ADD_TEXT = {
    "sqlite": "INSERT INTO wsfs_grep_text (rowid, body) VALUES (?, ?)",
    "postgresql": "INSERT INTO wsfs_grep_text (key_id, body) VALUES (%s, %s)",
}
_MATCHED = {
    "sqlite": "SELECT rowid AS key_id FROM wsfs_grep_text WHERE wsfs_grep_text MATCH :query",
    "postgresql": "SELECT key_id FROM wsfs_grep_text WHERE body LIKE :query",
}
_CANDIDATES = (
    "WITH m AS MATERIALIZED (MATCHED_), p AS MATERIALIZED (SELECT blob_id FROM wsfs_grep_queue)"
    " SELECT f.path FROM m JOIN_ wsfs_grep_keys k ON k.id = m.key_id"
    " JOIN_ wsfs_files f ON f.blob_id = k.blob_id WHERE SESSION_ = :session AND WITHIN_"
    " UNION ALL"
    " SELECT f.path FROM p JOIN_ wsfs_files f ON f.blob_id = p.blob_id WHERE SESSION_ = :session AND WITHIN_"
    " UNION ALL"
    " SELECT f.path FROM wsfs_files f WHERE f.session_id = :session AND f.size_bytes >= 262144"
    " AND NOT f.is_directory AND WITHIN_"
)
"""Files whose key matched, files whose content is still queued, and files of a chunk (262,144 bytes) or more.

The few matched keys and queued blobs come first and lead to their files by blob, never the other way round
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


def anything_queued(connection: Connection) -> bool:
    """Whether any content waits for the index (a read, so a grep with nothing to index takes no write lock)."""
    return connection.exec_driver_sql("SELECT 1 FROM wsfs_grep_queue LIMIT 1").first() is not None


def index_pending(
    connection: Connection, dialect: str, fetch: Callable[[str, Any, str | None, int], bytes] | None = None
) -> int:
    """Index one batch of queued content in the caller's write transaction; returns how many it took.

    Text content gets a key and an index row; binary content (which grep skips) only leaves the queue.
    ``fetch(hash, data, stored, size)`` gives a chunk's bytes when its row does not hold them (a chunk in the
    store's content store): without it such content would be indexed as nothing, and grep would miss it.
    Content that cannot be fetched here stays queued (queued content is always a grep candidate), and ends
    this catch-up, so unreadable content is not asked for again and again."""
    rows = []
    found = connection.exec_driver_sql(_QUEUED[dialect]).all()
    for blob_id, held, digest, stored, size in found:
        data = held
        if digest is not None and not held:  # the blob's one chunk, kept in a content store
            try:
                data = fetch(digest, held, stored, size) if fetch is not None else None
            except OSError:
                data = None
            if data is None:  # not readable here: it stays queued, so grep keeps reading the file itself
                continue
        rows.append((blob_id, indexed_text(_bytes(data))))
    texts = {blob_id: text for blob_id, text in rows if text is not None}
    if texts:
        connection.exec_driver_sql(_ADD_KEY[dialect], [(blob_id,) for blob_id in texts])
        ids = list(texts)
        keys = connection.exec_driver_sql(_KEYS_OF[dialect], (json.dumps(ids) if dialect == "sqlite" else ids,))
        connection.exec_driver_sql(_ADD_TEXT[dialect], [(key, texts[blob_id]) for key, blob_id in keys])
    if rows:
        connection.exec_driver_sql(_DEQUEUE[dialect], [(blob_id,) for blob_id, _ in rows])
    return len(rows) if len(rows) == len(found) else min(len(rows), BATCH - 1)  # a skipped blob ends the catch-up


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
    live = connection.exec_driver_sql("SELECT count(*) FROM wsfs_grep_keys").scalar_one()
    if rows <= 2 * live + 1000:
        return False
    connection.exec_driver_sql("INSERT INTO wsfs_grep_text (wsfs_grep_text) VALUES ('delete-all')")
    connection.exec_driver_sql("INSERT OR IGNORE INTO wsfs_grep_queue (blob_id) SELECT blob_id FROM wsfs_grep_keys")
    connection.exec_driver_sql("DELETE FROM wsfs_grep_keys")
    return True
