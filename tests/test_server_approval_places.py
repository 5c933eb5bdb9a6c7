"""One agent cannot take every place where requests wait for a person's approval: the service holds at most
``max_pending`` waiting requests per process (each holds a worker thread), and one agent's token that sent that
many asks (reading ``.env`` again and again) had every other agent's ``ask`` refused at once, "too many requests
already wait", for as long as they waited (120 s each by default). At most half the places go to one agent."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from workspacefs.errors import PolicyDeniedError
from workspacefs.policy import ApprovalRequest
from workspacefs.policy._rules import PolicyRule
from workspacefs.server._approvals import ApprovalStore

RULE = PolicyRule("ask", ("read",), ".env", "a secret")


def _ask(agent: str) -> ApprovalRequest:
    return ApprovalRequest("read", ".env", (".env",), RULE, detail=f"asked by {agent}")


def test_one_agent_holds_at_most_half_the_places(store: Any) -> None:
    approvals = ApprovalStore(store, timeout=60, poll=0.02, max_pending=4)
    outcomes: dict[str, Any] = {}

    def wait(name: str, agent: str) -> None:
        try:
            outcomes[name] = approvals.wait(agent_id=agent, session_id="s", token_id=None, request=_ask(agent))
        except PolicyDeniedError as exc:
            outcomes[name] = exc

    threads = [threading.Thread(target=wait, args=(f"greedy-{n}", "greedy")) for n in range(4)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 60
    while len(approvals.list(agent_id="greedy")) + len(outcomes) < 4:  # each is waiting, or was refused at once
        assert time.monotonic() < deadline, outcomes
        time.sleep(0.02)
    refused = [name for name, outcome in outcomes.items() if isinstance(outcome, PolicyDeniedError)]
    assert len(refused) == 2, outcomes  # two wait, two were refused: they never asked anyone
    assert all("agent 'greedy'" in str(outcomes[name]) and not outcomes[name].asked for name in refused)
    # another agent's ask still finds a place and is decided
    other = threading.Thread(target=wait, args=("other", "other"))
    other.start()
    while not approvals.list(agent_id="other"):
        assert time.monotonic() < deadline and "other" not in outcomes, outcomes.get("other")
        time.sleep(0.02)
    (pending,) = approvals.list(agent_id="other")
    assert approvals.decide(pending.approval_id, True, decided_by=None) is not None
    other.join(60)
    assert outcomes["other"] is True
    for waiting in approvals.list(agent_id="greedy"):
        approvals.decide(waiting.approval_id, False, decided_by=None)
    for thread in threads:
        thread.join(60)
    assert sorted(v for v in outcomes.values() if isinstance(v, bool)) == [False, False, True]
    # with its requests decided, the agent has its places back
    again = threading.Thread(target=wait, args=("greedy-again", "greedy"))
    again.start()
    while not approvals.list(agent_id="greedy") and "greedy-again" not in outcomes:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert "greedy-again" not in outcomes  # waiting, not refused
    (pending,) = approvals.list(agent_id="greedy")
    approvals.decide(pending.approval_id, True, decided_by=None)
    again.join(60)
    assert outcomes["greedy-again"] is True


@pytest.mark.parametrize("places", [1, 2])
def test_a_single_place_still_serves_anyone(store: Any, places: int) -> None:
    approvals = ApprovalStore(store, timeout=60, poll=0.02, max_pending=places)
    answer: list[bool] = []
    thread = threading.Thread(
        target=lambda: answer.append(
            approvals.wait(agent_id="solo", session_id="s", token_id=None, request=_ask("solo"))
        )
    )
    thread.start()
    deadline = time.monotonic() + 60
    while not approvals.list(agent_id="solo"):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    (pending,) = approvals.list(agent_id="solo")
    approvals.decide(pending.approval_id, True, decided_by=None)
    thread.join(60)
    assert answer == [True]
