"""``Capabilities``: what a backend can do, declared once as a typed value (``fs.capabilities``).

The tool layer, the service, MCP and the agent integration read these flags before they act — they
offer a tool, wrap a call in a transaction or export a workspace because a flag says so, never because
an attribute happens to exist or a class happens to match (the lesson of OpenDAL's ``Capability``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Capabilities"]


@dataclass(frozen=True, slots=True)
class Capabilities:
    """Named flags of one backend; every one defaults to what a plain backend lacks."""

    snapshots: bool = True
    """``snapshot``/``restore``/``diff``/``snapshots``/``delete_snapshot`` work (every built-in backend)."""
    cheap_snapshots: bool = False
    """``snapshot()`` costs O(1) or O(changed), never a copy: safe to take one around every call."""
    persistent: bool = True
    """Files outlive the process (``False`` for memory: a ``Session`` saves such a workspace with itself)."""
    fork: bool = False
    """``fork()`` makes an independent branch of the workspace whose snapshots this one can restore and merge."""
    merge: bool = False
    """``merge(base, ours, theirs)`` makes a three-way merge of snapshots (of this filesystem or its forks)."""
    conditional_writes: bool = True
    """``content_id``/``open_versioned``/``write_bytes_if``/``open_write_if`` (every built-in backend)."""
    file_read_only: bool = False
    """``set_read_only`` marks single files read-only (``FileStat.read_only`` then reports it)."""
    host_directory: bool = False
    """``root`` is a real directory on this machine (a ``file://`` URI can name it)."""
    exec: bool = False
    """Commands can run inside the workspace (container backends)."""
    watch: bool = False
    """Changes can be watched as they happen."""
    history: bool = False
    """Per-change history with undo."""
