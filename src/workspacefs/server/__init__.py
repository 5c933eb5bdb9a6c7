"""The workspace service: a REST API over any backend that speaks ``ConditionalWrites``, the web
file browser, and the service's own storage (tokens, and which agent owns each session).

``create_app()`` needs the ``server`` extra (FastAPI); ``TokenStore`` and ``SessionCatalog`` only the ``sql``
extra, so the command line can manage tokens on a machine without FastAPI. Everything loads on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workspacefs.server._app import create_app
    from workspacefs.server.catalog import DEFAULT_AGENT, CatalogEntry, SessionCatalog
    from workspacefs.server.tokens import Scope, TokenInfo, TokenStore

__all__ = ["DEFAULT_AGENT", "CatalogEntry", "Scope", "SessionCatalog", "TokenInfo", "TokenStore", "create_app"]

_HOMES = {
    "create_app": "workspacefs.server._app",
    "DEFAULT_AGENT": "workspacefs.server.catalog",
    "CatalogEntry": "workspacefs.server.catalog",
    "SessionCatalog": "workspacefs.server.catalog",
    "Scope": "workspacefs.server.tokens",
    "TokenInfo": "workspacefs.server.tokens",
    "TokenStore": "workspacefs.server.tokens",
}


def __getattr__(name: str) -> Any:
    """Import the service's parts (FastAPI, SQLAlchemy) only when one is asked for."""
    if name not in _HOMES:
        raise AttributeError(f"module 'workspacefs.server' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)
