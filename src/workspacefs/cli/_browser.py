"""``workspacefs open``: sign a web browser in to a running service, with a one-time link minted in its database.

The link carries a sign-in code in its fragment (``#signin=…``), which browsers never send to a server: the
page posts it to ``/v1/signin`` and gets an ``HttpOnly`` cookie, so the code reaches no log and no history.
"""

from __future__ import annotations

import urllib.error
import urllib.request
import webbrowser
from urllib.parse import urlsplit, urlunsplit

import click

from workspacefs.cli._database import DB_HELP, open_store

__all__ = ["DEFAULT_URL", "register", "service_address", "signin_link"]

DEFAULT_URL = "http://127.0.0.1:8765/"
"""Where ``workspacefs serve`` listens unless told otherwise."""


def service_address(url: str) -> str:
    """``url`` as the service's base address (``http(s)://host[:port]/…/``), or ``BadParameter``."""
    parts = urlsplit(url.strip())
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise click.BadParameter(f"{url!r} is not an http:// or https:// address such as {DEFAULT_URL}")
    path = parts.path if parts.path.endswith("/") else parts.path + "/"
    return urlunsplit((parts.scheme, parts.netloc, path, "", ""))


def signin_link(address: str, code: str) -> str:
    """The page at ``address`` with a sign-in code in its fragment (which no browser sends to a server)."""
    return f"{address}#signin={code}"


def _answers(address: str) -> bool:
    """True if a workspacefs service answers at ``address`` (its OpenAPI document), within two seconds."""
    try:
        with urllib.request.urlopen(address + "openapi.json", timeout=2):  # noqa: S310 - http(s) checked above
            return True
    except (urllib.error.URLError, OSError, ValueError):
        return False


@click.command("open", short_help="Sign a web browser in to the running service.")
@click.option(
    "--db", "db_url", metavar="URL", envvar="WORKSPACEFS_DB", help=DB_HELP + " Give the --db the service runs on."
)
@click.option(
    "--url",
    "url",
    metavar="URL",
    default=DEFAULT_URL,
    show_default=True,
    help="The service's address (as workspacefs serve printed).",
)
@click.option("--no-browser", is_flag=True, help="Print the link only (for a browser on another machine).")
def open_command(db_url: str | None, url: str, no_browser: bool) -> None:
    """Mint a one-time sign-in link (it works once, within 10 minutes) in the service's database, print it,
    and open it in a web browser. The browser then stays signed in for 12 hours (a cookie), in every tab.

    Run it where the service's database is, with the same --db (an admin's sign-in: it can do everything).
    """
    address = service_address(url)
    from workspacefs.server.tokens import TokenStore  # noqa: PLC0415 - the sql extra

    store = open_store(db_url, create=False)  # a typo in --db is exit 3, not a new database nobody serves
    try:
        code = TokenStore(store).mint_signin()
    finally:
        store.close()
    link = signin_link(address, code)
    click.echo("workspacefs: sign-in link (works once, within 10 minutes):", err=True)
    click.echo(link)
    if not _answers(address):
        click.echo(f"workspacefs: nothing answers at {address} yet: start it with workspacefs serve", err=True)
    if no_browser:
        return
    if not webbrowser.open(link):
        click.echo("workspacefs: no web browser found here: open the link above in one", err=True)


def register(main: click.Group) -> None:
    """Add ``open`` to the ``workspacefs`` command."""
    main.add_command(open_command)
