"""``workspacefs`` command group and the service's commands: ``serve``, ``token``, ``db``."""

from __future__ import annotations

import ipaddress
import sys
from typing import Any

import click

from workspacefs.cli import _files, _workspace

__all__ = ["main"]

DB_HELP = "Database URL: sqlite:///path/file.db or postgresql://user@host/db (default: a SQLite file in your data dir)."


def _store(url: str | None) -> Any:
    """The service's database (``SqlStore``), importing the ``sql`` extra only when a command needs it."""
    try:
        from workspacefs.backends.sql import SqlStore, default_database  # noqa: PLC0415 - the sql extra
    except ImportError as exc:
        raise click.ClickException(f"{exc}; install the sql extra: pip install 'workspacefs[sql]'") from None
    return SqlStore(url or default_database())


def is_loopback(host: str) -> bool:
    """True if ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


EPILOG = """\b
Examples:
  workspacefs serve                                   the REST API and web browser on SQLite
  export WORKSPACEFS_FS=file:///srv/agent-workspace   (or pass --fs URL to each command)
  echo 'print(1)' | workspacefs write src/app.py
  workspacefs grep 'def \\w+' --glob '*.py' --json
  workspacefs export --fs file:///srv/ws | workspacefs import --fs 'sqlite:///ws.db?session=a'
  workspacefs mcp --fs file:///srv/agent-workspace     tools for an MCP client, over stdio

\b
Exit codes: 0 ok; 1 failed (grep: no match); 2 bad usage; 3 not found;
4 exists, not empty or wrong kind; 5 not allowed; 6 invalid input."""


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110}, epilog=EPILOG)
@click.version_option(package_name="workspacefs")
def main() -> None:
    """workspacefs: one filesystem for the tools of LLM agents.

    File commands work on any backend given by --fs URL: memory://, file:///dir,
    sqlite:///file.db?session=ID, postgresql://user@host/db?session=ID.
    """


@main.command(short_help="Run the REST API and the web file browser.")
@click.option("--db", "db_url", metavar="URL", help=DB_HELP)
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option("--port", default=8765, show_default=True, type=click.IntRange(0, 65535), help="Port to listen on.")
@click.option("--no-auth", is_flag=True, help="Serve without bearer tokens (only allowed on a loopback host).")
@click.option("--log-level", default="info", show_default=True, type=click.Choice(["warning", "info", "debug"]))
def serve(db_url: str | None, host: str, port: int, no_auth: bool, log_level: str) -> None:
    """Run the REST API and the web file browser."""
    try:
        import uvicorn  # noqa: PLC0415 - only this command needs the server extra

        from workspacefs.server import TokenStore, create_app  # noqa: PLC0415
    except ImportError as exc:
        raise click.ClickException(f"{exc}; install the server extra: pip install 'workspacefs[server]'") from None

    if no_auth and not is_loopback(host):
        raise click.UsageError(f"--no-auth is only allowed on a loopback host (127.0.0.1, ::1), not {host!r}")
    store = _store(db_url)
    url = store.url
    shown_host = f"[{host}]" if ":" in host else host
    address = f"http://{shown_host}:{port}/"
    click.echo(f"workspacefs: storage {store.dialect} at {_redact(url)}", err=True)
    if no_auth:
        click.secho(
            f"WARNING: authentication is OFF. Anyone who can connect to {address} can read and change every session.",
            fg="yellow",
            err=True,
        )
    else:
        tokens = TokenStore(store)
        if not tokens.list():
            secret, _ = tokens.create(agent_id=None, label="first start (admin)")
            click.echo("workspacefs: no tokens existed, so an admin token was created (shown only now):", err=True)
            click.echo(f"    {secret}", err=True)
            click.echo(f"workspacefs: open {address}#token={secret}", err=True)
        else:
            click.echo(
                "workspacefs: bearer tokens required (create one: workspacefs token create --agent ID)", err=True
            )
    click.echo(f"workspacefs: web file browser at {address}, API docs at {address}docs", err=True)
    app = create_app(store, auth=not no_auth)
    uvicorn.run(app, host=host, port=port, log_level=log_level, access_log=log_level == "debug")
    store.close()


def _redact(url: str) -> str:
    """A URL fit for a log line: the password hidden."""
    import sqlalchemy as sa  # noqa: PLC0415

    return sa.engine.make_url(url).render_as_string(hide_password=True)


@main.command("mcp", short_help="Serve the file tools to an MCP client over stdio.")
@click.option("--fs", "fs_url", metavar="URL", envvar="WORKSPACEFS_FS", required=True, help="The workspace URL.")
@click.option("--read-only", is_flag=True, help="Offer only the tools that change nothing.")
@click.option("--tools", "tool_names", metavar="NAMES", help="Comma-separated tools to offer (default: all that fit).")
def mcp_command(fs_url: str, read_only: bool, tool_names: str | None) -> None:
    """Serve the workspace's tools (ls, read_file, write_file, edit_file, glob, grep, rm, mkdir, mv, cp,
    stat, and snapshot/restore/diff where the backend snapshots) to an MCP client over stdio.

    MCP roots from the client can narrow access to part of the workspace, never widen it.
    """
    try:
        from workspacefs.mcp import run_stdio  # noqa: PLC0415 - only this command needs the mcp extra
    except ImportError as exc:
        raise click.ClickException(f"{exc}; install the mcp extra: pip install 'workspacefs[mcp]'") from None
    names = [name.strip() for name in tool_names.split(",") if name.strip()] if tool_names else None
    try:
        run_stdio(fs_url, read_only=read_only, tool_names=names)
    except (ValueError, ImportError) as exc:
        raise click.UsageError(str(exc)) from None


@main.group(short_help="Create, list and revoke API tokens.")
def token() -> None:
    """Create, list and revoke the service's bearer tokens."""


@token.command("create")
@click.option("--agent", "agent_id", metavar="ID", help="The agent whose sessions the token may use.")
@click.option("--all-agents", is_flag=True, help="An admin token for every agent (instead of --agent).")
@click.option("--label", help="A note to recognise the token by.")
@click.option("--db", "db_url", metavar="URL", help=DB_HELP)
def token_create(agent_id: str | None, all_agents: bool, label: str | None, db_url: str | None) -> None:
    """Create a token and print its secret (shown only once; only its hash is stored)."""
    from workspacefs.server import TokenStore  # noqa: PLC0415

    if bool(agent_id) == all_agents:
        raise click.UsageError("Give exactly one of --agent ID or --all-agents")
    store = _store(db_url)
    secret, info = TokenStore(store).create(agent_id=agent_id, label=label)
    store.close()
    scope = f"agent {info.agent_id}" if info.agent_id else "every agent"
    click.echo(f"token {info.token_id} for {scope}:", err=True)
    click.echo(secret)


@token.command("list")
@click.option("--db", "db_url", metavar="URL", help=DB_HELP)
def token_list(db_url: str | None) -> None:
    """List tokens (ids, scopes and labels; never secrets)."""
    from workspacefs.server import TokenStore  # noqa: PLC0415

    store = _store(db_url)
    for info in TokenStore(store).list():
        scope = info.agent_id or "*"
        click.echo(f"{info.token_id}\t{scope}\t{info.created_at:%Y-%m-%d %H:%M}\t{info.label or ''}")
    store.close()


@token.command("revoke")
@click.argument("token_id")
@click.option("--db", "db_url", metavar="URL", help=DB_HELP)
def token_revoke(token_id: str, db_url: str | None) -> None:
    """Revoke a token by id (running services stop accepting it within seconds)."""
    from workspacefs.server import TokenStore  # noqa: PLC0415

    store = _store(db_url)
    found = TokenStore(store).revoke(token_id)
    store.close()
    if not found:
        raise click.ClickException(f"No token {token_id}")
    click.echo(f"revoked {token_id}", err=True)


@main.group(short_help="Database maintenance.")
def db() -> None:
    """Database maintenance."""


@db.command("upgrade")
@click.option("--db", "db_url", metavar="URL", help=DB_HELP)
def db_upgrade(db_url: str | None) -> None:
    """Apply schema migrations (also done automatically when the database is first opened)."""
    from workspacefs.server._tables import migrate_service  # noqa: PLC0415

    store = _store(db_url)  # opening a store migrates its storage tables (and creates a SQLite file's directory)
    migrate_service(store)  # then the service's own tables
    store.close()
    click.echo(f"{_redact(store.url)}: schema up to date", err=True)


_files.register(main)
_workspace.register(main)


if __name__ == "__main__":  # pragma: no cover - python -m workspacefs.cli._main
    sys.exit(main())
