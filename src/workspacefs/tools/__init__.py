"""The LLM tool layer: one definition of each filesystem tool, usable with any provider and backend.

``FILESYSTEM_TOOLS`` = ``ls``, ``read_file``, ``write_file``, ``edit_file``, ``glob``, ``grep``,
``rm``; ``EXTRA_TOOLS`` = ``mkdir``, ``mv``, ``cp``, ``stat``; ``SNAPSHOT_TOOLS`` = ``snapshot``,
``restore``, ``diff`` where the filesystem can snapshot (``tools_for(fs)`` picks what fits a filesystem).
Handlers take ``(params, *, context)`` and never raise for a model's mistake: they return
``ToolResult(success=False)`` with a message saying what to do instead.
"""

from workspacefs.protocol import Filesystem, SnapshotableFilesystem
from workspacefs.tools._core import ReadState, SnapshotLedger, Tool, ToolContext, ToolResult
from workspacefs.tools._dispatch import dispatch, to_anthropic_tools, to_openai_tools
from workspacefs.tools._file_tools import CP, GLOB, GREP, LS, MKDIR, MV, RM, STAT
from workspacefs.tools._schema import openai_strict_schema, portable_schema
from workspacefs.tools._snapshot_tools import DIFF, RESTORE, SNAPSHOT
from workspacefs.tools._text_tools import EDIT_FILE, READ_FILE, WRITE_FILE

FILESYSTEM_TOOLS: tuple[Tool, ...] = (LS, READ_FILE, WRITE_FILE, EDIT_FILE, GLOB, GREP, RM)  # type: ignore[type-arg]
EXTRA_TOOLS: tuple[Tool, ...] = (MKDIR, MV, CP, STAT)  # type: ignore[type-arg]
ALL_TOOLS: tuple[Tool, ...] = FILESYSTEM_TOOLS + EXTRA_TOOLS  # type: ignore[type-arg]
SNAPSHOT_TOOLS: tuple[Tool, ...] = (SNAPSHOT, RESTORE, DIFF)  # type: ignore[type-arg]


def tools_for(fs: Filesystem | None, *, read_only: bool | None = None) -> tuple[Tool, ...]:  # type: ignore[type-arg]
    """The tools that make sense on ``fs``: every file tool, plus ``SNAPSHOT_TOOLS`` where it can
    snapshot; on a read-only filesystem (or with ``read_only=True``) only the tools that change nothing."""
    offered = ALL_TOOLS + (SNAPSHOT_TOOLS if isinstance(fs, SnapshotableFilesystem) else ())
    if read_only if read_only is not None else bool(fs is not None and fs.read_only):
        offered = tuple(tool for tool in offered if not tool.mutating and tool.name != "snapshot")
    return offered


__all__ = [
    "ALL_TOOLS",
    "CP",
    "DIFF",
    "EDIT_FILE",
    "EXTRA_TOOLS",
    "FILESYSTEM_TOOLS",
    "GLOB",
    "GREP",
    "LS",
    "MKDIR",
    "MV",
    "READ_FILE",
    "RESTORE",
    "RM",
    "SNAPSHOT",
    "SNAPSHOT_TOOLS",
    "STAT",
    "WRITE_FILE",
    "ReadState",
    "SnapshotLedger",
    "Tool",
    "ToolContext",
    "ToolResult",
    "dispatch",
    "openai_strict_schema",
    "portable_schema",
    "to_anthropic_tools",
    "to_openai_tools",
    "tools_for",
]
