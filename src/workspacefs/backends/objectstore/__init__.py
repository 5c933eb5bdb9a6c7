"""The object-store backend: ``ObjectStoreFilesystem`` over any fsspec filesystem (S3 through s3fs).

``_layout.py`` maps paths to keys (files are plain objects, directories marker objects), the object client
(what the backend asks of a store, and the S3 answer) lives in ``workspacefs.backends._objects`` because the
SQL backend's content store shares it, ``_streams.py`` reads and writes in fixed memory, ``_manifests.py``
and ``_snapshots.py`` keep snapshots outside the workspace, ``_filesystem.py`` puts them together.
"""

from workspacefs.backends.objectstore._filesystem import ObjectStoreFilesystem
from workspacefs.backends.objectstore._opening import open_s3

__all__ = ["ObjectStoreFilesystem", "open_s3"]
