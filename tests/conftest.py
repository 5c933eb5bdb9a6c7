"""Shared fixtures: where the host tests put their workspaces, and strictness about real services."""

from __future__ import annotations

import atexit
import gc
import itertools
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

REQUIRE_REAL = os.environ.get("WORKSPACEFS_REQUIRE_REAL_SERVICES") == "1"

TEST_CACHE = tempfile.mkdtemp(prefix="wsfs-test-cache-")
"""``XDG_CACHE_HOME`` of every test process (and of the processes it starts): the default snapshot directories,
journals and writer registries of the tests' host workspaces, not the user's cache. There they piled up (3.6 GB
over many runs on one machine), and, being found by the workspace's path, a later run whose temporary paths came
round again (pytest numbers them from 0 once its base is gone) met the state of an earlier run's workspace."""
os.environ["XDG_CACHE_HOME"] = TEST_CACHE
atexit.register(shutil.rmtree, TEST_CACHE, True)


def missing(what: str) -> None:
    """Skip for a missing real component, or fail when CI demands every component be real."""
    if REQUIRE_REAL:
        pytest.fail(f"{what} (WORKSPACEFS_REQUIRE_REAL_SERVICES=1 forbids skipping)")
    pytest.skip(what)


@pytest.fixture(scope="session")
def fast_tmp() -> Iterator[Path]:
    """A scratch directory on tmpfs when there is one, so fsync-heavy host tests run at memory speed."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
    directory = Path(tempfile.mkdtemp(prefix="wsfs-tests-", dir=base))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


_workspaces = itertools.count()


@pytest.fixture(params=["memory", "host", "sqlite"])
def three_backends(request: pytest.FixtureRequest, fast_tmp: Path) -> Iterator[Any]:
    """A fresh workspace on memory, a host directory and SQLite: the backends the tool-level tests run on."""
    from workspacefs import HostFilesystem, InMemoryFilesystem, SqlFilesystem

    n = next(_workspaces)
    if request.param == "memory":
        yield InMemoryFilesystem()
    elif request.param == "host":
        root = fast_tmp / f"workspace-{n}"
        root.mkdir()
        yield HostFilesystem(root, snapshot_dir=fast_tmp / f"snapshots-{n}")
    else:
        yield SqlFilesystem(f"sqlite:///{fast_tmp / 'workspaces.db'}", f"s{n}")


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real PostgreSQL server for the session: ``WORKSPACEFS_TEST_POSTGRES_URL``, or one started here
    from the machine's binaries."""
    from workspacefs.testing._postgres import postgres_binaries, running_postgres

    given = os.environ.get("WORKSPACEFS_TEST_POSTGRES_URL")
    if given:
        yield given
        return
    if postgres_binaries() is None:
        missing("PostgreSQL server binaries are not installed (apt-get install postgresql)")
    with running_postgres() as url:
        yield url


@pytest.fixture(scope="session")
def image() -> str:
    """The small container image the sandbox tests run (built once from Debian's busybox-static, on Podman)."""
    from workspacefs.testing._containers import busybox_image, podman_available

    if not podman_available():
        missing("Podman is not installed or does not answer (apt-get install podman runc)")
    try:
        return busybox_image()
    except FileNotFoundError as exc:
        missing(str(exc))
        raise


@pytest.fixture(scope="session")
def s3_server() -> Iterator[object]:
    """A real S3-compatible server (moto's, over HTTP on loopback) for the session, with one bucket made."""
    from workspacefs.testing._s3 import moto_available, running_s3

    if not moto_available():
        missing("moto's S3 server is not installed (pip install 'moto[server]')")
    try:
        with running_s3() as server:
            server.make_bucket("wsfs-tests")
            yield server
    except RuntimeError as exc:
        missing(f"moto's S3 server could not start: {exc}")


@pytest.fixture
def store(service_url: str) -> Iterator[Any]:
    """The service's database on ``service_url`` (a ``SqlStore``), closed after the test."""
    from workspacefs.backends.sql import SqlStore

    opened = SqlStore(service_url)
    yield opened
    opened.close()


@pytest.fixture
def anyio_backend() -> str:
    """Async tests run on asyncio (anyio's pytest plugin)."""
    return "asyncio"


@pytest.fixture(params=["sqlite", "postgresql"])
def service_url(request: pytest.FixtureRequest, fast_tmp: Path) -> str:
    """A database URL for the workspace service: a fresh SQLite file, or the shared real PostgreSQL."""
    if request.param == "sqlite":
        return f"sqlite:///{tempfile.mkdtemp(dir=fast_tmp)}/service.db"
    url: str = request.getfixturevalue("postgres_url")
    return url


@pytest.fixture(scope="module")
def xfs_mount(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A loop-mounted XFS image: the one filesystem here with reflinks (needs root and xfsprogs)."""
    base = tmp_path_factory.mktemp("xfs")
    image, mount = base / "xfs.img", base / "mnt"
    mount.mkdir()
    with open(image, "wb") as handle:
        handle.truncate(512 * 1024 * 1024)
    if shutil.which("mkfs.xfs") is None:
        missing("mkfs.xfs is not installed (apt-get install xfsprogs)")
    made = subprocess.run(["mkfs.xfs", "-q", str(image)], capture_output=True, check=False)
    if made.returncode != 0:
        missing(f"mkfs.xfs is not available ({made.stderr.decode().strip()[:200]}); apt-get install xfsprogs")
    mounted = subprocess.run(["mount", "-o", "loop", str(image), str(mount)], capture_output=True, check=False)
    if mounted.returncode != 0:
        missing(f"cannot loop-mount an XFS image: {mounted.stderr.decode().strip()[:200]}")
    try:
        yield mount
    finally:
        gc.collect()  # filesystems still referenced by finished tests hold descriptors on the mount
        if subprocess.run(["umount", str(mount)], capture_output=True, check=False).returncode != 0:
            subprocess.run(["umount", "--lazy", str(mount)], check=False)


def api_routes(routes: list[Any]) -> Iterator[Any]:
    """Every FastAPI ``APIRoute`` of an app, also inside included routers (newer FastAPI keeps one whole, as one
    route object); shared by the tests that read every route's declaration."""
    from fastapi.routing import APIRoute

    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        inner = getattr(route, "original_router", None)
        if inner is not None:
            yield from api_routes(inner.routes)


def migrate_to(store: Any, revision: str) -> None:
    """Run the migrations up to the head or down to ``revision`` as the store runs them (SQLite: foreign keys on, the
    writer's lock): the migration tests' one way to move a database between revisions."""
    from alembic import command

    from workspacefs.backends.sql._store import migration_config

    config = migration_config()
    with store.engine.connect().execution_options(wsfs_write=True) as connection, connection.begin():
        config.attributes["connection"] = connection
        if revision == "head":
            command.upgrade(config, revision)
        else:
            command.downgrade(config, revision)
