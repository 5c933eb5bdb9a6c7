"""The S3 client: the calls of :class:`~._client.ObjectClient` made through an ``s3fs.S3FileSystem``.

It uses s3fs's session (credentials, endpoint, retries, its event loop) and makes the S3 calls itself, so
it can send what s3fs's file API does not: ``If-Match``/``If-None-Match`` on ``PutObject`` and
``CompleteMultipartUpload``, ``CopySourceIfMatch``, user metadata (the content id), ranged ``GetObject``
pinned to one version. Errors are mapped once, in :func:`_mapped`.
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
import errno
from collections.abc import Awaitable, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

import aiohttp
import botocore.exceptions
from fsspec.asyn import sync

from workspacefs.backends._objects._client import (
    BucketMissingError,
    ObjectClient,
    ObjectInfo,
    PreconditionFailed,
    RangeNotSatisfiableError,
    Upload,
)

__all__ = ["S3Client", "split_key"]

_UNREACHABLE = (
    OSError,  # ConnectionError, TimeoutError, socket errors
    asyncio.TimeoutError,
    aiohttp.ClientConnectionError,
    aiohttp.ServerTimeoutError,
    botocore.exceptions.ConnectionError,  # EndpointConnectionError, ConnectTimeoutError, ProxyConnectionError
)
"""Failures to reach the store: a later attempt may get through (the service answers 503)."""

T = TypeVar("T")

CONTENT_ID_METADATA = "wsfs-content-id"
"""User metadata (``x-amz-meta-…``) that carries a whole-PUT object's content id."""
_MAX_COPY_BYTES = 5 * 1024**3
"""``CopyObject`` copies at most 5 GiB; larger objects are copied in parts."""
_COPY_PART_BYTES = 512 * 1024**2
_DELETE_BATCH = 1000
_READ_PIECE_BYTES = 256 * 1024
_NOT_FOUND = frozenset({"NoSuchKey", "NoSuchVersion", "NotFound", "404"})
_DENIED = frozenset(
    {"AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AllAccessDisabled", "ExpiredToken"}
)
_RANGE = frozenset({"InvalidRange", "416"})
"""A ranged ``GetObject`` that begins at or past the end (an empty object, or reading at its end)."""
_CONFLICT = frozenset({"PreconditionFailed", "412", "ConditionalRequestConflict", "409"})


class _ShortBodyError(ConnectionError):
    """A response that ended before its ``Content-Length``: already the error to raise (it names no key)."""


def split_key(key: str) -> tuple[str, str]:
    """``bucket/some/key`` as ``("bucket", "some/key")``."""
    bucket, _, rest = key.partition("/")
    return bucket, rest


def _error_code(exc: BaseException) -> tuple[str, str] | None:
    """``(code, message)`` of the S3 error behind ``exc`` (s3fs keeps botocore's as the cause)."""
    for candidate in (exc, exc.__cause__, exc.__context__):
        response = getattr(candidate, "response", None)
        if isinstance(response, dict) and isinstance(response.get("Error"), dict):
            error = response["Error"]
            status = str(response.get("ResponseMetadata", {}).get("HTTPStatusCode", ""))
            code = str(error.get("Code") or status)
            return code, str(error.get("Message") or code)
    return None


def _mapped(exc: Exception, endpoint: str, key: str) -> Exception:
    """The built-in exception (or :class:`PreconditionFailed`) for a failed S3 call on ``key``."""
    found = _error_code(exc)
    if found is not None:
        code, message = found
        if code in _CONFLICT:
            return PreconditionFailed(message)
        if code == "NoSuchBucket":  # the bucket is the operator's: the filesystem names the caller's path
            return BucketMissingError(errno.ENOENT, "The bucket configured for this store does not exist")
        if code in _NOT_FOUND:
            return FileNotFoundError(errno.ENOENT, "No such object", key)
        if code in _DENIED:
            # not S3's message: AWS names the resource refused (``arn:aws:s3:::bucket/key``)
            return PermissionError(errno.EACCES, f"The object store refused access ({code})")
        if code in _RANGE:
            return RangeNotSatisfiableError(errno.EIO, f"The object store refused the request ({code}): {message}")
        return OSError(errno.EIO, f"The object store refused the request ({code}): {message}")
    name = type(exc).__name__
    if isinstance(exc, botocore.exceptions.NoCredentialsError):
        return PermissionError(errno.EACCES, "No credentials for the object store (set key/secret or AWS_* variables)")
    if isinstance(exc, FileNotFoundError):  # s3fs's own translation without a cause
        return FileNotFoundError(errno.ENOENT, "No such object", key)
    if isinstance(exc, PermissionError):
        return PermissionError(errno.EACCES, "The object store refused access")
    # not the error's text: botocore's names the request's URL, which holds the bucket and the object's key
    if _unreachable(exc):
        return ConnectionError(errno.ECONNREFUSED, f"Cannot reach the object store at {endpoint} ({name})")
    # a client that cannot work as configured (a retry mode, signature version or CA file it refuses): no retry
    # later helps, so not "cannot reach" (the service's 503); its type says what to fix
    return OSError(errno.EIO, f"The object store client for {endpoint} failed ({name}); check its configuration")


def _unreachable(exc: BaseException) -> bool:
    """Whether ``exc`` is a failure to reach the store (a refused or dropped connection, a timeout), told by type:
    botocore's ``HTTPClientError`` wraps whatever its HTTP client raised, so the wrapped error decides."""
    if isinstance(exc, botocore.exceptions.HTTPClientError):
        inner = exc.kwargs.get("error")
        return inner is None or _unreachable(inner)
    return isinstance(exc, _UNREACHABLE)


def _info(key: str, response: dict[str, Any], size: int | None = None) -> ObjectInfo:
    modified = response.get("LastModified")
    metadata = response.get("Metadata") or {}
    return ObjectInfo(
        key=key,
        size=int(response.get("ContentLength", response.get("Size", 0)) if size is None else size),
        etag=str(response.get("ETag", "")),
        modified=modified if isinstance(modified, datetime) else datetime.now(UTC),
        content_id=metadata.get(CONTENT_ID_METADATA),
        version_id=_version(response),
    )


def _version(response: dict[str, Any]) -> str | None:
    """The version id S3 answered with (``"null"`` names an object written before versioning was on)."""
    version = response.get("VersionId")
    return str(version) if version else None


class _S3Upload(Upload):
    """A multipart upload: parts numbered from 1, completed or aborted exactly once."""

    def __init__(self, client: S3Client, key: str) -> None:
        self._client = client
        self._key = key
        bucket, name = split_key(key)
        self._where = {"Bucket": bucket, "Key": name}
        created = client.call("create_multipart_upload", key, **self._where)
        self._upload_id: str = created["UploadId"]
        self._parts: list[dict[str, Any]] = []

    def upload_part(self, data: memoryview) -> None:
        number = len(self._parts) + 1
        sent = self._client.call(
            "upload_part",
            self._key,
            **self._where,
            UploadId=self._upload_id,
            PartNumber=number,
            Body=data.obj if isinstance(data.obj, bytes) and len(data) == len(data.obj) else bytes(data),
        )
        self._parts.append({"ETag": sent["ETag"], "PartNumber": number})

    def complete(self, *, if_match: str | None = None, if_none_match: bool = False) -> str:
        conditions = _conditions(if_match, if_none_match)
        done = self._client.call(
            "complete_multipart_upload",
            self._key,
            **self._where,
            UploadId=self._upload_id,
            MultipartUpload={"Parts": self._parts},
            **conditions,
        )
        return str(done["ETag"])

    def abort(self) -> None:
        with contextlib.suppress(OSError, PreconditionFailed):  # already gone: it holds no visible object anyway
            self._client.call("abort_multipart_upload", self._key, **self._where, UploadId=self._upload_id)


def _conditions(if_match: str | None, if_none_match: bool) -> dict[str, str]:
    conditions: dict[str, str] = {}
    if if_match is not None:
        conditions["IfMatch"] = if_match
    if if_none_match:
        conditions["IfNoneMatch"] = "*"
    return conditions


class S3Client(ObjectClient):
    """:class:`ObjectClient` over an ``s3fs.S3FileSystem`` (AWS S3, MinIO, moto, any S3-compatible server)."""

    conditional_writes = True  # PutObject If-Match/If-None-Match: AWS S3 since 2024, moto, MinIO

    def __init__(self, fs: Any) -> None:
        self._fs = fs
        self.endpoint = str(getattr(fs, "endpoint_url", None) or fs.client_kwargs.get("endpoint_url") or "AWS S3")

    # --- plumbing ------------------------------------------------------------------------------------

    def run(self, work: Awaitable[T], key: str) -> T:
        """Run one coroutine on s3fs's loop; its failure comes back mapped (see :func:`_mapped`)."""

        async def guarded() -> T:
            return await work

        try:
            result: T = sync(self._fs.loop, guarded)
            return result
        except (PreconditionFailed, _ShortBodyError):
            raise
        except Exception as exc:
            raise _mapped(exc, self.endpoint, key) from None

    def call(self, method: str, key: str, **kwargs: Any) -> dict[str, Any]:
        """One S3 call by its botocore name."""
        result: dict[str, Any] = self.run(self._fs._call_s3(method, **kwargs), key)
        return result

    # --- the calls -----------------------------------------------------------------------------------

    def head(self, key: str) -> ObjectInfo | None:
        bucket, name = split_key(key)
        try:
            return _info(key, self.call("head_object", key, Bucket=bucket, Key=name))
        except BucketMissingError:
            raise
        except FileNotFoundError:
            return None

    def _head_version(self, key: str, version_id: str) -> ObjectInfo | None:
        bucket, name = split_key(key)
        try:
            return _info(key, self.call("head_object", key, Bucket=bucket, Key=name, VersionId=version_id))
        except BucketMissingError:
            raise
        except FileNotFoundError:
            return None

    def probe(self, heads: Sequence[str], prefixes: Sequence[str]) -> tuple[list[ObjectInfo | None], list[bool]]:
        limit = asyncio.Semaphore(32)

        async def head(key: str) -> ObjectInfo | None:
            bucket, name = split_key(key)
            async with limit:
                try:
                    return _info(key, await self._fs._call_s3("head_object", Bucket=bucket, Key=name))
                except FileNotFoundError:
                    return None

        async def occupied(prefix: str) -> bool:
            bucket, name = split_key(prefix)
            async with limit:
                page = await self._fs._call_s3("list_objects_v2", Bucket=bucket, Prefix=name, MaxKeys=1)
            return bool(page.get("KeyCount") or page.get("Contents"))

        async def every() -> tuple[list[ObjectInfo | None], list[bool]]:
            found = await asyncio.gather(*(head(key) for key in heads), *(occupied(p) for p in prefixes))
            infos = [item if isinstance(item, ObjectInfo) else None for item in found[: len(heads)]]
            return infos, [item is True for item in found[len(heads) :]]

        return self.run(every(), heads[0] if heads else prefixes[0] if prefixes else "")

    def list(
        self, prefix: str, *, recursive: bool, limit: int | None = None, start_after: str | None = None
    ) -> Iterator[ObjectInfo | str]:
        bucket, name = split_key(prefix)
        request: dict[str, Any] = {"Bucket": bucket, "Prefix": name}
        if not recursive:
            request["Delimiter"] = "/"
        if limit is not None:
            request["MaxKeys"] = limit
        if start_after is not None:
            request["StartAfter"] = split_key(start_after)[1]
        while True:
            page = self.call("list_objects_v2", prefix, **request)
            found: list[ObjectInfo | str] = [
                ObjectInfo(f"{bucket}/{item['Key']}", int(item["Size"]), str(item["ETag"]), item["LastModified"])
                for item in page.get("Contents", ())
            ]
            found += [f"{bucket}/{item['Prefix']}" for item in page.get("CommonPrefixes", ())]
            found.sort(key=lambda item: item if isinstance(item, str) else item.key)
            yield from found
            token = page.get("NextContinuationToken")
            if not page.get("IsTruncated") or not token or limit is not None:
                return
            request["ContinuationToken"] = token

    def get(
        self, key: str, start: int, length: int, *, if_match: str | None = None, version_id: str | None = None
    ) -> tuple[bytes | bytearray, ObjectInfo]:
        bucket, name = split_key(key)
        request: dict[str, Any] = {"Bucket": bucket, "Key": name, "Range": f"bytes={start}-{start + length - 1}"}
        if if_match is not None:
            request["IfMatch"] = if_match
        if version_id is not None:
            request["VersionId"] = version_id

        async def fetch() -> tuple[bytearray, dict[str, Any]]:
            response = await self._fs._call_s3("get_object", **request)
            body = response["Body"]
            # filled in place, piece by piece: reading the body whole would hold it twice (pieces, then joined)
            data = bytearray(int(response.get("ContentLength", 0)))
            filled = 0
            try:
                while filled < len(data):
                    piece = await body.read(min(_READ_PIECE_BYTES, len(data) - filled))
                    if not piece:
                        break
                    data[filled : filled + len(piece)] = piece
                    filled += len(piece)
            finally:
                body.close()
            if filled < len(data):
                raise _ShortBodyError(
                    errno.EIO, f"The object store at {self.endpoint} sent {filled} of {len(data)} bytes"
                )
            return data, response

        try:
            data, response = self.run(fetch(), key)
        except RangeNotSatisfiableError:
            info = self.head(key) if version_id is None else self._head_version(key, version_id)
            if info is None:  # a range past the end (an empty object, or reading at its end)
                raise FileNotFoundError(errno.ENOENT, "No such object", key) from None
            if if_match is not None and info.etag != if_match:
                raise PreconditionFailed("changed") from None
            return b"", info
        total = str(response.get("ContentRange", "")).rpartition("/")[2]
        return data, _info(key, response, size=int(total) if total.isdigit() else None)

    def put(
        self,
        key: str,
        data: bytes | bytearray | memoryview,
        *,
        content_id: str | None = None,
        if_match: str | None = None,
        if_none_match: bool = False,
    ) -> ObjectInfo:
        bucket, name = split_key(key)
        metadata = {CONTENT_ID_METADATA: content_id} if content_id else {}
        body = data if isinstance(data, bytes) else bytes(data)
        done = self.call(
            "put_object",
            key,
            Bucket=bucket,
            Key=name,
            Body=body,
            Metadata=metadata,
            **_conditions(if_match, if_none_match),
        )
        return _info(key, done, size=len(body))

    def start_upload(self, key: str) -> Upload:
        return _S3Upload(self, key)

    def copy(self, source: ObjectInfo, key: str, *, content_id: str | None) -> None:
        src_bucket, src_name = split_key(source.key)
        bucket, name = split_key(key)
        origin = {"Bucket": src_bucket, "Key": src_name}
        if source.version_id is not None:
            origin["VersionId"] = source.version_id
        metadata = {CONTENT_ID_METADATA: content_id} if content_id else {}
        if source.size <= _MAX_COPY_BYTES:
            self.call(
                "copy_object",
                key,
                Bucket=bucket,
                Key=name,
                CopySource=origin,
                CopySourceIfMatch=source.etag,
                MetadataDirective="REPLACE",
                Metadata=metadata,
            )
            return
        upload = self.call("create_multipart_upload", key, Bucket=bucket, Key=name, Metadata=metadata)
        parts: list[dict[str, Any]] = []
        try:
            for number, first in enumerate(range(0, source.size, _COPY_PART_BYTES), start=1):
                last = min(first + _COPY_PART_BYTES, source.size) - 1
                copied = self.call(
                    "upload_part_copy",
                    key,
                    Bucket=bucket,
                    Key=name,
                    UploadId=upload["UploadId"],
                    PartNumber=number,
                    CopySource=origin,
                    CopySourceIfMatch=source.etag,
                    CopySourceRange=f"bytes={first}-{last}",
                )
                parts.append({"ETag": copied["CopyPartResult"]["ETag"], "PartNumber": number})
            self.call(
                "complete_multipart_upload",
                key,
                Bucket=bucket,
                Key=name,
                UploadId=upload["UploadId"],
                MultipartUpload={"Parts": parts},
            )
        except BaseException:
            self.call("abort_multipart_upload", key, Bucket=bucket, Key=name, UploadId=upload["UploadId"])
            raise

    def delete(self, keys: Iterable[str]) -> None:
        self._delete((key, None) for key in keys)

    def _delete(self, targets: Iterable[tuple[str, str | None]]) -> None:
        """Delete objects (a version of one, where a version id is given) in batches of 1,000 per bucket."""
        by_bucket: dict[str, list[dict[str, str]]] = {}
        for key, version_id in targets:
            bucket, name = split_key(key)
            target = {"Key": name} if version_id is None else {"Key": name, "VersionId": version_id}
            by_bucket.setdefault(bucket, []).append(target)
        for bucket, objects in by_bucket.items():
            for start in range(0, len(objects), _DELETE_BATCH):
                batch = objects[start : start + _DELETE_BATCH]
                done = self.call(
                    "delete_objects",
                    f"{bucket}/{batch[0]['Key']}",
                    Bucket=bucket,
                    Delete={"Objects": batch, "Quiet": True},
                )
                failed = [e for e in done.get("Errors") or [] if e.get("Code") not in {"NoSuchVersion", "NoSuchKey"}]
                if failed:
                    raise OSError(
                        errno.EIO, f"The object store kept {len(failed)} object(s): {failed[0].get('Message')}"
                    )

    def bucket_exists(self, bucket: str) -> bool:
        try:
            self.call("head_bucket", bucket, Bucket=bucket)
        except FileNotFoundError:
            return False
        return True

    # --- kept versions -------------------------------------------------------------------------------

    def versioning(self, bucket: str) -> bool:
        return self.call("get_bucket_versioning", bucket, Bucket=bucket).get("Status") == "Enabled"

    def latest_versions(self, prefix: str) -> Iterator[ObjectInfo]:
        bucket, name = split_key(prefix)
        request: dict[str, Any] = {"Bucket": bucket, "Prefix": name}
        while True:
            page = self.call("list_object_versions", prefix, **request)
            deleted = {item["Key"] for item in page.get("DeleteMarkers", ()) if item.get("IsLatest")}
            for item in page.get("Versions", ()):
                if item.get("IsLatest") and item["Key"] not in deleted:
                    yield ObjectInfo(
                        f"{bucket}/{item['Key']}",
                        int(item["Size"]),
                        str(item["ETag"]),
                        item["LastModified"],
                        version_id=_version(item),
                    )
            if not page.get("IsTruncated"):
                return
            request["KeyMarker"] = page["NextKeyMarker"]
            request["VersionIdMarker"] = page["NextVersionIdMarker"]

    def versions_exist(self, versions: Sequence[tuple[str, str]]) -> builtins.list[bool]:
        limit = asyncio.Semaphore(32)

        async def kept(key: str, version_id: str) -> bool:
            bucket, name = split_key(key)
            async with limit:
                try:
                    await self._fs._call_s3("head_object", Bucket=bucket, Key=name, VersionId=version_id)
                except FileNotFoundError:
                    return False
                except Exception as exc:
                    found = _error_code(exc)
                    if found is not None and found[0] in {"NoSuchVersion", "InvalidArgument", "400", "405"}:
                        return False  # an unknown id, or a delete marker's
                    raise
            return True

        async def every() -> builtins.list[bool]:
            return builtins.list(await asyncio.gather(*(kept(key, version_id) for key, version_id in versions)))

        return self.run(every(), versions[0][0] if versions else "")

    def superseded_versions(self, prefix: str) -> Iterator[tuple[ObjectInfo, datetime]]:
        bucket, name = split_key(prefix)
        request: dict[str, Any] = {"Bucket": bucket, "Prefix": name}
        newer: tuple[str, datetime] | None = None  # the key and time of the version listed just before
        while True:
            page = self.call("list_object_versions", prefix, **request)
            items = [*page.get("Versions", ()), *page.get("DeleteMarkers", ())]
            # S3 lists a key's versions newest first, but versions and delete markers apart: merge them
            items.sort(key=lambda item: (item["Key"], not item.get("IsLatest"), -item["LastModified"].timestamp()))
            for item in items:
                key, modified = item["Key"], item["LastModified"]
                if not item.get("IsLatest") and newer is not None and newer[0] == key:
                    info = ObjectInfo(
                        f"{bucket}/{key}",
                        int(item.get("Size", 0)),
                        str(item.get("ETag", "")),
                        modified,
                        version_id=_version(item),
                    )
                    yield info, newer[1]
                newer = (key, modified)
            if not page.get("IsTruncated"):
                return
            request["KeyMarker"] = page["NextKeyMarker"]
            request["VersionIdMarker"] = page["NextVersionIdMarker"]

    def delete_versions(self, versions: Iterable[tuple[str, str]]) -> None:
        self._delete(versions)
