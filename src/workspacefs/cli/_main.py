"""``workspacefs`` command group and the service's commands: ``serve`` and ``db`` (``token``: ``_tokens.py``)."""

from __future__ import annotations

import ipaddress
import signal
import sys
import threading
from types import FrameType
from typing import NoReturn

import click

from workspacefs.cli import _browser, _files, _history, _tokens, _workspace
from workspacefs.cli._database import CONTENT_STORE_HELP, DB_HELP, open_store, redact
from workspacefs.cli._merge import merge
from workspacefs.cli._output import (
    EXIT_INVALID,
    create_option,
    current_policy,
    fail,
    load_policy,
    open_raw,
    policy_option,
)
from workspacefs.history import Actor, acting_as
from workspacefs.quota import Quota

__all__ = ["main"]


def is_loopback(host: str) -> bool:
    """True if ``host`` only accepts connections from this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _terminated(signum: int, _frame: FrameType | None) -> NoReturn:
    """SIGTERM unwinds like Ctrl-C does, so an unfinished write is rolled back and leaves no temporary file."""
    raise SystemExit(128 + signum)


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
4 exists, not empty or wrong kind; 5 not allowed; 6 invalid input;
7 address in use (serve: the port is taken)."""


class _Commands(click.Group):
    """The command group, which refuses an argument that is not text before any command sees it."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        """Python hands bytes of the command line that are not UTF-8 over as lone surrogates: a pattern, tag
        or id holding one failed deep inside a backend with a codec message (exit 1 for a snapshot tag)."""
        for arg in args:
            if any("\udc80" <= char <= "\udcff" for char in arg):
                fail(
                    EXIT_INVALID,
                    "invalid_argument",
                    f"the argument {arg!a} is not UTF-8 text (the shell passed bytes that are not); write it as UTF-8",
                )
        return super().parse_args(ctx, args)


@click.group(
    cls=_Commands,
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 110},
    epilog=EPILOG,
)
@click.version_option(package_name="workspacefs")
@click.option(
    "--as",
    "acting",
    envvar="WORKSPACEFS_ACTOR",
    metavar="NAME",
    help="Who the journal says made the changes (default: unnamed, via cli). Env: WORKSPACEFS_ACTOR.",
)
@click.pass_context
def main(context: click.Context, acting: str | None) -> None:
    """workspacefs: one filesystem for the tools of LLM agents.

    File commands work on any backend given by --fs URL: memory://, file:///dir,
    sqlite:///file.db?session=ID, postgresql://user@host/db?session=ID, podman://IMAGE
    (docker://IMAGE), s3://bucket/prefix, composite:///abs/mounts.toml. Add &agent=NAME to a SQL URL
    to open that agent's session of the service.
    Reading never creates a workspace: writing does, or --create.
    """
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminated)
    context.with_resource(acting_as(Actor(name=acting, via="cli")))


@main.command(short_help="Run the REST API and the web file browser.")
@click.option("--db", "db_url", metavar="URL", envvar="WORKSPACEFS_DB", help=DB_HELP)
@click.option(
    "--content-store", "content_store", metavar="URL", envvar="WORKSPACEFS_CONTENT_STORE", help=CONTENT_STORE_HELP
)
@click.option(
    "--sessions-root",
    "sessions_root",
    metavar="URL",
    envvar="WORKSPACEFS_SESSIONS_ROOT",
    help="Keep each session's files at this URL instead of in the database: file:///srv/agents (a directory "
    "per AGENT/SESSION), s3://bucket/prefix?…, or a URL (or composite:// layout) placing {agent} and {session}.",
)
@click.option(
    "--host", default="127.0.0.1", show_default=True, envvar="WORKSPACEFS_HOST", help="Interface to listen on."
)
@click.option(
    "--port",
    default=8765,
    show_default=True,
    type=click.IntRange(0, 65535),
    envvar="WORKSPACEFS_PORT",
    help="Port to listen on.",
)
@click.option("--no-auth", is_flag=True, help="Serve without bearer tokens (only allowed on a loopback host).")
@click.option("--log-level", default="info", show_default=True, type=click.Choice(["warning", "info", "debug"]))
@click.option(
    "--rate-limit",
    type=click.IntRange(min=0),
    help="Requests per minute for tokens without their own limit (0: none) [default: 1200]. Counted per process.",
)
@click.option(
    "--policy",
    "policy_name",
    default="default",
    show_default=True,
    metavar="default|none|FILE",
    help="The path policy of sessions without their own: the default protects agent configuration and secrets "
    "(ask rules wait for an admin's approval in the browser).",
)
@click.option(
    "--approval-timeout",
    type=click.FloatRange(min=1),
    default=120,
    show_default=True,
    help="Seconds a request waits for an admin's approval before it is refused.",
)
@click.option("--quota-bytes", type=click.IntRange(min=0), help="Most bytes one session may hold.")
@click.option("--quota-files", type=click.IntRange(min=0), help="Most files one session may hold.")
@click.option("--quota-file-bytes", type=click.IntRange(min=0), help="Largest file a session may hold, in bytes.")
def serve(
    *,
    db_url: str | None,
    sessions_root: str | None,
    content_store: str | None,
    host: str,
    port: int,
    no_auth: bool,
    log_level: str,
    rate_limit: int | None,
    policy_name: str,
    approval_timeout: float,
    quota_bytes: int | None,
    quota_files: int | None,
    quota_file_bytes: int | None,
) -> None:
    """Run the REST API and the web file browser.

    Every start with authentication prints a one-time sign-in link for a browser (later: workspacefs open).
    A port already in use exits 7 before anything starts."""
    try:
        from workspacefs.cli._browser import DEFAULT_URL, signin_link  # noqa: PLC0415
        from workspacefs.cli._serving import browsable_host, listen, run_uvicorn  # noqa: PLC0415
        from workspacefs.server import TokenStore, create_app  # noqa: PLC0415 - only this command needs the extra
        from workspacefs.server._app import DEFAULT_RATE_LIMIT  # noqa: PLC0415
    except ImportError as exc:
        raise click.ClickException(f"{exc}; install the server extra: pip install 'workspacefs[server]'") from None

    if no_auth and not is_loopback(host):
        raise click.UsageError(f"--no-auth is only allowed on a loopback host (127.0.0.1, ::1), not {host!r}")
    sock = listen(host, port)  # first: a busy port is one line and exit 7, before anything else happens
    port = int(sock.getsockname()[1])  # the port chosen for --port 0
    _check_sessions_root(sessions_root)
    store = open_store(db_url, content_store=content_store)
    url = db_url or store.url  # as the user wrote it (store.url names the driver: postgresql+psycopg://)
    reach = browsable_host(host)
    address = f"http://{f'[{reach}]' if ':' in reach else reach}:{port}/"
    click.echo(f"workspacefs: storage {store.dialect} at {redact(url)}", err=True)
    if sessions_root is not None:
        click.echo(f"workspacefs: each session's files under {redact(sessions_root).split('?', 1)[0]}", err=True)
    if store.content is not None:
        click.echo(f"workspacefs: chunks of {store.content.min_bytes} bytes or more in {store.content.root}", err=True)
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
        else:
            click.echo(
                "workspacefs: bearer tokens required (create one: workspacefs token create --agent ID)", err=True
            )
        click.echo(f"workspacefs: sign in at {signin_link(address, tokens.mint_signin())}", err=True)
        again = "workspacefs open" + (f" --db {redact(url)}" if db_url else "")
        again += f" --url {address}" if address != DEFAULT_URL else ""
        click.echo(f"workspacefs: that link works once, within 10 minutes; for another: {again}", err=True)
    click.echo(f"workspacefs: web file browser at {address}, API docs at {address}docs", err=True)
    policy = load_policy(policy_name).with_approver(None)  # the service asks its admins, not this terminal
    limits = (quota_bytes, quota_files, quota_file_bytes)
    quota = Quota(*limits) if any(limit is not None for limit in limits) else None
    app = create_app(
        store,
        auth=not no_auth,
        rate_limit=DEFAULT_RATE_LIMIT if rate_limit is None else rate_limit,
        policy=policy,
        approval_timeout=approval_timeout,
        quota=quota,
        sessions_root=sessions_root,
    )
    try:
        run_uvicorn(app, sock, host=host, log_level=log_level)
    finally:
        store.close()


def _check_sessions_root(sessions_root: str | None) -> None:
    """Refuse a ``--sessions-root`` no session could be kept at, before anything starts."""
    if sessions_root is None:
        return
    from workspacefs.server._storage import UrlSessions  # noqa: PLC0415 - the server extra

    try:
        UrlSessions(sessions_root)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--sessions-root") from None


@main.command("mcp", short_help="Serve the file tools to an MCP client over stdio.")
@click.option(
    "--fs", "fs_url", metavar="URL", envvar="WORKSPACEFS_FS", required=True, help="The workspace (URL forms below)."
)
@click.option("--read-only", is_flag=True, help="Offer only the tools that change nothing.")
@click.option("--tools", "tool_names", metavar="NAMES", help="Comma-separated tools to offer (default: all that fit).")
@create_option
@policy_option
def mcp_command(fs_url: str, read_only: bool, tool_names: str | None) -> None:
    """Serve the workspace's tools (ls, read_file, write_file, edit_file, glob, grep, rm, mkdir, mv, cp,
    stat, and snapshot/restore/diff where the backend snapshots) to an MCP client over stdio.

    \b
    --fs URL (or WORKSPACEFS_FS) names the workspace:
      memory://                             in memory, gone when the client stops
      file:///abs/dir                       a sandboxed host directory (?read_only=true)
      sqlite:///file.db?session=ID          a SQLite session (sqlite:////abs/file.db: absolute)
      postgresql://user@host/db?session=ID  a PostgreSQL session (postgres:// too)
      podman://IMAGE                        a new container, with run_command (docker:// too)
      s3://bucket/prefix?endpoint_url=URL   objects in S3 or any S3-compatible store (AWS credentials)
      composite:///abs/mounts.toml          several of these mounted at paths ([mounts] "/docs" = "URL")

    \b
    The client starts this command itself: give it absolute paths, for example
      claude mcp add workspacefs -- /abs/path/.venv/bin/workspacefs mcp --fs file:///abs/dir

    MCP roots from the client can narrow access to part of the workspace, never widen it. The policy's
    questions go to the client by elicitation where it offers that; otherwise they are refused.
    """
    try:
        from workspacefs.mcp import run_stdio  # noqa: PLC0415 - only this command needs the mcp extra
    except ImportError as exc:
        raise click.ClickException(f"{exc}; install the mcp extra: pip install 'workspacefs[mcp]'") from None
    names = [name.strip() for name in tool_names.split(",") if name.strip()] if tool_names else None
    fs = open_raw(fs_url, read_only="true") if read_only else open_raw(fs_url)  # one line and an exit code
    try:
        run_stdio(fs, read_only=read_only, tool_names=names, policy=current_policy())
    except ValueError as exc:  # a tool name that does not fit this workspace
        fail(EXIT_INVALID, "bad_tools", str(exc))


@main.group(short_help="Database maintenance.")
def db() -> None:
    """Database maintenance."""


@db.command("upgrade")
@click.option("--db", "db_url", metavar="URL", envvar="WORKSPACEFS_DB", help=DB_HELP)
def db_upgrade(db_url: str | None) -> None:
    """Apply schema migrations (also done automatically when the database is first opened)."""
    from workspacefs.server._tables import migrate_service  # noqa: PLC0415

    store = open_store(db_url)  # opening a store migrates its storage tables (and creates a SQLite file's directory)
    migrate_service(store)  # then the service's own tables
    store.close()
    click.echo(f"{redact(db_url or store.url)}: schema up to date", err=True)


@main.command("gc", short_help="Delete stored content no file or snapshot refers to.")
@click.option("--db", "db_url", metavar="URL", envvar="WORKSPACEFS_DB", help=DB_HELP)
@click.option(
    "--content-store", "content_store", metavar="URL", envvar="WORKSPACEFS_CONTENT_STORE", help=CONTENT_STORE_HELP
)
@click.option("--dry-run", is_flag=True, help="List what would be deleted; delete nothing.")
@click.option(
    "--grace",
    type=click.FloatRange(min=0),
    default=3600,
    show_default=True,
    help="Seconds: content written more recently is kept (a writer may be about to refer to it).",
)
def gc_command(db_url: str | None, content_store: str | None, dry_run: bool, grace: float) -> None:
    """Delete stored content that no file and no snapshot of any session refers to: chunk rows of the
    database, uploads abandoned longer than the grace period ago, and (with --content-store) chunk objects
    that no row names and that were written before the grace period.

    Safe while the service runs: objects are deleted under a lock every writer takes before it writes one,
    after checking again that nothing names them. Prints each object deleted (or, with --dry-run, each that
    would be) and a summary line."""
    from datetime import timedelta  # noqa: PLC0415

    store = open_store(db_url, create=False, content_store=content_store)
    try:
        report = store.collect(grace=timedelta(seconds=grace), dry_run=dry_run)
    except (ConnectionError, PermissionError, OSError) as exc:
        click.echo(f"workspacefs: gc: {exc}", err=True)
        sys.exit(1)
    finally:
        store.close()
    for key in report.objects:
        click.echo(key)
    verb = "would delete" if dry_run else "deleted"
    where = "" if store.content is None else f" and {len(report.objects)} object(s) from {store.content.root}"
    click.echo(f"workspacefs: gc {verb} {report.chunks} chunk row(s){where}", err=True)


_browser.register(main)
_files.register(main)
_tokens.register(main)
_workspace.register(main)
_history.register(main)
main.add_command(merge)


if __name__ == "__main__":  # pragma: no cover - python -m workspacefs.cli._main
    sys.exit(main())
