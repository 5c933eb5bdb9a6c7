"""The host backend: ``HostFilesystem``, a sandboxed host directory, and its snapshot strategies.

``_tree.py`` does the descriptor-based disk work, ``_filesystem.py`` builds the protocol on it,
``_snapshots.py`` and ``_strategies.py`` keep snapshots outside the root, ``_ripgrep.py`` narrows grep,
``_replace.py`` replaces a directory's tree in one exchange and ``_trash.py`` finishes what a killed one left.
"""

from workspacefs.backends.host._commands import CommandBudget
from workspacefs.backends.host._filesystem import HostFilesystem
from workspacefs.backends.host._strategies import (
    STRATEGIES,
    ArchiveStrategy,
    CopyStrategy,
    GitStrategy,
    ReflinkStrategy,
    SnapshotStrategy,
)

__all__ = [
    "STRATEGIES",
    "ArchiveStrategy",
    "CommandBudget",
    "CopyStrategy",
    "GitStrategy",
    "HostFilesystem",
    "ReflinkStrategy",
    "SnapshotStrategy",
]
