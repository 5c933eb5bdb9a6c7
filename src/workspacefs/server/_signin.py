"""``/v1/signin``: a browser signs in once and then holds an ``HttpOnly`` cookie instead of a token.

``POST`` redeems a one-time code (the ``#signin=`` link ``workspacefs serve`` and ``workspacefs open`` print)
or a bearer token, and sets a cookie holding a new short-lived browser token (``tokens.py``) with the rights of
what was redeemed; ``GET`` says who the request is signed in as; ``DELETE`` signs the browser out (revoking the
cookie's token). The secret travels in the JSON body, never in a URL, so it never reaches an access log.
"""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response

from workspacefs.server._auth import Reader, authenticate, require_browser_header, signin_cookie
from workspacefs.server._errors import SignInCodeError, error_responses
from workspacefs.server._models import SignInModel, SignInRequest
from workspacefs.server._service import ServiceDep, known_query_only
from workspacefs.server._transfer import parse_json
from workspacefs.server.tokens import Scope, TokenInfo

__all__ = ["router"]

router = APIRouter(prefix="/v1/signin", tags=["sign-in"])
_QUERY_CHECKED = [Depends(known_query_only)]
"""Signing in and out take no credentials, whose dependency checks the query string for the other routes."""


def _model(info: TokenInfo | None, *, browser: bool) -> SignInModel:
    if info is None:  # the service runs without auth: everyone is an admin
        return SignInModel(agent_id=None, scope=Scope.ADMIN.value, expires_at=None, browser=False)
    return SignInModel(agent_id=info.agent_id, scope=info.scope.value, expires_at=info.expires_at, browser=browser)


@router.get("", response_model=SignInModel, responses=error_responses(), summary="Who is signed in")
async def whoami(*, who: Reader) -> SignInModel:
    """The agent, scope and expiry of the request's credentials, and whether they are the browser's cookie."""
    return _model(who.token, browser=who.cookie)


@router.post(
    "",
    response_model=SignInModel,
    responses=error_responses(),
    summary="Sign a browser in",
    dependencies=_QUERY_CHECKED,
    openapi_extra={
        "security": [],  # this is where a browser gets its credentials
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": SignInRequest.model_json_schema()}},
        },
    },
)
async def sign_in(*, request: Request, running: ServiceDep) -> Response:
    """Redeem a one-time sign-in ``code`` (401 once used or expired) or a bearer ``token`` for a sign-in cookie
    (``HttpOnly``, ``SameSite=Strict``, within 12 hours). Needs the header ``X-Workspacefs: 1``."""
    require_browser_header(request)
    body = parse_json(SignInRequest, await request.body())
    if not running.auth:
        return JSONResponse(_model(None, browser=False).model_dump(mode="json"))
    if body.code is not None:
        redeemed = await running.run(running.tokens.redeem_signin, body.code) if body.code.isascii() else None
        if redeemed is None:
            raise SignInCodeError(
                "This sign-in link was already used or has expired (a link works once, for 10 minutes); "
                "get a new one with: workspacefs open"
            )
        secret, info = redeemed
    else:
        assert body.token is not None
        token = await running.run(running.tokens.verify, body.token) if body.token.isascii() else None
        authenticate(running, token)  # 401 unknown or expired, 429 over its rate
        assert token is not None
        secret, info = await running.run(running.tokens.sign_in_browser, token)
    response = JSONResponse(_model(info, browser=True).model_dump(mode="json"))
    assert info.expires_at is not None
    response.set_cookie(
        signin_cookie(request),
        secret,
        max_age=max(0, int((info.expires_at - datetime.now(UTC)).total_seconds())),
        path="/",
        secure=request.url.scheme == "https",
        httponly=True,
        samesite="strict",
    )
    return response


@router.delete(
    "",
    status_code=204,
    responses=error_responses(),
    summary="Sign the browser out",
    openapi_extra={"security": []},
    dependencies=_QUERY_CHECKED,
)
async def sign_out(*, request: Request, running: ServiceDep) -> Response:
    """Revoke the browser's sign-in (its cookie's token, if still valid) and clear the cookie. Needs the header
    ``X-Workspacefs: 1``."""
    require_browser_header(request)
    name = signin_cookie(request)
    secret = request.cookies.get(name)
    if running.auth and secret is not None and secret.isascii():
        info = await running.run(running.tokens.verify, secret)
        if info is not None and info.browser:  # only a browser's own sign-in: never an API token
            await running.run(running.tokens.revoke, info.token_id)
    response = Response(status_code=204)
    response.delete_cookie(name, path="/", secure=request.url.scheme == "https", httponly=True, samesite="strict")
    return response
