"""Contract fuzzing: schemathesis generates requests from the service's own OpenAPI schema, valid and
invalid, and checks every answer: never a 5xx, always a documented status, body and content type."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import positive_data_acceptance
from schemathesis.core.parameters import ParameterLocation

from workspacefs import SqlFilesystem, SqlStore
from workspacefs.server import SessionCatalog, TokenStore, create_app

AGENT = "fuzz-agent"
SESSION = "fuzz-session"


_DATABASE = Path(tempfile.mkdtemp(prefix="wsfs-contract-")) / "contract.db"
STORE = SqlStore(f"sqlite:///{_DATABASE}")
# The default policy applies; an ask rule a generated path happens to hit is refused after a short wait.
APP = create_app(STORE, auth=False, max_upload_bytes=1024 * 1024, approval_timeout=1)
# A schema-valid request may still be refused for what a schema cannot say: a stale ETag (412), and a regex
# or glob that does not compile (400) in grep/glob and in policy rules (of a session or a token). Everything
# else valid must be accepted.
_ACCEPTED = ["2xx", "3xx", "401", "403", "404", "409", "412", "429"]
CONFIG = schemathesis.Config.from_dict(
    {
        "generation": {"mode": "all"},
        "checks": {"positive_data_acceptance": {"expected-statuses": _ACCEPTED}},
        "operations": [
            # an event stream never ends by itself: tests/test_server_events.py checks it over a socket
            {"include-path-regex": "/events$", "enabled": False},
            {
                "include-path-regex": "(/fs/_/(grep|glob)|/policy|^/v1/tokens)$",
                "checks": {"positive_data_acceptance": {"expected-statuses": [*_ACCEPTED, "400"]}},
            },
        ],
    }
)
schema = schemathesis.openapi.from_asgi("/openapi.json", APP, config=CONFIG)
SECURED_APP = create_app(STORE, auth=True, max_upload_bytes=1024 * 1024, approval_timeout=1)
secured_schema = schemathesis.openapi.from_asgi("/openapi.json", SECURED_APP, config=CONFIG)
TOKEN = TokenStore(STORE).create(agent_id=AGENT, label="contract")[0]


@pytest.fixture(scope="module", autouse=True)
def _cleanup() -> Iterator[None]:
    yield
    STORE.close()
    shutil.rmtree(_DATABASE.parent, ignore_errors=True)


def _seed_session(store: SqlStore) -> None:
    """A session with a little of everything, so fuzzed requests reach real files, not only 404s."""
    catalog = SessionCatalog(store)
    entry = catalog.get(AGENT, SESSION) or catalog.create(AGENT, SESSION)
    fs = SqlFilesystem(store, entry.storage_id, create=False)
    for path, content in {"a.txt": b"hello\n", "src/main.rs": b"fn main() {}\n", "bin.dat": b"\x00\x01"}.items():
        if not fs.exists(path):
            fs.write_bytes(path, content)


@schemathesis.check
def positive_data_acceptance_when_all_positive(ctx: Any, response: Any, case: Any) -> bool | None:
    """Schemathesis's ``positive_data_acceptance``, applied only when every part of the request is valid.

    Its coverage phase can pair a valid body with a deliberately invalid header (``If-Match: 0``) and
    still label the whole case positive; such a request is rightly refused, so it is not judged here.
    """
    meta = case.meta
    if meta is not None and any(not part.mode.is_positive for part in meta.components.values()):
        return None
    if response.status_code == 400 and _error_code(response) == "unsafe_name":
        return None  # a name not in NFC form: beyond what a regular expression in a schema can say
    return positive_data_acceptance(ctx, response, case)


def _error_code(response: Any) -> str | None:
    try:
        return str(response.json()["error"]["code"])
    except (ValueError, KeyError, TypeError):
        return None


def validate(case: Any, headers: dict[str, str] | None = None) -> None:
    """Send the case and run every check (with the fixed acceptance check above)."""
    case.call_and_validate(
        headers=headers,
        excluded_checks=[positive_data_acceptance],
        additional_checks=[positive_data_acceptance_when_all_positive],
    )


def aim_at_the_session(case: Any) -> None:
    """Point a case whose path parameters are valid at the seeded session (invalid ones stay invalid)."""
    _seed_session(STORE)
    meta = case.meta
    path_part = None if meta is None else meta.components.get(ParameterLocation.PATH)
    if "session_id" in (case.path_parameters or {}) and (path_part is None or path_part.mode.is_positive):
        case.path_parameters["agent_id"] = AGENT
        case.path_parameters["session_id"] = SESSION


_FUZZ = settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.function_scoped_fixture],
)


@schema.parametrize()
@_FUZZ
def test_generated_requests_get_documented_answers(case: Any) -> None:
    """Requests as generated, valid and invalid, with random agent and session ids."""
    validate(case)


@schema.parametrize()
@_FUZZ
def test_generated_requests_in_a_real_session(case: Any) -> None:
    """The same, aimed at an existing session with files in it, so file operations run for real."""
    aim_at_the_session(case)
    validate(case)


@secured_schema.parametrize()
@settings(_FUZZ, max_examples=10)
def test_generated_requests_with_auth(case: Any) -> None:
    """With tokens on: a valid agent token reaches its session; schemathesis also replays each request
    without credentials and expects the 401 the schema's bearer scheme promises."""
    aim_at_the_session(case)
    validate(case, headers={"Authorization": f"Bearer {TOKEN}"})
