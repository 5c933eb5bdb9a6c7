"""The LLM tool layer: one definition of each filesystem tool, usable with any provider and backend.

``FILESYSTEM_TOOLS`` = ``ls``, ``read_file``, ``write_file``, ``edit_file``, ``glob``, ``grep``,
``rm``; ``EXTRA_TOOLS`` = ``mkdir``, ``mv``, ``cp``, ``stat``. Handlers take ``(params, *,
context)`` and never raise for a model's mistake: they return ``ToolResult(success=False)`` with a
message saying what to do instead.
"""

from workspacefs.tools._core import ReadState, Tool, ToolContext, ToolResult
from workspacefs.tools._dispatch import dispatch, to_anthropic_tools, to_openai_tools
from workspacefs.tools._file_tools import CP, GLOB, GREP, LS, MKDIR, MV, RM, STAT
from workspacefs.tools._schema import openai_strict_schema, portable_schema
from workspacefs.tools._text_tools import EDIT_FILE, READ_FILE, WRITE_FILE

FILESYSTEM_TOOLS: tuple[Tool, ...] = (LS, READ_FILE, WRITE_FILE, EDIT_FILE, GLOB, GREP, RM)  # type: ignore[type-arg]
EXTRA_TOOLS: tuple[Tool, ...] = (MKDIR, MV, CP, STAT)  # type: ignore[type-arg]
ALL_TOOLS: tuple[Tool, ...] = FILESYSTEM_TOOLS + EXTRA_TOOLS  # type: ignore[type-arg]

__all__ = [
    "ALL_TOOLS",
    "CP",
    "EDIT_FILE",
    "EXTRA_TOOLS",
    "FILESYSTEM_TOOLS",
    "GLOB",
    "GREP",
    "LS",
    "MKDIR",
    "MV",
    "READ_FILE",
    "RM",
    "STAT",
    "WRITE_FILE",
    "ReadState",
    "Tool",
    "ToolContext",
    "ToolResult",
    "dispatch",
    "openai_strict_schema",
    "portable_schema",
    "to_anthropic_tools",
    "to_openai_tools",
]
