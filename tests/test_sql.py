"""SqlFilesystem on SQLite and on a real PostgreSQL server, through the whole conformance suite."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import ClassVar

import pytest

from workspacefs import SqlFilesystem, SqlStore
from workspacefs.protocol import Filesystem
from workspacefs.quota import Quota
from workspacefs.testing import FilesystemValidationSuite

_sessions = itertools.count()


class SqlFactory:
    """A filesystem per test on one store per class; every filesystem is a fresh session."""

    store: SqlStore
    stores: ClassVar[dict[str, SqlStore]] = {}
    url_fixture: ClassVar[str] = "sqlite_url"

    @pytest.fixture(autouse=True)
    def _store(self, request: pytest.FixtureRequest) -> Iterator[None]:
        url = request.getfixturevalue(self.url_fixture)
        if url not in SqlFactory.stores:
            SqlFactory.stores[url] = SqlStore(url)
        self.store = SqlFactory.stores[url]
        yield

    def create_filesystem(self, *, read_only: bool = False, mount_point: str | None = None) -> Filesystem:
        return SqlFilesystem(self.store, f"s{next(_sessions)}", read_only=read_only, mount_point=mount_point)

    def create_filesystem_with_quota(self, quota: Quota) -> Filesystem:
        return SqlFilesystem(self.store, f"s{next(_sessions)}", quota=quota)

    def create_read_only_filesystem(self, files: Mapping[str, bytes], *, mount_point: str | None = None) -> Filesystem:
        session = f"s{next(_sessions)}"
        writable = SqlFilesystem(self.store, session)
        for path, data in files.items():
            writable.write_bytes(path, data)
        return SqlFilesystem(self.store, session, read_only=True, mount_point=mount_point)


@pytest.fixture(scope="session")
def sqlite_url(fast_tmp: Path) -> str:
    return f"sqlite:///{fast_tmp / 'suite.db'}"


class TestSqlite(SqlFactory, FilesystemValidationSuite):
    model_examples = 40


class TestPostgres(SqlFactory, FilesystemValidationSuite):
    url_fixture = "postgres_url"
    model_examples = 30
