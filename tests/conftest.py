"""Shared fixtures: where the host tests put their workspaces, and strictness about real services."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

REQUIRE_REAL = os.environ.get("WORKSPACEFS_REQUIRE_REAL_SERVICES") == "1"


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


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _postgres_bin() -> Path | None:
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    found = [c for c in candidates if (c / "initdb").exists() and (c / "pg_ctl").exists()]
    if found:
        return found[0]
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A real PostgreSQL server for the session: ``WORKSPACEFS_TEST_POSTGRES_URL``, or one started here
    from the machine's binaries (as the ``postgres`` user when the tests run as root)."""
    import pwd
    import subprocess

    given = os.environ.get("WORKSPACEFS_TEST_POSTGRES_URL")
    if given:
        yield given
        return
    binaries = _postgres_bin()
    if binaries is None:
        missing("PostgreSQL server binaries are not installed (apt-get install postgresql)")
    base = Path(tempfile.mkdtemp(prefix="wsfs-pg-"))
    data, sockets, port = base / "data", base / "sockets", _free_port()
    sockets.mkdir()
    user: str | None = None
    if os.geteuid() == 0:  # PostgreSQL refuses to run as root
        user = "postgres"
        owner = pwd.getpwnam(user)
        os.chown(base, owner.pw_uid, owner.pw_gid)
        os.chown(sockets, owner.pw_uid, owner.pw_gid)

    def run(*command: str) -> None:
        subprocess.run(command, check=True, capture_output=True, user=user)

    run(str(binaries / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
    options = f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300"
    run(str(binaries / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(base / "server.log"), "-w", "start")
    try:
        run(str(binaries / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "wsfs_test")
        yield f"postgresql://postgres@127.0.0.1:{port}/wsfs_test"
    finally:
        subprocess.run(
            [str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
            capture_output=True,
            user=user,
            check=False,
        )
        shutil.rmtree(base, ignore_errors=True)
