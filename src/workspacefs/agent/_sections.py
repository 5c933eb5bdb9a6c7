"""Prompt sections: a tree of markdown sections, some of which own a filesystem."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from string import Template
from typing import Any, Protocol, runtime_checkable

from workspacefs.backends.host import HostFilesystem
from workspacefs.backends.hydration import HostMount
from workspacefs.backends.memory import InMemoryFilesystem
from workspacefs.protocol import Filesystem
from workspacefs.tools import FILESYSTEM_TOOLS, Tool

__all__ = [
    "FilesystemSection",
    "HostWorkspaceSection",
    "MarkdownSection",
    "Section",
    "VfsSection",
    "WorkspaceSection",
]


class Section:
    """A titled part of a prompt with optional tools and child sections."""

    def __init__(
        self,
        *,
        title: str,
        key: str,
        template: str = "",
        tools: Sequence[Tool[Any]] = (),
        children: Sequence[Section] = (),
    ) -> None:
        self.title = title
        self.key = key
        self.template = template
        self.tools = tuple(tools)
        self.children = tuple(children)

    def render(self, params: Mapping[str, Any] | None = None, *, depth: int = 2) -> str:
        """This section's text (``$name`` placeholders filled from ``params``), then its children's."""
        body = Template(self.template).safe_substitute(params or {})
        parts = [f"{'#' * depth} {self.title}", body] if body else [f"{'#' * depth} {self.title}"]
        parts += [child.render(params, depth=depth + 1) for child in self.children]
        return "\n\n".join(parts)

    def walk(self) -> Iterator[Section]:
        """This section and every descendant, depth first."""
        yield self
        for child in self.children:
            yield from child.walk()


class MarkdownSection(Section):
    """A section rendered as markdown (the only kind this package needs)."""


@runtime_checkable
class WorkspaceSection(Protocol):
    """A section that owns the filesystem its tools act on."""

    @property
    def filesystem(self) -> Filesystem:
        """The filesystem managed by this section."""
        ...


class FilesystemSection(MarkdownSection):
    """A section owning a filesystem and offering the filesystem tools over it."""

    def __init__(
        self,
        filesystem: Filesystem,
        *,
        title: str,
        key: str,
        template: str = "",
        tools: Sequence[Tool[Any]] = FILESYSTEM_TOOLS,
        children: Sequence[Section] = (),
    ) -> None:
        super().__init__(title=title, key=key, template=template, tools=tools, children=children)
        self._filesystem = filesystem

    @property
    def filesystem(self) -> Filesystem:
        """The filesystem this section's tools use."""
        return self._filesystem


_VFS_TEMPLATE = (
    "You have a private workspace mounted at $mount_point. Use the file tools to read and change it; "
    "read a file before you overwrite or edit it."
)


class VfsSection(FilesystemSection):
    """An in-memory workspace, optionally hydrated from host directories."""

    def __init__(
        self,
        *,
        mounts: Sequence[HostMount] = (),
        allowed_host_roots: Sequence[str | os.PathLike[str]] = (),
        mount_point: str = "/workspace",
        session: Any = None,
        title: str = "Workspace",
        key: str = "vfs",
        tools: Sequence[Tool[Any]] = FILESYSTEM_TOOLS,
    ) -> None:
        filesystem = InMemoryFilesystem(mount_point=mount_point)
        for mount in mounts:
            filesystem.hydrate_from_host(mount, allowed_roots=allowed_host_roots)
        template = Template(_VFS_TEMPLATE).safe_substitute(mount_point=mount_point)
        super().__init__(filesystem, title=title, key=key, template=template, tools=tools)
        if session is not None:
            session.attach_filesystem(key, filesystem)


class HostWorkspaceSection(FilesystemSection):
    """A sandboxed host directory as the workspace (snapshots through its own strategies)."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        mount_point: str = "/workspace",
        read_only: bool = False,
        snapshot_dir: str | os.PathLike[str] | None = None,
        title: str = "Workspace",
        key: str = "workspace",
        tools: Sequence[Tool[Any]] = FILESYSTEM_TOOLS,
    ) -> None:
        filesystem = HostFilesystem(root, mount_point=mount_point, read_only=read_only, snapshot_dir=snapshot_dir)
        template = Template(_VFS_TEMPLATE).safe_substitute(mount_point=mount_point)
        super().__init__(filesystem, title=title, key=key, template=template, tools=tools)
