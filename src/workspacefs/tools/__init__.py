"""The LLM tool layer: one definition of each filesystem tool, usable with any provider and backend.

``FILESYSTEM_TOOLS`` = ``ls``, ``read_file``, ``write_file``, ``edit_file``, ``glob``, ``grep``,
``rm``; ``EXTRA_TOOLS`` = ``mkdir``, ``mv``, ``cp``, ``stat``; ``SNAPSHOT_TOOLS`` = ``snapshot``,
``restore``, ``diff`` where the filesystem can snapshot; ``EXEC_TOOLS`` = ``run_command`` where it can run
commands; ``HISTORY_TOOLS`` = ``history``, ``undo`` where it keeps history, only when asked for
(``tools_for(fs, history=True)``); ``tools_for(fs)`` picks what fits a filesystem. ``NATIVE_TOOLS`` answer the
providers' own file tools by their native names: Anthropic's text editor and memory tool (see
``workspacefs.tools.anthropic``), OpenAI's ``apply_patch`` (``workspacefs.tools.openai``) and the Codex patch
tool ``APPLY_PATCH``. Handlers take ``(params, *, context)`` and never raise for a model's mistake: they return
``ToolResult(success=False)`` with a message saying what to do instead.
"""

from workspacefs.tools._core import EditHistory, ReadState, SnapshotLedger, Tool, ToolContext, ToolResult
from workspacefs.tools._dispatch import dispatch, to_anthropic_tools, to_openai_tools
from workspacefs.tools._exec_tool import RUN_COMMAND
from workspacefs.tools._file_tools import CP, GLOB, GREP, LS, MKDIR, MV, RM, STAT
from workspacefs.tools._history_tools import HISTORY, UNDO
from workspacefs.tools._memory_tool import MEMORY
from workspacefs.tools._messages import TOOL_MESSAGES
from workspacefs.tools._patch_tools import APPLY_PATCH
from workspacefs.tools._schema import openai_strict_schema, portable_schema
from workspacefs.tools._sets import (
    ALL_TOOLS,
    EXEC_TOOLS,
    EXTRA_TOOLS,
    FILESYSTEM_TOOLS,
    HISTORY_TOOLS,
    NATIVE_TOOLS,
    SNAPSHOT_TOOLS,
    tools_for,
)
from workspacefs.tools._snapshot_tools import DIFF, RESTORE, SNAPSHOT
from workspacefs.tools._text_editor import TEXT_EDITOR_20250124, TEXT_EDITOR_20250728
from workspacefs.tools._text_tools import EDIT_FILE, READ_FILE, WRITE_FILE

__all__ = [
    "ALL_TOOLS",
    "APPLY_PATCH",
    "CP",
    "DIFF",
    "EDIT_FILE",
    "EXEC_TOOLS",
    "EXTRA_TOOLS",
    "FILESYSTEM_TOOLS",
    "GLOB",
    "GREP",
    "HISTORY",
    "HISTORY_TOOLS",
    "LS",
    "MEMORY",
    "MKDIR",
    "MV",
    "NATIVE_TOOLS",
    "READ_FILE",
    "RESTORE",
    "RM",
    "RUN_COMMAND",
    "SNAPSHOT",
    "SNAPSHOT_TOOLS",
    "STAT",
    "TEXT_EDITOR_20250124",
    "TEXT_EDITOR_20250728",
    "TOOL_MESSAGES",
    "UNDO",
    "WRITE_FILE",
    "EditHistory",
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
