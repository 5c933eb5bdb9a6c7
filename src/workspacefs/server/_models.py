"""Request and response bodies of the REST API, as pydantic models.

They are the OpenAPI schema too: schemathesis fuzzes requests from them and checks every response
against them, so a field added here is a field the service promises.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, StrictBool, model_validator

from workspacefs.paths import strict_path_pattern

__all__ = [
    "AdminTokenRequest",
    "AgentList",
    "AgentTokenRequest",
    "ApprovalList",
    "ApprovalModel",
    "CreateFileRequest",
    "CreateSessionRequest",
    "CreateSnapshotRequest",
    "CreatedToken",
    "DecisionRequest",
    "DiffResponse",
    "ErrorBody",
    "ErrorResponse",
    "FileList",
    "FileModel",
    "GlobRequest",
    "GlobResponse",
    "GrepFile",
    "GrepLine",
    "GrepRequest",
    "GrepResponse",
    "PathRequest",
    "PolicyModel",
    "PolicyRuleModel",
    "PolicyView",
    "RequestModel",
    "SessionList",
    "SessionModel",
    "SessionPolicyModel",
    "SignInModel",
    "SignInRequest",
    "SnapshotList",
    "SnapshotModel",
    "TokenList",
    "TokenModel",
    "TransferRequest",
    "UpdateFileRequest",
    "WholeNumber",
]

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
"""Agent, session and snapshot ids: safe in a URL segment without escaping."""


def _unicode(value: str) -> str:
    """JSON can carry lone surrogates (``"\\ud800"``); no database or file name can hold one."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode (it holds a lone surrogate)") from None
    return value


def _path_rule(**rule: Any) -> Any:
    """A path field's constraints, its rule documented in the schema (the service's ``wire_path`` enforces it)."""
    return Field(max_length=4096, json_schema_extra={"pattern": strict_path_pattern(slash="optional", **rule)})


Text = Annotated[str, AfterValidator(_unicode)]
PathText = Annotated[str, _path_rule(), AfterValidator(_unicode)]
SourcePath = Annotated[str, _path_rule(allow_root=False), AfterValidator(_unicode)]
TargetPath = Annotated[str, _path_rule(allow_root=False, reserved="_"), AfterValidator(_unicode)]
Encoding = Literal["text", "base64"]
BASE64_PATTERN = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
BASE64_RULE: dict[str, Any] = {  # documents what the service checks when it decodes ``content``
    "if": {"properties": {"encoding": {"const": "base64"}}, "required": ["encoding"]},
    "then": {"properties": {"content": {"anyOf": [{"type": "string", "pattern": BASE64_PATTERN}, {"type": "null"}]}}},
}


def _whole_number(value: Any) -> Any:
    """A JSON number with no fraction (``5``, ``5.0``), never ``true`` or ``"5"``, as JSON Schema's ``integer``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("must be a whole number")  # pydantic reports a ValueError as a 422
    return value


_WHOLE = BeforeValidator(_whole_number)
WholeNumber = Annotated[int, _WHOLE]
"""A JSON number with no fraction (``5``, ``5.0``), as JSON Schema's ``integer``."""


class RequestModel(BaseModel):
    """A request body: unknown fields refused, and (the rule every request model follows, which a test checks)
    its flags ``StrictBool`` and its counts :data:`WholeNumber`: ``"yes"``, ``1`` or ``"5"`` are 422, never
    guessed into ``true`` or ``5``."""

    model_config = ConfigDict(extra="forbid")


class ErrorBody(BaseModel):
    """What went wrong: a stable machine ``code`` and a sentence for people."""

    code: str
    message: str


class ErrorResponse(BaseModel):
    """Every error the service returns."""

    error: ErrorBody


class FileModel(BaseModel):
    """A file or directory of a session; ``content`` only where a body carries it."""

    id: str
    session_id: str
    path: str
    name: str
    content: str | None = None
    encoding: Encoding | None = None
    is_directory: bool
    is_readonly: bool
    size_bytes: int
    created_at: datetime
    updated_at: datetime


class FileList(BaseModel):
    """A directory listing."""

    data: list[FileModel]


class CreateFileRequest(RequestModel):
    """``POST /fs/{path}``: a file with ``content``, or a directory with ``is_directory: true``."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "allOf": [
                {  # a directory has no content and cannot be read-only
                    "if": {"properties": {"is_directory": {"const": True}}, "required": ["is_directory"]},
                    "then": {"properties": {"content": {"type": "null"}, "is_readonly": {"const": False}}},
                },
                BASE64_RULE,
            ]
        },
    )

    content: Text | None = None
    encoding: Encoding = "text"
    is_directory: StrictBool = False
    is_readonly: StrictBool = False


class UpdateFileRequest(RequestModel):
    """``PUT /fs/{path}``: new ``content``, and/or a new read-only flag."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"allOf": [BASE64_RULE]})

    content: Text | None = None
    encoding: Encoding = "text"
    is_readonly: StrictBool | None = None


class PathRequest(RequestModel):
    """An action on one path."""

    path: PathText


class TransferRequest(RequestModel):
    """Move or copy ``src_path`` to ``dst_path``."""

    src_path: SourcePath
    dst_path: TargetPath
    overwrite: StrictBool = False


class GrepRequest(RequestModel):
    """Search file contents: ``pattern`` is a regex, ``path_pattern`` a glob over file paths."""

    pattern: Annotated[str, Field(min_length=1, max_length=4096), AfterValidator(_unicode)]
    path_pattern: PathText | None = None
    path: PathText = "/"
    case_insensitive: StrictBool = False
    max_matches: Annotated[WholeNumber, Field(ge=1, le=10_000)] = 1000


class GrepLine(BaseModel):
    """One matching line: ``line_content`` is the Python API's name (``GrepMatch.line_content``), ``line`` the
    same text under its older name."""

    path: str
    line_number: int = Field(description="The line's number, counting from 1")
    line_content: str = Field(description="The matching line without its newline")
    line: str = Field(description="The same as line_content, kept for clients written before line_content")


class GrepFile(BaseModel):
    """The matching lines of one file."""

    path: str
    matches: list[GrepLine]


class GrepResponse(BaseModel):
    """Matches grouped by file; ``truncated`` when ``max_matches`` cut the search short."""

    data: list[GrepFile]
    truncated: bool


class GlobRequest(RequestModel):
    """Find files whose path below ``path`` matches the glob ``pattern``."""

    pattern: Annotated[str, Field(min_length=1, max_length=4096), AfterValidator(_unicode)]
    path: PathText = "/"


class GlobResponse(BaseModel):
    """Matching file paths, sorted."""

    data: list[str]


class SessionModel(BaseModel):
    """A session: one isolated filesystem."""

    id: str
    agent_id: str
    created_at: datetime
    updated_at: datetime
    file_count: int | None = Field(
        default=None, description="How many files (not folders) it holds; in the listing of sessions, else null"
    )
    changed_at: datetime | None = Field(
        default=None,
        description="When a file in it was last written (its creation if none was); in the listing, else null",
    )


class SessionList(BaseModel):
    """An agent's sessions, oldest first."""

    data: list[SessionModel]


class CreateSessionRequest(RequestModel):
    """A new session; the service picks an id (UUIDv7) unless one is given."""

    id: Annotated[str, Field(pattern=ID_PATTERN)] | None = Field(
        default=None,
        description="Your own id for the session, such as a ticket or run id: 1 to 128 letters, digits, '.', '_' "
        "or '-', starting with a letter or digit (409 if this agent already has it). Leave it out for a new UUIDv7.",
    )


class AgentList(BaseModel):
    """Agents that have sessions and that the caller may see."""

    data: list[str]


class SnapshotModel(BaseModel):
    """A snapshot of a session's files."""

    id: str
    session_id: str
    tag: str | None
    parent_id: str | None
    file_count: int
    total_bytes: int
    created_at: datetime


class SnapshotList(BaseModel):
    """A session's snapshots, oldest first."""

    data: list[SnapshotModel]


class CreateSnapshotRequest(RequestModel):
    """A new snapshot, optionally tagged."""

    tag: Annotated[str, Field(min_length=1, max_length=200), AfterValidator(_unicode)] | None = None


class DiffResponse(BaseModel):
    """Files added, modified and deleted from snapshot ``base`` to ``target`` (``null``: now)."""

    base: str
    target: str | None
    added: list[str]
    modified: list[str]
    deleted: list[str]
    unchanged_count: int


ScopeName = Literal["read", "write", "admin"]


class TokenModel(BaseModel):
    """A token's record (never its secret): the agent it acts for (``null``: every agent), its scope, when it
    expires (``null``: never) and its requests per minute (``null``: the service's default, ``0``: none)."""

    id: str
    agent_id: str | None
    scope: ScopeName
    label: str | None
    created_at: datetime
    expires_at: datetime | None
    rate_limit: int | None
    policy: PolicyView | None = None
    """The token's own policy (``null``: none; its session's policy applies either way)."""
    browser: bool = Field(
        default=False, description="A browser's sign-in (held in a cookie, short-lived), not an API token"
    )


class CreatedToken(TokenModel):
    """A new token: ``token`` is its secret, shown only in this answer (only its hash is stored)."""

    token: str


class TokenList(BaseModel):
    """Every token, oldest first."""

    data: list[TokenModel]


class SignInRequest(RequestModel):
    """Sign a browser in with a one-time ``code`` (from a link ``workspacefs serve`` or ``workspacefs open``
    printed) or with a bearer ``token``: exactly one of them."""

    code: Annotated[str, Field(min_length=1, max_length=200)] | None = None
    token: Annotated[str, Field(min_length=1, max_length=200)] | None = None

    @model_validator(mode="after")
    def _one_secret(self) -> SignInRequest:
        if (self.code is None) == (self.token is None):
            raise ValueError("send exactly one of code and token")
        return self


class SignInModel(BaseModel):
    """Who a request is signed in as: the agent (``null``: every agent), the scope, when the sign-in ends
    (``null``: never), and whether it came from the browser's sign-in cookie."""

    agent_id: str | None
    scope: ScopeName
    expires_at: datetime | None
    browser: bool


class PolicyRuleModel(RequestModel):
    """One rule: ``action`` for ``operations`` on paths matching the glob ``pattern`` (the first match decides)."""

    action: Literal["allow", "deny", "ask"]
    operations: Annotated[list[Literal["read", "write", "delete", "exec"]], Field(min_length=1, max_length=4)]
    pattern: Annotated[
        str, Field(min_length=1, max_length=1000, pattern=r"^[^\x00-\x1f\x7f]*[^/\x00-\x1f\x7f\s][^\x00-\x1f\x7f]*$")
    ]
    """A glob on workspace paths (``**/.env``, ``.git/**``); without a ``/`` it matches names anywhere."""
    reason: Annotated[str, Field(max_length=500)] | None = None


class PolicyModel(RequestModel):
    """A path policy: ``rules`` in order, then (``include_default``) the default policy's rules."""

    rules: Annotated[list[PolicyRuleModel], Field(max_length=500)] = []
    include_default: StrictBool = True


class PolicyView(BaseModel):
    """A policy as it applies: every rule in order (the default ones included where they were)."""

    rules: list[PolicyRuleModel]


class SessionPolicyModel(BaseModel):
    """The rules a session's requests are checked against (a token's own policy applies after them)."""

    source: Literal["session", "service"]
    """``session``: set for this session; ``service``: the service's policy (none was set)."""
    rules: list[PolicyRuleModel]


class ApprovalModel(BaseModel):
    """A request held for a person's decision: ``operation`` on ``paths`` (matched by the rule ``pattern``)."""

    id: str
    agent_id: str
    session_id: str
    token_id: str | None
    operation: str
    target: str
    paths: list[str]
    pattern: str
    reason: str | None
    detail: str | None
    status: Literal["pending", "approved", "denied", "expired"]
    created_at: datetime
    expires_at: datetime
    decided_at: datetime | None


class ApprovalList(BaseModel):
    """Approvals, oldest first."""

    data: list[ApprovalModel]


class DecisionRequest(RequestModel):
    """``approve``: let the held request go on; ``false``: refuse it (the caller gets 403 saying so)."""

    approve: StrictBool


class _TokenOptions(RequestModel):
    label: Annotated[str, Field(min_length=1, max_length=200), AfterValidator(_unicode)] | None = None
    expires_in: (
        Annotated[int, Field(ge=1, le=10 * 366 * 86400, description="Seconds until it expires"), _WHOLE] | None
    ) = None
    rate_limit: Annotated[int, Field(ge=0, le=1_000_000, description="Requests per minute; 0: none"), _WHOLE] | None = (
        None
    )
    policy: PolicyModel | None = None
    """The token's own path policy, checked after its session's (both must allow)."""


class AgentTokenRequest(_TokenOptions):
    """A ``read`` or ``write`` token for one agent, or (``agent_id`` absent) for every agent."""

    agent_id: Annotated[str, Field(pattern=ID_PATTERN)] | None = None
    scope: Literal["read", "write"] = "write"


class AdminTokenRequest(_TokenOptions):
    """An ``admin`` token: every agent, and token management."""

    scope: Literal["admin"]
    agent_id: None = None
