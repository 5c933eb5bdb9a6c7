"""Agent integration: sections that own a workspace, a prompt that finds it, tool
contexts built from it, and sessions that snapshot, roll back and persist along with it."""

from workspacefs.agent._prompt import Prompt, PromptTemplate, build_tool_context
from workspacefs.agent._sections import (
    FilesystemSection,
    HostWorkspaceSection,
    MarkdownSection,
    Section,
    VfsSection,
    WorkspaceSection,
)
from workspacefs.agent._session import (
    FilesystemSnapshotRef,
    Session,
    SessionSnapshot,
    Slice,
    append_all,
    create_unified_snapshot,
    replace_latest,
    restore_unified_snapshot,
)

__all__ = [
    "FilesystemSection",
    "FilesystemSnapshotRef",
    "HostWorkspaceSection",
    "MarkdownSection",
    "Prompt",
    "PromptTemplate",
    "Section",
    "Session",
    "SessionSnapshot",
    "Slice",
    "VfsSection",
    "WorkspaceSection",
    "append_all",
    "build_tool_context",
    "create_unified_snapshot",
    "replace_latest",
    "restore_unified_snapshot",
]
