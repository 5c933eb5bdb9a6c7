"""URLs handed over by an attacker: a parameter given twice, a path that climbs out of where it seems to point,
and credentials that must never come back in a message."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import pytest
from click.testing import CliRunner

from workspacefs import open_filesystem
from workspacefs.cli import main
from workspacefs.server._storage import UrlSessions

SECRET = "hunter2-s3cr3t"


@pytest.mark.parametrize(
    "url",
    [
        "memory://?read_only=true&read_only=false",
        "sqlite:///{tmp}/twice.db?session=a&session=b",
        "file:///{tmp}?read_only=true&create=true&read_only=false",
        "composite://?/w=memory%3A%2F%2F&/w=memory%3A%2F%2F",
        "composite://?/w=" + quote("memory://?read_only=true&read_only=false", safe=""),
    ],
)
def test_a_parameter_given_twice_is_refused_not_decided_by_order(url: str, fast_tmp: Path) -> None:
    with pytest.raises(ValueError, match="more than once"):
        open_filesystem(url.format(tmp=fast_tmp))
    cli = CliRunner().invoke(main, ["ls", "--fs", url.format(tmp=fast_tmp)])
    assert cli.exit_code != 0 and "more than once" in cli.output


@pytest.mark.parametrize("climb", ["/../inner", "/.", "/%2e%2e/inner", "/.."])
def test_a_local_path_with_dot_segments_is_refused(climb: str, fast_tmp: Path) -> None:
    (fast_tmp / "inner").mkdir(exist_ok=True)
    (fast_tmp / "mounts.toml").write_text('[mounts]\n"/w" = "memory://"\n')
    with pytest.raises(ValueError, match=r"'\.' or '\.\.'"):
        open_filesystem(f"file://{fast_tmp}/inner{climb}")
    with pytest.raises(ValueError, match=r"'\.' or '\.\.'"):
        open_filesystem(f"composite://{fast_tmp}/inner{climb}/mounts.toml")


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://bob:{SECRET}@127.0.0.1:1/db",  # no session
        f"postgresql://bob:{SECRET}@127.0.0.1:1/db?session=a",  # nothing listens on port 1
        f"file://bob:{SECRET}@elsewhere/srv",
        f"memory://?bogus=1&secret={SECRET}",
        f"composite://?/w={quote(f'postgresql://bob:{SECRET}@127.0.0.1:1/db', safe='')}",
        f"sqlite:///x.db?session=a&agent=me&session=b&key={SECRET}",
    ],
)
def test_credentials_in_a_url_never_reach_a_message(url: str) -> None:
    with pytest.raises((ValueError, OSError)) as caught:
        open_filesystem(url)
    assert SECRET not in str(caught.value)
    cli = CliRunner().invoke(main, ["ls", "--fs", url])
    assert cli.exit_code != 0 and SECRET not in cli.output, cli.output
    with pytest.raises(ValueError) as refused:
        UrlSessions(url.replace("://", "ish://", 1))
    assert SECRET not in str(refused.value)


def test_a_sessions_root_is_checked_at_start_for_parameters_the_service_adds(fast_tmp: Path) -> None:
    with pytest.raises(ValueError, match="more than once"):
        UrlSessions(f"file://{fast_tmp}/{{agent}}/{{session}}?read_only=false&read_only=true")
    with pytest.raises(ValueError, match="agent= and session="):
        UrlSessions(f"composite://{fast_tmp}/mounts.toml?agent=me")
