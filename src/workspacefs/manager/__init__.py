"""FileManager, PathConstraints, ReaderTool and WriterTool, on the filesystem protocol.

For async agent frameworks that work with documents by character offset: every operation goes
through the same ``Filesystem`` as the tools, in worker threads, with constraints checked first.
"""

from workspacefs.manager._constraints import PathConstraints
from workspacefs.manager._manager import FileManager
from workspacefs.manager._models import FileAction, FileRequest, FileResponse, FileState
from workspacefs.manager._reader import ReaderTool
from workspacefs.manager._writer import ConstrainedStream, WriterTool

__all__ = [
    "ConstrainedStream",
    "FileAction",
    "FileManager",
    "FileRequest",
    "FileResponse",
    "FileState",
    "PathConstraints",
    "ReaderTool",
    "WriterTool",
]
