"""Formerly the service's token table; the service now owns its tables and migrations (``server/``).

Databases that already ran this revision keep their ``wsfs_tokens`` table, which the service's own first
migration adopts; new databases get it from there. The revision stays so both histories line up.

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Nothing: storage has no service tables."""


def downgrade() -> None:
    """Nothing to undo."""
