"""Query parameters an endpoint does not declare are refused (400): ``?recusive=true`` is a bug to report, not a
flag to ignore while the request does something else.

Every route that takes credentials checks this in its one credentials dependency (``_auth.py``): a FastAPI
dependency of its own costs each request about 8 µs to solve, although almost no request has a query string.
"""

from __future__ import annotations

from typing import Any

from fastapi import Request

from workspacefs.server._errors import ApiError

__all__ = ["known_query_only", "refuse_unknown_query"]

_QUERY_NAMES: dict[int, frozenset[str]] = {}


def _declared_query(dependant: Any) -> set[str]:
    names = {field.alias for field in dependant.query_params}
    for sub in dependant.dependencies:
        names |= _declared_query(sub)
    return names


def refuse_unknown_query(request: Request) -> None:
    """Raise (400) if the request carries a query parameter its route does not declare."""
    if not request.scope.get("query_string") or not request.query_params:
        return
    route = request.scope.get("route")
    dependant = getattr(route, "dependant", None)
    if dependant is None:
        return
    allowed = _QUERY_NAMES.get(id(route))
    if allowed is None:
        allowed = _QUERY_NAMES.setdefault(id(route), frozenset(_declared_query(dependant)))
    unknown = sorted(set(request.query_params) - allowed)
    if unknown:
        accepted = ", ".join(sorted(allowed)) or "none"
        raise ApiError(
            400, "unknown_parameter", f"Unknown query parameter(s) {', '.join(unknown)}; accepted: {accepted}"
        )


async def known_query_only(request: Request) -> None:
    """:func:`refuse_unknown_query` as a router-wide FastAPI dependency, for routes that take no credentials."""
    refuse_unknown_query(request)
