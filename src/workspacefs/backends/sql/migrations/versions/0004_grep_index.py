"""A trigram index of small content, so ``grep`` reads only the files that can match.

Every new blob below one chunk gets a row in ``wsfs_grep_queue`` (a trigger, so no write path can
forget it); ``grep`` indexes the queue in batches before it searches, giving each blob a key (the text
index's row id) in ``wsfs_grep_keys``. A write pays one queue row, not the index (measured, a trigram
index kept up to date on every write multiplies a small write's cost by 20 to 30 on SQLite and by 1.7 on
PostgreSQL). The text index is SQLite's FTS5 ``trigram`` tokenizer or
PostgreSQL's ``pg_trgm`` (a GIN index; without the extension the table is searched without it).
Files of a chunk or more are always searched: a literal may straddle two chunks.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

# Blobs the index covers: ``size >= 3 AND size < 262144``. Content shorter than three characters holds no
# trigram, and content of a whole chunk (262,144 bytes, ``CHUNK_SIZE``) or more is always searched.


def upgrade() -> None:
    """Create the queue, the keys, the text index and the trigger, queue existing content, and index large
    files by session and path (they are always grep candidates)."""
    op.create_table(
        "wsfs_grep_queue",
        sa.Column("blob_id", sa.Text, sa.ForeignKey("wsfs_blobs.id", ondelete="CASCADE"), primary_key=True),
        sqlite_with_rowid=False,  # one b-tree insert per new blob: the whole cost a write pays
    )
    op.create_table(
        "wsfs_grep_keys",
        sa.Column("id", sa.BigInteger().with_variant(sa.Integer, "sqlite"), primary_key=True, autoincrement=True),
        sa.Column("blob_id", sa.Text, sa.ForeignKey("wsfs_blobs.id", ondelete="CASCADE"), nullable=False, unique=True),
        sqlite_autoincrement=True,  # ids are never reused: the contentless FTS index may hold stale rows
    )
    op.create_index(
        "wsfs_files_large",
        "wsfs_files",
        ["session_id", "path"],
        sqlite_where=sa.text("size_bytes >= 262144"),
        postgresql_where=sa.text("size_bytes >= 262144"),
    )
    if _postgres():
        _upgrade_postgres()
    else:
        op.execute(
            "CREATE VIRTUAL TABLE wsfs_grep_text USING fts5("
            "body, content='', detail=none, tokenize='trigram case_sensitive 1')"
        )
        op.execute(
            "CREATE TRIGGER wsfs_blobs_grep AFTER INSERT ON wsfs_blobs WHEN NEW.size >= 3 AND NEW.size < 262144"
            " BEGIN INSERT INTO wsfs_grep_queue (blob_id) VALUES (NEW.id); END"
        )
    op.execute("INSERT INTO wsfs_grep_queue (blob_id) SELECT id FROM wsfs_blobs WHERE size >= 3 AND size < 262144")


def _upgrade_postgres() -> None:
    connection = op.get_bind()
    try:
        with connection.begin_nested():
            connection.exec_driver_sql("CREATE EXTENSION IF NOT EXISTS pg_trgm")
        trigrams = True
    except sa.exc.DBAPIError:  # not installed, or not allowed: the table is then searched without an index
        trigrams = False
    op.execute(
        "CREATE TABLE wsfs_grep_text ("
        "key_id BIGINT PRIMARY KEY REFERENCES wsfs_grep_keys (id) ON DELETE CASCADE, body TEXT NOT NULL)"
    )
    if trigrams:
        op.execute("CREATE INDEX wsfs_grep_text_trigrams ON wsfs_grep_text USING gin (body gin_trgm_ops)")
    op.execute(
        "CREATE FUNCTION wsfs_grep_enqueue() RETURNS trigger LANGUAGE plpgsql AS "
        "$$ BEGIN INSERT INTO wsfs_grep_queue (blob_id) VALUES (NEW.id); RETURN NULL; END $$"
    )
    op.execute(
        "CREATE TRIGGER wsfs_blobs_grep AFTER INSERT ON wsfs_blobs FOR EACH ROW"
        " WHEN (NEW.size >= 3 AND NEW.size < 262144) EXECUTE FUNCTION wsfs_grep_enqueue()"
    )


def downgrade() -> None:
    """Drop the index, its trigger and its tables."""
    op.execute("DROP TRIGGER IF EXISTS wsfs_blobs_grep" + (" ON wsfs_blobs" if _postgres() else ""))
    op.execute("DROP TABLE IF EXISTS wsfs_grep_text")
    if _postgres():
        op.execute("DROP FUNCTION IF EXISTS wsfs_grep_enqueue()")
    op.drop_index("wsfs_files_large", table_name="wsfs_files")
    op.drop_table("wsfs_grep_keys")
    op.drop_table("wsfs_grep_queue")


def _postgres() -> bool:
    return op.get_bind().dialect.name == "postgresql"
