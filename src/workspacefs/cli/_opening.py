"""How a command opens ``--fs URL``: never creating by reading, ``?agent=`` for the service's sessions, and
hints for the URLs a newcomer types (a bare path, a ``.db`` file).

A command that only reads (``ls``, ``cat``, ``grep``, ``snapshot list`` …) opens with ``create=false``: a
missing database, session or directory is "not found" (exit 3), and nothing is written. Writing
(``write``, ``patch``, ``import``) or ``--create`` makes what is missing.
"""

from __future__ import annotations

import os
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from workspacefs.open import display_url, open_filesystem, url_parameters
from workspacefs.protocol import Filesystem

__all__ = ["EPHEMERAL_SCHEMES", "SQL_SCHEMES", "open_workspace", "path_hint", "with_agent"]

SQL_SCHEMES = frozenset({"sqlite", "postgresql", "postgres"})
"""Schemes whose sessions the service's catalogue knows (``?agent=`` applies to these)."""
EPHEMERAL_SCHEMES = frozenset({"memory"})
"""Schemes whose files live only as long as the process that opened them."""


def path_hint(url: str) -> str | None:
    """What to type instead when ``url`` is a path rather than a URL (``None`` if it looks like a URL)."""
    if "://" in url:
        return None
    absolute = os.path.abspath(os.path.expanduser(url))
    if url.endswith((".db", ".sqlite", ".sqlite3")):
        return f"{url!r} is a path, not a URL: use --fs 'sqlite:///{absolute}?session=ID'"
    return f"{url!r} is a path, not a URL: use --fs file://{absolute}"


def with_agent(url: str, *, create: bool) -> str:
    """``url`` with ``?agent=A&session=S`` turned into the storage session the service keeps for agent A's
    session S (created first when ``create``); URLs without ``agent`` come back unchanged.

    Raises:
        ValueError: ``agent`` on a URL that is not a SQL workspace.
        FileNotFoundError: the database or the agent's session does not exist and ``create`` is false.
    """
    parts = urlsplit(url)
    given = url_parameters(url)  # each once: a repeated one is refused, never decided by order
    query = parse_qsl(parts.query, keep_blank_values=True)
    agent = given.get("agent")
    if agent is None:
        return url
    if parts.scheme.lower() not in SQL_SCHEMES:
        raise ValueError(
            f"?agent= names a session of the service, so it applies to SQL URLs only, not {display_url(url)!r}"
        )
    session = given.get("session")
    if not session:
        raise ValueError(f"SQL URLs need a session: add &session=ID to {display_url(url)!r}")
    from workspacefs.backends.sql import SqlStore, missing_database  # noqa: PLC0415 - the sql extra
    from workspacefs.server.catalog import SessionCatalog  # noqa: PLC0415 - the catalogue the service keeps

    if not create and (absent := missing_database(url)) is not None:
        raise FileNotFoundError(2, "No such database file", absent)
    store = SqlStore(url)
    try:
        catalog = SessionCatalog(store)
        entry = catalog.get(agent, session)
        if entry is None and not create:
            raise FileNotFoundError(2, f"Agent {agent!r} has no such session", session)
        if entry is None:
            entry = catalog.create(agent, session)
    finally:
        store.close()
    kept = [(key, value) for key, value in query if key not in ("agent", "session")]
    kept.append(("session", entry.storage_id))
    return f"{url.split('?', 1)[0]}?{urlencode(kept)}"  # urlunsplit would drop sqlite:///'s empty host


def open_workspace(url: str, *, create: bool, **options: Any) -> Filesystem:
    """Open ``url`` as a command does: ``?agent=`` resolved, ``create`` passed on (see the module's docstring).
    The caller checks :func:`path_hint` first, to say what to type instead of a bare path.

    Raises:
        ValueError: a bad or unknown URL.
        FileNotFoundError: the workspace does not exist and ``create`` is false.
        ImportError: the backend's extra is not installed.
    """
    return open_filesystem(with_agent(url, create=create), create="true" if create else "false", **options)
