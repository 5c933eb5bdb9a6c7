"""A throwaway S3-compatible server (moto's standalone server) on a free loopback port, for tests and benchmarks.

The server is a separate process speaking real HTTP, so every request goes through s3fs, botocore and a
socket exactly as it would to S3; it keeps its objects in its own memory and is gone when it stops.
"""

from __future__ import annotations

import importlib.util
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["S3Server", "moto_available", "running_s3"]

_START_BUDGET_SECONDS = 60.0
"""Only a server that cannot start uses this up."""


@dataclass(frozen=True, slots=True)
class S3Server:
    """Where the server listens and the credentials it accepts (any; these are the ones the tests send)."""

    endpoint_url: str
    key: str = "testing"
    secret: str = "testing"
    region: str = "us-east-1"

    def url(self, bucket: str, prefix: str = "", **options: str) -> str:
        """An ``s3://`` URL for ``open_filesystem`` naming this server and its credentials."""
        query = {"endpoint_url": self.endpoint_url, "key": self.key, "secret": self.secret, "region": self.region}
        query.update(options)
        path = f"{bucket}/{prefix}".rstrip("/")
        return f"s3://{path}?" + "&".join(f"{name}={value}" for name, value in query.items())

    def filesystem(self) -> object:
        """A fresh ``s3fs.S3FileSystem`` for this server (not one from fsspec's instance cache)."""
        import s3fs  # noqa: PLC0415 - the s3 extra

        return s3fs.S3FileSystem(
            key=self.key,
            secret=self.secret,
            endpoint_url=self.endpoint_url,
            client_kwargs={"region_name": self.region},
            skip_instance_cache=True,
        )

    def make_bucket(self, name: str, *, versioned: bool = False) -> None:
        """Create a bucket (boto3, in us-east-1: the location constraint s3fs sends is refused by moto), with
        versioning on if asked."""
        import boto3  # noqa: PLC0415 - a dev dependency

        client = boto3.client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.key,
            aws_secret_access_key=self.secret,
            region_name=self.region,
        )
        client.create_bucket(Bucket=name)
        if versioned:
            client.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})


def moto_available() -> bool:
    """True if ``moto[server]`` is installed."""
    return importlib.util.find_spec("moto") is not None and importlib.util.find_spec("flask") is not None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except urllib.error.HTTPError:
        return True  # any HTTP answer means it is serving
    except OSError:
        return False


@contextmanager
def running_s3(port: int | None = None) -> Iterator[S3Server]:
    """Start moto's S3 server on ``port`` (default: a free one) of 127.0.0.1, yield it, and stop it. A fixed
    port lets a test stop the server and bring it back where its clients look (it comes back empty)."""
    if not moto_available():
        raise FileNotFoundError("moto's server is not installed (pip install 'moto[server]')")
    port = _free_port() if port is None else port
    endpoint = f"http://127.0.0.1:{port}"
    # the server logs every request: a pipe nobody reads would fill up and block it, so it logs to a file
    with tempfile.TemporaryFile() as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
        try:
            deadline = time.monotonic() + _START_BUDGET_SECONDS
            while not _answers(endpoint + "/"):
                if process.poll() is not None:
                    log.seek(0)
                    error = log.read().decode(errors="replace")[-500:]
                    raise RuntimeError(f"moto's S3 server exited at start: {error}")
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"moto's S3 server did not answer on {endpoint} within {_START_BUDGET_SECONDS} s"
                    )
                time.sleep(0.1)
            yield S3Server(endpoint)
        finally:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
