"""The ``workspacefs`` command: ``serve`` the workspace service, manage its ``token``s and its ``db``."""

from __future__ import annotations

from workspacefs.cli._main import main

__all__ = ["main"]
