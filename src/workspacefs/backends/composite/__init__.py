"""``CompositeFilesystem``: several filesystems in one tree, each mounted at a path."""

from workspacefs.backends.composite._filesystem import CompositeFilesystem

__all__ = ["CompositeFilesystem"]
