"""The workspace service: seed 004's REST API over the SQL backend, and a web file browser.

``create_app()`` needs the ``server`` extra (FastAPI); tokens (``workspacefs.server.tokens``) do not,
so the command line can manage them on a machine that only has the ``sql`` extra.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from workspacefs.server._app import create_app

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    """Import FastAPI only when the application is asked for."""
    if name == "create_app":
        from workspacefs.server._app import create_app  # noqa: PLC0415

        return create_app
    raise AttributeError(f"module 'workspacefs.server' has no attribute {name!r}")
