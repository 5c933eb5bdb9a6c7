"""``workspacefs token create|list|revoke``: the service's bearer tokens, at a terminal.

A token acts for one agent (``--agent``) or every agent (``--all-agents``), with a scope: ``read``,
``write`` (the default for one agent) or ``admin`` (the default for every agent; it manages tokens).
"""

from __future__ import annotations

import re
from datetime import timedelta

import click

from workspacefs.cli._database import DB_HELP, open_store

__all__ = ["parse_duration", "register"]

_DURATION = re.compile(r"^\s*(\d+)\s*([smhdw]?)\s*$")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> timedelta:
    """``90s``, ``15m``, ``12h``, ``30d``, ``2w`` or plain seconds, as a positive duration."""
    found = _DURATION.match(text.lower())
    if found is None or int(found.group(1)) <= 0:
        raise click.BadParameter(f"{text!r} is not a duration such as 3600, 90s, 15m, 12h, 30d or 2w")
    return timedelta(seconds=int(found.group(1)) * _UNITS[found.group(2)])


class _Duration(click.ParamType[timedelta]):
    name = "DURATION"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> timedelta:
        if isinstance(value, timedelta):
            return value
        return parse_duration(str(value))


@click.group(short_help="Create, list and revoke API tokens.")
def token() -> None:
    """Create, list and revoke the service's bearer tokens."""


@token.command("create")
@click.option("--agent", "agent_id", metavar="ID", help="The agent whose sessions the token may use.")
@click.option("--all-agents", is_flag=True, help="A token for every agent (instead of --agent).")
@click.option(
    "--scope",
    type=click.Choice(["read", "write", "admin"]),
    help="read: look only; write: also change files, snapshots and sessions; admin: also manage tokens "
    "(every agent only). Default: write with --agent, admin with --all-agents.",
)
@click.option("--expires-in", "--ttl", "expires_in", type=_Duration(), help="Expire after 3600, 90s, 15m, 12h, 30d…")
@click.option("--rate-limit", type=click.IntRange(min=0), help="Requests per minute (0: none; default: the server's).")
@click.option("--label", help="A note to recognise the token by.")
@click.option(
    "--policy",
    "policy_file",
    metavar="FILE",
    type=click.Path(exists=True, dir_okay=False),
    help="The token's own path policy (JSON or TOML), checked after its session's: both must allow.",
)
@click.option("--db", "db_url", metavar="URL", envvar="WORKSPACEFS_DB", help=DB_HELP)
def token_create(
    *,
    agent_id: str | None,
    all_agents: bool,
    scope: str | None,
    expires_in: timedelta | None,
    rate_limit: int | None,
    label: str | None,
    policy_file: str | None,
    db_url: str | None,
) -> None:
    """Create a token and print its secret (shown only once; only its hash is stored)."""
    from workspacefs.policy import Policy  # noqa: PLC0415
    from workspacefs.server import TokenStore  # noqa: PLC0415

    try:
        policy = Policy.load(policy_file).to_dict() if policy_file is not None else None
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--policy") from None

    if bool(agent_id) == all_agents:
        raise click.UsageError("Give exactly one of --agent ID or --all-agents")
    if scope == "admin" and agent_id:
        raise click.UsageError("An admin token manages every agent's tokens: use --all-agents with --scope admin")
    store = open_store(db_url)
    try:
        secret, info = TokenStore(store).create(
            agent_id=agent_id, label=label, scope=scope, expires_in=expires_in, rate_limit=rate_limit, policy=policy
        )
    finally:
        store.close()
    who = f"agent {info.agent_id}" if info.agent_id else "every agent"
    until = f", expires {info.expires_at:%Y-%m-%d %H:%M} UTC" if info.expires_at else ""
    click.echo(f"token {info.token_id} ({info.scope.value}) for {who}{until}:", err=True)
    click.echo(secret)


@token.command("list")
@click.option("--db", "db_url", metavar="URL", envvar="WORKSPACEFS_DB", help=DB_HELP)
def token_list(db_url: str | None) -> None:
    """List tokens: id, agent (* for every agent), scope, created, expires, requests per minute, label."""
    from workspacefs.server import TokenStore  # noqa: PLC0415

    store = open_store(db_url, create=False)
    try:
        for info in TokenStore(store).list():
            expires = f"{info.expires_at:%Y-%m-%d %H:%M}" if info.expires_at else "never"
            rate = "default" if info.rate_limit is None else str(info.rate_limit or "unlimited")
            click.echo(
                f"{info.token_id}\t{info.agent_id or '*'}\t{info.scope.value}\t{info.created_at:%Y-%m-%d %H:%M}"
                f"\t{expires}\t{rate}\t{info.label or ''}"
            )
    finally:
        store.close()


@token.command("revoke")
@click.argument("token_id")
@click.option("--db", "db_url", metavar="URL", envvar="WORKSPACEFS_DB", help=DB_HELP)
def token_revoke(token_id: str, db_url: str | None) -> None:
    """Revoke a token by id: every running service refuses it from its next request on."""
    from workspacefs.server import TokenStore  # noqa: PLC0415

    store = open_store(db_url, create=False)
    try:
        found = TokenStore(store).revoke(token_id)
    finally:
        store.close()
    if not found:
        raise click.ClickException(f"No token {token_id}")
    click.echo(f"revoked {token_id}", err=True)


def register(main: click.Group) -> None:
    """Add the ``token`` group to the ``workspacefs`` command."""
    main.add_command(token)
