"""A throwaway PostgreSQL server from the machine's binaries, for tests and benchmarks.

PostgreSQL refuses to run as root, so under root the server runs as the ``postgres`` user.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["postgres_binaries", "running_postgres"]


def postgres_binaries() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl``, newest version first; ``None`` if absent."""
    candidates = sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    found = [c for c in candidates if (c / "initdb").exists() and (c / "pg_ctl").exists()]
    if found:
        return found[0]
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def running_postgres(database: str = "wsfs_test") -> Iterator[str]:
    """Start a server on a free loopback port with trust auth; yield its URL; stop and delete it."""
    binaries = postgres_binaries()
    if binaries is None:
        raise FileNotFoundError("PostgreSQL server binaries are not installed (apt-get install postgresql)")
    base = Path(tempfile.mkdtemp(prefix="wsfs-pg-"))
    data, sockets, port = base / "data", base / "sockets", _free_port()
    sockets.mkdir()
    user: str | None = None
    if os.geteuid() == 0:
        user = "postgres"
        owner = pwd.getpwnam(user)
        for path in (base, sockets):
            os.chown(path, owner.pw_uid, owner.pw_gid)

    def run(*command: str) -> None:
        subprocess.run(command, check=True, capture_output=True, user=user)

    try:
        run(str(binaries / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
        options = f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300"
        run(str(binaries / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(base / "server.log"), "-w", "start")
        run(str(binaries / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", database)
        yield f"postgresql://postgres@127.0.0.1:{port}/{database}"
    finally:
        if data.exists():
            subprocess.run(
                [str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                capture_output=True,
                user=user,
                check=False,
            )
        shutil.rmtree(base, ignore_errors=True)
