"""Path policies and approvals over REST: a session's rules, and the decisions ``ask`` rules wait for.

``GET /v1/approvals`` lists the requests held for a person (the browser polls it and shows a prompt);
``POST /v1/approvals/{id}`` decides one. Only ``admin`` tokens decide: an agent's own token must never approve
its own request. A session's policy is read by any token of its agent and set or removed by ``admin`` tokens.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Body, Path, Query
from fastapi.responses import Response

from workspacefs.policy import Policy
from workspacefs.server._approvals import ApprovalInfo
from workspacefs.server._auth import Admin, Reader
from workspacefs.server._errors import ApiError, error_responses
from workspacefs.server._models import (
    ApprovalList,
    ApprovalModel,
    DecisionRequest,
    PolicyModel,
    PolicyRuleModel,
    SessionPolicyModel,
)
from workspacefs.server._service import AgentId, ServiceDep, SessionId

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["policy"])
ApprovalId = Annotated[str, Path(max_length=64, description="An approval's id")]
StatusFilter = Annotated[
    Literal["pending", "approved", "denied", "expired", "all"],
    Query(description="Which approvals to list (pending: still waiting and not past their time)"),
]
POLICY = "/agents/{agent_id}/sessions/{session_id}/policy"


def approval_model(info: ApprovalInfo) -> ApprovalModel:
    """An approval's JSON."""
    return ApprovalModel(
        id=info.approval_id,
        agent_id=info.agent_id,
        session_id=info.session_id,
        token_id=info.token_id,
        operation=info.operation,
        target="/" + info.target,
        paths=["/" + path for path in info.paths],
        pattern=info.pattern,
        reason=info.reason,
        detail=info.detail,
        status=info.status,
        created_at=info.created_at,
        expires_at=info.expires_at,
        decided_at=info.decided_at,
    )


def _rules_of(policy: Policy) -> list[PolicyRuleModel]:
    return [PolicyRuleModel.model_validate(rule.to_dict()) for rule in policy.rules]


@router.get("/approvals", response_model=ApprovalList, responses=error_responses(), summary="List approvals")
async def list_approvals(*, _who: Admin, running: ServiceDep, status: StatusFilter = "pending") -> ApprovalList:
    """Requests held for a decision (``status=pending``, the default), or past decisions (kept a day)."""
    found = await running.run(lambda: running.approvals.list(status=None if status == "all" else status))
    return ApprovalList(data=[approval_model(info) for info in found])


@router.post(
    "/approvals/{approval_id}",
    response_model=ApprovalModel,
    responses=error_responses(404, 409),
    summary="Approve or deny a held request",
)
async def decide_approval(
    *, approval_id: ApprovalId, body: Annotated[DecisionRequest, Body()], who: Admin, running: ServiceDep
) -> ApprovalModel:
    """Decide a pending approval: the request that waits for it goes on, or is refused with 403. 409 if it was
    decided already or expired."""
    token_id = who.token.token_id if who.token is not None else None
    info = await running.run(lambda: running.approvals.decide(approval_id, body.approve, decided_by=token_id))
    if info is None:
        raise ApiError(404, "approval_not_found", f"No approval {approval_id!r}")
    wanted = "approved" if body.approve else "denied"
    if info.status != wanted:
        raise ApiError(409, "approval_decided", f"Approval {approval_id!r} is {info.status} already")
    return approval_model(info)


@router.get(POLICY, response_model=SessionPolicyModel, responses=error_responses(404), summary="A session's policy")
async def get_policy(
    *, agent_id: AgentId, session_id: SessionId, who: Reader, running: ServiceDep
) -> SessionPolicyModel:
    """The rules the session's requests are checked against, in order (the first match decides)."""

    def work() -> SessionPolicyModel:
        entry = running.session(who, agent_id, session_id)
        own = running.approvals.session_policy(entry.storage_id)
        chosen = own or running.policy
        return SessionPolicyModel(source="session" if own is not None else "service", rules=_rules_of(chosen))

    return await running.run(work)


@router.put(POLICY, response_model=SessionPolicyModel, responses=error_responses(400, 404, 422), summary="Set a policy")
async def set_policy(
    *, agent_id: AgentId, session_id: SessionId, body: Annotated[PolicyModel, Body()], who: Admin, running: ServiceDep
) -> SessionPolicyModel:
    """Give the session its own policy (``include_default``: the default rules follow the given ones); every
    process of the service applies it from the next request."""
    try:
        policy = Policy.from_dict(body.model_dump(exclude_none=True))
    except ValueError as exc:
        raise ApiError(400, "invalid_policy", str(exc)) from None

    def work() -> SessionPolicyModel:
        entry = running.session(who, agent_id, session_id)
        running.approvals.set_session_policy(entry.storage_id, policy)
        return SessionPolicyModel(source="session", rules=_rules_of(policy))

    return await running.run(work)


@router.delete(POLICY, status_code=204, responses=error_responses(404), summary="Remove a session's policy")
async def delete_policy(*, agent_id: AgentId, session_id: SessionId, who: Admin, running: ServiceDep) -> Response:
    """The session follows the service's policy again."""

    def work() -> None:
        entry = running.session(who, agent_id, session_id)
        running.approvals.set_session_policy(entry.storage_id, None)

    await running.run(work)
    return Response(status_code=204)
