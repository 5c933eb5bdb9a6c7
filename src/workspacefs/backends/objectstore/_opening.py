"""``open_s3``: an ``ObjectStoreFilesystem`` on S3 from the options of an ``s3://`` URL.

Opening checks the bucket (a typo fails here, with ``FileNotFoundError``, not at the first write) and
never creates one. With ``create`` it writes the root's marker, so the workspace exists even while empty;
without, a root that holds nothing is refused.
"""

from __future__ import annotations

from typing import Any

from workspacefs.backends.objectstore._filesystem import ObjectStoreFilesystem
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
) -> ObjectStoreFilesystem:
    """Open (and with ``create``, make) the workspace at ``bucket/prefix``; missing credentials come from the
    AWS environment variables and files, as for any AWS tool.

    Raises:
        FileNotFoundError: the bucket does not exist, or ``create`` is false and nothing is at the root.
        ConnectionError: the endpoint cannot be reached. PermissionError: the store refuses the credentials.
    """
    import s3fs  # noqa: PLC0415 - the s3 extra

    options: dict[str, Any] = {"anon": anon, "skip_instance_cache": True}
    if endpoint_url:
        options["endpoint_url"] = endpoint_url
    if key or secret:
        options.update(key=key, secret=secret, token=token)
    if region:
        options["client_kwargs"] = {"region_name": region}
    fs = ObjectStoreFilesystem(
        s3fs.S3FileSystem(**options),
        root,
        read_only=read_only,
        mount_point=mount_point,
        quota=quota,
        snapshot_dir=snapshot_dir,
    )
    fs.check_root(create=create)
    return fs
