"""``open_s3``: an ``ObjectStoreFilesystem`` on S3 from the options of an ``s3://`` URL.

Opening checks the bucket (a typo fails here, with ``FileNotFoundError``, not at the first write) and
never creates one. With ``create`` it writes the root's marker, so the workspace exists even while empty;
without, a root that holds nothing is refused.
"""

from __future__ import annotations

from workspacefs.backends._objects._opening import s3_filesystem
from workspacefs.backends.objectstore._filesystem import ObjectStoreFilesystem
from workspacefs.backends.objectstore._journal import DEFAULT_MAX_ENTRIES
from workspacefs.quota import Quota

__all__ = ["open_s3"]


def open_s3(
    root: str,
    *,
    endpoint_url: str | None = None,
    key: str | None = None,
    secret: str | None = None,
    token: str | None = None,
    region: str | None = None,
    anon: bool = False,
    snapshot_dir: str | None = None,
    read_only: bool = False,
    mount_point: str | None = None,
    create: bool = True,
    quota: Quota | None = None,
    history: bool = True,
    history_entries: int = DEFAULT_MAX_ENTRIES,
) -> ObjectStoreFilesystem:
    """Open (and with ``create``, make) the workspace at ``bucket/prefix``; missing credentials come from the
    AWS environment variables and files, as for any AWS tool. ``history`` and ``history_entries``: as for
    :class:`ObjectStoreFilesystem`.

    Raises:
        FileNotFoundError: the bucket does not exist, or ``create`` is false and nothing is at the root.
        ConnectionError: the endpoint cannot be reached. PermissionError: the store refuses the credentials.
    """
    store = s3_filesystem(endpoint_url=endpoint_url, key=key, secret=secret, token=token, region=region, anon=anon)
    fs = ObjectStoreFilesystem(
        store,
        root,
        read_only=read_only,
        mount_point=mount_point,
        quota=quota,
        snapshot_dir=snapshot_dir,
        history=history,
        history_entries=history_entries,
    )
    fs.check_root(create=create)
    return fs
