"""The service's database as the command line opens it: ``--db URL`` or the default SQLite file."""

from __future__ import annotations

from typing import Any

import click

__all__ = ["DB_HELP", "open_store", "redact"]

DB_HELP = "Database URL: sqlite:///path/file.db or postgresql://user@host/db (default: a SQLite file in your data dir)."


def open_store(url: str | None) -> Any:
    """The service's database (``SqlStore``), importing the ``sql`` extra only when a command needs it."""
    try:
        from workspacefs.backends.sql import SqlStore, default_database  # noqa: PLC0415 - the sql extra
    except ImportError as exc:
        raise click.ClickException(f"{exc}; install the sql extra: pip install 'workspacefs[sql]'") from None
    return SqlStore(url or default_database())


def redact(url: str) -> str:
    """A URL fit for a log line: the password hidden."""
    import sqlalchemy as sa  # noqa: PLC0415

    return sa.engine.make_url(url).render_as_string(hide_password=True)
