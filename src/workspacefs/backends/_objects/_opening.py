"""An object client from an ``s3://bucket/prefix?endpoint_url=…&key=…&secret=…&token=…&region=…&anon=…`` URL.

The options are those of ``open_filesystem``'s ``s3://`` URLs; credentials not given come from the usual
AWS variables and files. Opening checks that the bucket exists (a typo fails here, not at the first write)
and never creates one.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from workspacefs.backends._objects._client import ObjectClient

__all__ = ["CLIENT_URL_OPTIONS", "client_from_url", "s3_filesystem"]

CLIENT_URL_OPTIONS = frozenset({"endpoint_url", "key", "secret", "token", "region", "anon"})
"""The query options an ``s3://`` URL may carry to reach its store."""
BOUNDED_RETRIES: dict[str, Any] = {"connect_timeout": 5, "retries": {"max_attempts": 3, "mode": "standard"}}
"""botocore's settings for every S3 client here: a store that cannot be reached fails a request within seconds
(``ConnectionError``: 503 from the service) instead of after botocore's legacy five attempts and a minute's
connect timeout, while a brief blip still gets two more tries."""


def s3_filesystem(
    *,
    endpoint_url: str | None = None,
    key: str | None = None,
    secret: str | None = None,
    token: str | None = None,
    region: str | None = None,
    anon: bool = False,
) -> Any:
    """A fresh ``s3fs.S3FileSystem`` (not fsspec's cached instance) with bounded retries; credentials not
    given come from the AWS variables and files. One recipe for workspaces on S3 and SQL content stores."""
    import s3fs  # noqa: PLC0415 - the s3 extra

    options: dict[str, Any] = {"anon": anon, "skip_instance_cache": True, "config_kwargs": BOUNDED_RETRIES}
    if endpoint_url:
        options["endpoint_url"] = endpoint_url
    if key or secret:
        options.update(key=key, secret=secret, token=token)
    if region:
        options["client_kwargs"] = {"region_name": region}
    return s3fs.S3FileSystem(**options)


def client_from_url(url: str) -> tuple[ObjectClient, str]:
    """The client for ``url`` and its root key (``bucket/prefix``, without a trailing ``/``).

    Raises:
        ValueError: not an ``s3://`` URL, no bucket, or an option this URL cannot take.
        FileNotFoundError: the bucket does not exist. ConnectionError: the endpoint cannot be reached.
    """
    parts = urlsplit(url)
    if parts.scheme != "s3":
        raise ValueError(f"A content store is an s3://bucket/prefix URL, not {url.split('?', maxsplit=1)[0]!r}")
    root = unquote(parts.netloc + parts.path).strip("/")
    if not root:
        raise ValueError("A content store URL names a bucket: s3://bucket/prefix")
    params = dict(parse_qsl(parts.query, keep_blank_values=True))
    unknown = sorted(set(params) - CLIENT_URL_OPTIONS)
    if unknown:
        raise ValueError(f"Unknown option(s) for a content store: {', '.join(unknown)}")
    from workspacefs.backends._objects._s3 import S3Client, split_key  # noqa: PLC0415 - needs the s3 extra

    client = S3Client(
        s3_filesystem(
            endpoint_url=params.get("endpoint_url"),
            key=params.get("key"),
            secret=params.get("secret"),
            token=params.get("token"),
            region=params.get("region"),
            anon=params.get("anon", "").lower() in ("1", "true"),
        )
    )
    bucket = split_key(root)[0]
    if not client.bucket_exists(bucket):
        raise FileNotFoundError(2, "No such bucket", bucket)
    return client, root
