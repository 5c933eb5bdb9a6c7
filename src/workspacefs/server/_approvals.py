"""Path policies in the service, and ``ask`` rules held pending until a person decides.

A request is checked against its session's policy (an admin sets it: ``PUT …/sessions/{id}/policy``) or, without
one, the service's (``serve --policy``; ``Policy.default()`` unless configured), and then against its token's own
policy, if the token has one: both must allow. An ``ask`` stores a pending approval in the database and holds
the request while an admin decides (the browser's prompt, or ``POST /v1/approvals/{id}``). Any process of the
service may take the decision; the waiting one reads its row every ``poll`` seconds. Without a decision within
``timeout`` seconds the approval expires and the request is refused, saying no one approved it in time. Each
waiting request holds one of the service's worker threads, so at most ``max_pending`` wait at once per process,
and at most half of them (at least one) for one agent, so one agent's token cannot hold every place and every
other agent's ``ask`` refused (nor half the threads); beyond that an ``ask`` is refused at once (the message says
to retry).
"""

from __future__ import annotations

import functools
import json
import threading
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import sqlalchemy as sa

from workspacefs.backends.sql import SqlStore
from workspacefs.errors import PolicyDeniedError
from workspacefs.policy import ApprovalRequest, Policy
from workspacefs.policy._rules import reason_of
from workspacefs.server._tables import approvals, migrate_service, session_policies

__all__ = ["DEFAULT_APPROVAL_TIMEOUT", "ApprovalInfo", "ApprovalStore", "Status", "stored_policy"]

DEFAULT_APPROVAL_TIMEOUT = 120.0
"""Seconds a request waits for a person's decision before it is refused."""
Status = Literal["pending", "approved", "denied", "expired"]
_KEPT = timedelta(days=1)


@functools.lru_cache(maxsize=256)
def stored_policy(text: str) -> Policy:
    """The policy a stored JSON text names, parsed and compiled once per process (~0.6 ms for the default's
    47 rules, which a request must not pay each time); without an approver, so it can be shared."""
    return Policy.from_dict(json.loads(text))


def _utc(stamp: datetime) -> datetime:
    return stamp if stamp.tzinfo is not None else stamp.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class ApprovalInfo:
    """One request for a person's decision: who asked, for what, and what became of it."""

    approval_id: str
    agent_id: str
    session_id: str
    token_id: str | None
    operation: str
    target: str
    paths: tuple[str, ...]
    pattern: str
    reason: str | None
    detail: str | None
    status: Status
    created_at: datetime
    expires_at: datetime
    decided_at: datetime | None

    @classmethod
    def of(cls, row: Any) -> ApprovalInfo:
        """The record of a row of ``wsfs_approvals``."""
        return cls(
            row.id,
            row.agent_id,
            row.session_id,
            row.token_id,
            row.operation,
            row.target,
            tuple(json.loads(row.paths)),
            row.pattern,
            row.reason,
            row.detail,
            row.status,
            _utc(row.created_at),
            _utc(row.expires_at),
            None if row.decided_at is None else _utc(row.decided_at),
        )


class ApprovalStore:
    """Session policies and pending approvals, kept in the service's database (seen by every process)."""

    def __init__(
        self,
        store: SqlStore,
        *,
        timeout: float = DEFAULT_APPROVAL_TIMEOUT,
        poll: float = 0.25,
        max_pending: int = 4,
    ) -> None:
        if timeout <= 0 or poll <= 0 or max_pending < 0:
            raise ValueError("approval timeout and poll interval must be positive, max_pending not negative")
        self._store = store
        self.timeout = timeout
        self.poll = poll
        self._slots = threading.BoundedSemaphore(max_pending) if max_pending else None
        self._per_agent = max(1, max_pending // 2)
        """How many of the places one agent's requests may hold at once."""
        self._waiting: dict[str, int] = {}
        self._counting = threading.Lock()
        migrate_service(store)

    # --- session policies -----------------------------------------------------------------------------------

    def session_policy(self, storage_id: str) -> Policy | None:
        """The policy an admin set for a session (by its storage id), or ``None`` (the service's applies)."""
        with self._store.read_once() as connection:
            row = connection.execute(
                sa.select(session_policies.c.policy).where(session_policies.c.session_id == storage_id)
            ).first()
        return None if row is None else stored_policy(row.policy)

    def set_session_policy(self, storage_id: str, policy: Policy | None) -> None:
        """Set (or with ``None`` remove) a session's own policy; every process applies it from the next request.
        ``FileNotFoundError`` if the session was deleted meanwhile (its policy row would refer to nothing)."""
        with self._store.write() as connection:
            self._store.hold_session(connection, storage_id)  # kept until the policy's row is in
            connection.execute(sa.delete(session_policies).where(session_policies.c.session_id == storage_id))
            if policy is not None:
                connection.execute(
                    sa.insert(session_policies).values(
                        session_id=storage_id, policy=json.dumps(policy.to_dict()), updated_at=datetime.now(UTC)
                    )
                )

    # --- approvals --------------------------------------------------------------------------------------------

    def approver(self, *, agent_id: str, session_id: str, token_id: str | None) -> Any:
        """An approver for ``Policy(approve=…)`` that holds the calling worker thread until a decision."""

        def approve(request: ApprovalRequest) -> bool:
            return self.wait(agent_id=agent_id, session_id=session_id, token_id=token_id, request=request)

        return approve

    def wait(self, *, agent_id: str, session_id: str, token_id: str | None, request: ApprovalRequest) -> bool:
        """Record ``request`` as pending and block until it is decided (``True``: approved) or expires."""
        with self._counting:
            mine = self._waiting.get(agent_id, 0)
            if mine < self._per_agent:
                self._waiting[agent_id] = mine + 1
        if mine >= self._per_agent:
            raise self._refused(request, f"{mine} requests of agent {agent_id!r} already wait for approval")
        try:
            return self._wait(agent_id=agent_id, session_id=session_id, token_id=token_id, request=request)
        finally:
            with self._counting:
                left = self._waiting[agent_id] - 1
                if left:
                    self._waiting[agent_id] = left
                else:
                    del self._waiting[agent_id]

    @staticmethod
    def _refused(request: ApprovalRequest, why: str) -> PolicyDeniedError:
        """The refusal of an ``ask`` that found no place to wait (nothing was asked; a retry may find one)."""
        return PolicyDeniedError(
            request.paths[0],
            f"{reason_of(request.rule)}; {why}, retry later",
            operation=request.operation,
            pattern=request.rule.pattern,
            action="ask",
            asked=False,
        )

    def _wait(self, *, agent_id: str, session_id: str, token_id: str | None, request: ApprovalRequest) -> bool:
        if self._slots is None or not self._slots.acquire(blocking=False):
            raise self._refused(request, "too many requests already wait for approval")
        try:
            approval_id = self._insert(agent_id, session_id, token_id, request)
            deadline = time.monotonic() + self.timeout
            while True:
                time.sleep(min(self.poll, max(0.0, deadline - time.monotonic())))
                status = self._status(approval_id)
                if status != "pending":
                    return status == "approved"
                if time.monotonic() >= deadline:
                    status = self._expire(approval_id)
                    if status in ("approved", "denied"):  # decided in the same instant
                        return status == "approved"
                    raise PolicyDeniedError(
                        request.paths[0],
                        f"{reason_of(request.rule)}; no one approved it within {self.timeout:g} s",
                        operation=request.operation,
                        pattern=request.rule.pattern,
                        action="ask",
                        asked=False,
                    )
        finally:
            self._slots.release()

    def _insert(self, agent_id: str, session_id: str, token_id: str | None, request: ApprovalRequest) -> str:
        approval_id = str(uuid.uuid4())
        now = datetime.now(UTC)
        with self._store.write() as connection:
            connection.execute(  # decisions are kept a day for the record, then dropped
                sa.delete(approvals).where(approvals.c.status != "pending", approvals.c.created_at < now - _KEPT)
            )
            connection.execute(
                sa.insert(approvals).values(
                    id=approval_id,
                    agent_id=agent_id,
                    session_id=session_id,
                    token_id=token_id,
                    operation=request.operation,
                    target=request.target,
                    paths=json.dumps(list(request.paths[:100])),
                    pattern=request.rule.pattern,
                    reason=request.rule.reason,
                    detail=request.detail,
                    status="pending",
                    created_at=now,
                    expires_at=now + timedelta(seconds=self.timeout),
                )
            )
        return approval_id

    def _status(self, approval_id: str) -> str:
        with self._store.read_once() as connection:
            found = connection.execute(sa.select(approvals.c.status).where(approvals.c.id == approval_id)).scalar()
        return str(found) if found is not None else "denied"  # removed meanwhile: no one approved it

    def _expire(self, approval_id: str) -> str:
        """Mark a still-pending approval expired; the status it has afterwards."""
        with self._store.write() as connection:
            connection.execute(
                sa.update(approvals)
                .where(approvals.c.id == approval_id, approvals.c.status == "pending")
                .values(status="expired", decided_at=datetime.now(UTC))
            )
            found = connection.execute(sa.select(approvals.c.status).where(approvals.c.id == approval_id)).scalar()
        return str(found) if found is not None else "denied"

    def list(self, *, status: Status | None = "pending", agent_id: str | None = None) -> list[ApprovalInfo]:
        """Approvals, oldest first (pending ones past their time are shown as expired); the newest 200 at most."""
        query = sa.select(approvals).order_by(approvals.c.created_at.desc(), approvals.c.id).limit(200)
        if agent_id is not None:
            query = query.where(approvals.c.agent_id == agent_id)
        if status == "pending":
            query = query.where(approvals.c.status == "pending", approvals.c.expires_at > datetime.now(UTC))
        elif status is not None:
            query = query.where(approvals.c.status == status)
        with self._store.read() as connection:
            rows = connection.execute(query).all()
        return [ApprovalInfo.of(row) for row in reversed(rows)]

    def get(self, approval_id: str) -> ApprovalInfo | None:
        """One approval by id, or ``None``."""
        with self._store.read_once() as connection:
            row = connection.execute(sa.select(approvals).where(approvals.c.id == approval_id)).first()
        return None if row is None else ApprovalInfo.of(row)

    def decide(self, approval_id: str, approve: bool, *, decided_by: str | None) -> ApprovalInfo | None:
        """Approve or deny a pending approval; ``None`` if there is none by that id. A decided or expired one
        keeps its status (the answer shows it)."""
        now = datetime.now(UTC)
        with self._store.write() as connection:
            connection.execute(
                sa.update(approvals)
                .where(approvals.c.id == approval_id, approvals.c.status == "pending", approvals.c.expires_at > now)
                .values(status="approved" if approve else "denied", decided_at=now, decided_by=decided_by)
            )
            row = connection.execute(sa.select(approvals).where(approvals.c.id == approval_id)).first()
        return None if row is None else ApprovalInfo.of(row)
