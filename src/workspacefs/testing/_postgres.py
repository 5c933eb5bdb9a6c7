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
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PostgresServer", "create_database", "postgres_binaries", "postgres_server", "running_postgres"]


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


@dataclass
class PostgresServer:
    """A running throwaway server: its URL, and stop/start for tests of an outage."""

    url: str
    _control: Callable[[str], None]

    def stop(self) -> None:
        """Stop the server at once (``immediate``: like a crash, connections are cut)."""
        self._control("stop")

    def start(self) -> None:
        """Start it again on the same port, with the same data."""
        self._control("start")


@contextmanager
def postgres_server(database: str = "wsfs_test") -> Iterator[PostgresServer]:
    """Start a server on a free loopback port with trust auth; yield it; stop and delete it."""
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

    options = f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=300"

    def control(action: str) -> None:
        if action == "stop":
            run(str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop")
        else:
            run(str(binaries / "pg_ctl"), "-D", str(data), "-o", options, "-l", str(base / "server.log"), "-w", "start")

    try:
        run(str(binaries / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "--no-sync", "-E", "UTF8")
        control("start")
        run(str(binaries / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", database)
        yield PostgresServer(f"postgresql://postgres@127.0.0.1:{port}/{database}", control)
    finally:
        if data.exists():
            subprocess.run(
                [str(binaries / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"],
                capture_output=True,
                user=user,
                check=False,
            )
        shutil.rmtree(base, ignore_errors=True)


def create_database(server_url: str, name: str) -> str:
    """Make a new, empty database ``name`` on the server at ``server_url``; return its URL."""
    import sqlalchemy as sa  # noqa: PLC0415 - the sql extra

    from workspacefs.backends.sql import engine_url  # noqa: PLC0415

    engine = sa.create_engine(engine_url(server_url)[0], isolation_level="AUTOCOMMIT")
    with engine.connect() as connection:
        connection.exec_driver_sql(f"CREATE DATABASE {name}")
    engine.dispose()
    return sa.engine.make_url(server_url).set(database=name).render_as_string(hide_password=False)


@contextmanager
def throwaway_database(server_url: str, prefix: str) -> Iterator[str]:
    """A new database on the server at ``server_url`` (named ``prefix`` and a random suffix) for a test that changes
    its schema; its URL; dropped after, connections still open to it or not."""
    import sqlalchemy as sa  # noqa: PLC0415 - the sql extra

    from workspacefs.backends.sql import engine_url  # noqa: PLC0415

    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    url = create_database(server_url, name)
    try:
        yield url
    finally:
        engine = sa.create_engine(engine_url(server_url)[0], isolation_level="AUTOCOMMIT")
        with engine.connect() as connection:
            connection.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        engine.dispose()


@contextmanager
def running_postgres(database: str = "wsfs_test") -> Iterator[str]:
    """Start a server on a free loopback port with trust auth; yield its URL; stop and delete it."""
    with postgres_server(database) as server:
        yield server.url
