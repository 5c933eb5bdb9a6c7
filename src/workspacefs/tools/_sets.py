"""The tool sets, and ``tools_for``: which tools fit a filesystem, read from its declared capabilities."""

from __future__ import annotations

from typing import Any

from workspacefs.protocol import Filesystem
from workspacefs.tools._core import Tool
from workspacefs.tools._exec_tool import RUN_COMMAND
from workspacefs.tools._file_tools import CP, GLOB, GREP, LS, MKDIR, MV, RM, STAT
from workspacefs.tools._history_tools import HISTORY, UNDO
from workspacefs.tools._memory_tool import MEMORY
from workspacefs.tools._patch_tools import APPLY_PATCH
from workspacefs.tools._snapshot_tools import DIFF, RESTORE, SNAPSHOT
from workspacefs.tools._text_editor import TEXT_EDITOR_20250124, TEXT_EDITOR_20250728
from workspacefs.tools._text_tools import EDIT_FILE, READ_FILE, WRITE_FILE

__all__ = [
    "ALL_TOOLS",
    "EXEC_TOOLS",
    "EXTRA_TOOLS",
    "FILESYSTEM_TOOLS",
    "HISTORY_TOOLS",
    "NATIVE_TOOLS",
    "SNAPSHOT_TOOLS",
    "tools_for",
]

FILESYSTEM_TOOLS: tuple[Tool[Any], ...] = (LS, READ_FILE, WRITE_FILE, EDIT_FILE, GLOB, GREP, RM)
EXTRA_TOOLS: tuple[Tool[Any], ...] = (MKDIR, MV, CP, STAT)
ALL_TOOLS: tuple[Tool[Any], ...] = FILESYSTEM_TOOLS + EXTRA_TOOLS
SNAPSHOT_TOOLS: tuple[Tool[Any], ...] = (SNAPSHOT, RESTORE, DIFF)
EXEC_TOOLS: tuple[Tool[Any], ...] = (RUN_COMMAND,)
HISTORY_TOOLS: tuple[Tool[Any], ...] = (HISTORY, UNDO)
"""The journal (``history``) and ``undo``: offered only when asked for (``tools_for(fs, history=True)``), where the
filesystem keeps history; an undo changes files the model may not have looked at since."""
NATIVE_TOOLS: tuple[Tool[Any], ...] = (TEXT_EDITOR_20250728, TEXT_EDITOR_20250124, MEMORY, APPLY_PATCH)
"""The providers' own file tools under their native names: Anthropic's text editor (both versions) and memory
tool, and the Codex ``apply_patch`` (one string argument). ``dispatch`` accepts them by default; offer them
instead of (not beside) the file tools, so a model sees one way to edit."""


def tools_for(fs: Filesystem | None, *, read_only: bool | None = None, history: bool = False) -> tuple[Tool[Any], ...]:
    """The tools to offer a model working on ``fs``, fitted to its capabilities: every file tool, plus
    ``SNAPSHOT_TOOLS`` where it snapshots and ``EXEC_TOOLS`` (``run_command``) where it runs commands, and with
    ``history=True`` ``HISTORY_TOOLS`` (``history``, ``undo``) where it keeps history; on a read-only filesystem
    (or with ``read_only=True``) only the tools that change nothing. Hand the result to
    ``to_openai_tools``/``to_anthropic_tools``, whose default (``ALL_TOOLS``) is the same for every backend:

    >>> from workspacefs import InMemoryFilesystem, to_openai_tools
    >>> [tool.name for tool in tools_for(InMemoryFilesystem())][-4:]
    ['stat', 'snapshot', 'restore', 'diff']
    >>> [tool.name for tool in tools_for(InMemoryFilesystem(read_only=True))]
    ['ls', 'read_file', 'glob', 'grep', 'stat', 'diff']
    >>> len(to_openai_tools()), len(to_openai_tools(tools_for(InMemoryFilesystem())))
    (11, 14)
    >>> [tool.name for tool in tools_for(InMemoryFilesystem(), history=True)][-2:]
    ['history', 'undo']
    """
    caps = fs.capabilities if fs is not None else None
    offered = ALL_TOOLS + (SNAPSHOT_TOOLS if caps is not None and caps.snapshots else ())
    offered += EXEC_TOOLS if caps is not None and caps.exec else ()
    offered += HISTORY_TOOLS if history and caps is not None and caps.history else ()
    if read_only if read_only is not None else bool(fs is not None and fs.read_only):
        offered = tuple(tool for tool in offered if not tool.mutating and tool.name != "snapshot")
    return offered
