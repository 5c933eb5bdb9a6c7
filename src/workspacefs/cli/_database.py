"""The service's database as the command line opens it: ``--db URL`` or the default SQLite file."""

from __future__ import annotations

import sys
from typing import Any

import click

from workspacefs.open import display_url

__all__ = ["CONTENT_STORE_HELP", "DB_HELP", "open_store", "redact"]

DB_HELP = (
    "Database URL: sqlite:///path/file.db or postgresql://user@host/db (or set WORKSPACEFS_DB; default: a SQLite "
    "file in your data dir)."
)


CONTENT_STORE_HELP = (
    "Keep chunks of 256 KiB and more in this object store instead of the database: s3://bucket/prefix"
    "?endpoint_url=…&key=…&secret=…&region=… (or set WORKSPACEFS_CONTENT_STORE; default: none)."
)


def open_store(url: str | None, *, create: bool = True, content_store: str | None = None) -> Any:
    """The service's database (``SqlStore``), importing the ``sql`` extra only when a command needs it.
    A command that only reads passes ``create=False``: a SQLite file that does not exist is then exit 3, not
    a new, empty database made from a typo. ``content_store`` is an ``s3://`` URL where large chunks live."""
    try:
        from workspacefs.backends.sql import SqlStore, default_database, missing_database  # noqa: PLC0415
    except ImportError as exc:
        raise click.ClickException(f"{exc}; install the sql extra: pip install 'workspacefs[sql]'") from None
    chosen = url or default_database()
    if not create and (absent := missing_database(chosen)) is not None:
        click.echo(f"workspacefs: {absent}: No such database file (workspacefs serve makes it)", err=True)
        sys.exit(3)
    try:
        return SqlStore(chosen, content_store=content_store or None)
    except ConnectionError as exc:
        click.echo(f"workspacefs: {exc}", err=True)
        sys.exit(1)
    except FileNotFoundError as exc:  # the content store's bucket
        click.echo(f"workspacefs: content store: {exc.strerror}: {exc.filename}", err=True)
        sys.exit(3)
    except (ValueError, PermissionError, ImportError) as exc:
        click.echo(f"workspacefs: content store: {exc}", err=True)
        sys.exit(2 if isinstance(exc, ValueError) else 1)


def redact(url: str) -> str:
    """A URL fit for a log line: the password and credential parameters hidden (:func:`display_url`)."""
    return display_url(url)
