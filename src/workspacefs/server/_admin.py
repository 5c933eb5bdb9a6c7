"""``/v1/tokens``: token management for ``admin`` tokens (what ``workspacefs token`` does at a terminal).

A new token's secret is in the answer to its creation and nowhere else; revoking one is refused by every
process of the service from the next request on (``tokens.py`` keeps no cache).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated

from fastapi import APIRouter, Body, Path
from fastapi.responses import Response

from workspacefs.server._auth import Admin
from workspacefs.server._errors import ApiError, error_responses
from workspacefs.server._models import (
    AdminTokenRequest,
    AgentTokenRequest,
    CreatedToken,
    PolicyView,
    TokenList,
    TokenModel,
)
from workspacefs.server._service import ServiceDep
from workspacefs.server.tokens import TokenInfo

__all__ = ["router"]

router = APIRouter(prefix="/v1/tokens", tags=["tokens"])
TokenId = Annotated[str, Path(max_length=64, description="A token's id (from the list, never its secret)")]


def token_model(info: TokenInfo) -> TokenModel:
    """A token's JSON."""
    return TokenModel(
        id=info.token_id,
        agent_id=info.agent_id,
        scope=info.scope.value,
        label=info.label,
        created_at=info.created_at,
        expires_at=info.expires_at,
        rate_limit=info.rate_limit,
        policy=PolicyView(rules=info.policy["rules"]) if info.policy is not None else None,
        browser=info.browser,
    )


@router.get("", response_model=TokenList, responses=error_responses(), summary="List tokens")
async def list_tokens(*, _who: Admin, running: ServiceDep) -> TokenList:
    """Every token's record, oldest first (never a secret)."""
    return TokenList(data=[token_model(info) for info in await running.run(running.tokens.list)])


@router.post("", status_code=201, response_model=CreatedToken, responses=error_responses(), summary="Create a token")
async def create_token(
    *, body: Annotated[AgentTokenRequest | AdminTokenRequest, Body()], _who: Admin, running: ServiceDep
) -> CreatedToken:
    """A new token and its secret (shown only here). ``read`` and ``write`` tokens act for ``agent_id`` (or
    every agent without one); ``admin`` tokens act for every agent and manage tokens."""
    expires_in = timedelta(seconds=body.expires_in) if body.expires_in is not None else None

    def work() -> CreatedToken:
        secret, info = running.tokens.create(
            agent_id=body.agent_id,
            label=body.label,
            scope=body.scope,
            expires_in=expires_in,
            rate_limit=body.rate_limit,
            policy=body.policy.model_dump(exclude_none=True) if body.policy is not None else None,
        )
        return CreatedToken(token=secret, **token_model(info).model_dump())

    return await running.run(work)


@router.delete("/{token_id}", status_code=204, responses=error_responses(404), summary="Revoke a token")
async def revoke_token(*, token_id: TokenId, _who: Admin, running: ServiceDep) -> Response:
    """Revoke a token: every process of the service refuses it from the next request on."""
    if not await running.run(running.tokens.revoke, token_id):
        raise ApiError(404, "token_not_found", f"No token {token_id!r}")
    return Response(status_code=204)
