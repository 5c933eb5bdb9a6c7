"""The file reads' route class: FastAPI's parameter solving skipped where it can only agree.

A file's ``GET`` is the service's most frequent request, and FastAPI's solving of its parameters (three path
parameters, one dependency, each validated by pydantic) cost about a fifth of its CPU. A route of
:class:`DirectReadRoute` calls its endpoint with the path parameters as routed and the credentials from
:func:`~workspacefs.server._auth.presented`, the function its one dependency calls, after checking the ids
against the pattern FastAPI would check. An id the pattern refuses goes to FastAPI's own handler, which answers
exactly as it always did (its 422, or an earlier 401), so no answer differs; so does every request while the
application overrides a dependency (``app.dependency_overrides``). The OpenAPI document is FastAPI's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Coroutine
from typing import Any

import fastapi.routing
from fastapi import Request
from fastapi.responses import Response
from fastapi.routing import APIRoute

from workspacefs.server._auth import presented
from workspacefs.server._models import ID_PATTERN
from workspacefs.server.tokens import Scope

__all__ = ["DirectReadRoute"]

_ID = re.compile(ID_PATTERN)
_IDS = ("agent_id", "session_id")
"""The path parameters FastAPI checks against ``ID_PATTERN`` (``AgentId``, ``SessionId``)."""
_UNCHECKED = frozenset({"path"})
"""Path parameters FastAPI passes as routed (``AnyPath``: ``wire_path`` checks it in the endpoint)."""

Handler = Callable[[Request], Coroutine[Any, Any, Response]]


class DirectReadRoute(APIRoute):
    """A ``GET`` route whose endpoint takes only path parameters, optionally the request, and its credentials as
    ``access`` (``ReadAccess``): the shape is checked when the route is built, so a route that grows another
    parameter fails at import instead of being called without it."""

    def get_route_handler(self) -> Handler:
        """FastAPI's handler, and in front of it the direct call for ids the pattern admits."""
        solved = super().get_route_handler()
        if self.dependencies:
            return solved  # dependencies beside the endpoint's (a router's, where copied into the route): solved
        dependant = self.dependant
        names = [param.name for param in dependant.path_params]
        if (
            set(names) - _UNCHECKED != set(_IDS)
            or dependant.query_params
            or dependant.header_params
            or dependant.cookie_params
            or dependant.body_params
            or [sub.name for sub in dependant.dependencies] != ["access"]
            or self.methods != {"GET"}
        ):
            raise TypeError(f"{self.path}: not a route DirectReadRoute can call directly")
        included = _as_included(self)
        if [sub.name for sub in included.dependant.dependencies] != ["access"]:
            return solved  # included with dependencies of its router's or app's: FastAPI solves them
        endpoint = self.endpoint
        request_name = dependant.request_param_name
        provider = included.dependency_overrides_provider

        async def handle(request: Request) -> Response:
            routed = request.path_params
            if not all(_ID.fullmatch(routed[name]) for name in _IDS):
                return await solved(request)  # FastAPI's own answer (its 422, or an earlier 401)
            if getattr(provider, "dependency_overrides", None):
                return await solved(request)  # an application's override of the credentials is FastAPI's to apply
            arguments = {name: routed[name] for name in names}
            if request_name is not None:
                arguments[request_name] = request
            response: Response = await endpoint(access=presented(request, Scope.READ), **arguments)
            return response

        return handle


def _as_included(route: APIRoute) -> Any:
    """The route as the application included it, where FastAPI builds its handler for that (newer FastAPI keeps
    an included router whole and builds each route's handler in an effective context: the dependencies of
    ``include_router`` and the application's ``dependency_overrides`` are that context's, not the route's)."""
    context = getattr(fastapi.routing, "_effective_route_context_var", None)
    effective = context.get() if context is not None else None
    return effective if effective is not None and effective.original_route is route else route
