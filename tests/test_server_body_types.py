"""A request body's flags are JSON booleans and its counts JSON numbers: ``"yes"``, ``1`` or ``"5"`` are 422 and
change nothing, on every route, never guessed into ``true`` or ``5`` (``"is_directory": "no"`` made a directory:
pydantic reads ``"no"`` as false, but ``"yes"``, ``"on"`` and ``1`` as true).

One rule for every request model (``RequestModel``), which the last test checks field by field, so a model added
later follows it too.
"""

from __future__ import annotations

import types
import uuid
from collections.abc import Iterator
from typing import Annotated, Any, Union, get_args, get_origin

import pytest
from fastapi.testclient import TestClient
from pydantic import BaseModel, TypeAdapter, ValidationError

from workspacefs.server import create_app
from workspacefs.server._models import RequestModel


def error_of(response: Any) -> tuple[int, str]:
    body = response.json()
    assert set(body) == {"error"} and body["error"]["message"], body
    return response.status_code, body["error"]["code"]


@pytest.fixture
def client(store: Any) -> Iterator[TestClient]:
    with TestClient(create_app(store, auth=False)) as opened:
        yield opened


def test_flags_and_counts_of_every_body_refuse_other_json_types(client: TestClient) -> None:
    base = f"/v1/agents/typed/sessions/{uuid.uuid4().hex[:12]}"
    assert client.post(base.rpartition("/")[0], json={"id": base.rpartition("/")[2]}).status_code == 201
    fs = base + "/fs"
    assert client.post(fs + "/a.txt", json={"content": "a"}).status_code == 201
    assert client.post(fs + "/b.txt", json={"content": "b"}).status_code == 201
    before = client.get(fs).json()
    refused: list[tuple[str, str, dict[str, Any]]] = [
        ("POST", "/new.txt", {"is_directory": "yes"}),
        ("POST", "/new.txt", {"content": "x", "is_readonly": 1}),
        ("POST", "/new.txt", {"content": "x", "is_readonly": "true"}),
        ("PUT", "/a.txt", {"is_readonly": "on"}),
        ("PUT", "/a.txt", {"content": "changed", "is_readonly": 0}),
        ("POST", "/_/move", {"src_path": "/a.txt", "dst_path": "/b.txt", "overwrite": "yes"}),
        ("POST", "/_/copy", {"src_path": "/a.txt", "dst_path": "/b.txt", "overwrite": 1}),
        ("POST", "/_/grep", {"pattern": "a", "case_insensitive": 1}),
        ("POST", "/_/grep", {"pattern": "a", "max_matches": "5"}),
        ("POST", "/_/grep", {"pattern": "a", "max_matches": True}),
    ]
    for method, path, body in refused:
        answer = client.request(method, fs + path, json=body)
        assert answer.status_code == 422, (method, path, body, answer.status_code, answer.text)
        assert error_of(answer)[1] == "invalid_body", body
    assert client.get(fs).json() == before  # nothing made, moved, copied over or flagged
    assert client.get(fs + "/b.txt").json()["content"] == "b"
    # the JSON types themselves, and a whole number written with a fraction, are taken
    assert client.post(fs + "/_/grep", json={"pattern": "a", "max_matches": 5.0, "case_insensitive": True}).is_success
    assert client.put(fs + "/a.txt", json={"is_readonly": True}).json()["is_readonly"] is True


def _models(root: type[BaseModel]) -> Iterator[type[BaseModel]]:
    for model in root.__subclasses__():
        yield model
        yield from _models(model)


def _kinds(annotation: Any) -> set[type]:
    """The scalar types ``bool`` and ``int`` an annotation admits (through ``Optional`` and ``Annotated``)."""
    if get_origin(annotation) is Annotated:
        return _kinds(get_args(annotation)[0])
    if get_origin(annotation) in (Union, types.UnionType):
        return set().union(*(_kinds(arg) for arg in get_args(annotation)))
    return {annotation} & {bool, int}


def test_every_request_models_flags_and_counts_are_strict() -> None:
    models = sorted(set(_models(RequestModel)), key=lambda m: m.__name__)
    assert {
        "CreateFileRequest",
        "UpdateFileRequest",
        "TransferRequest",
        "GrepRequest",
        "UndoEntry",
        "MergeRequest",
    } <= {m.__name__ for m in models}
    checked = 0
    for model in models:
        for name, field in model.model_fields.items():
            kinds = _kinds(field.annotation)
            if not kinds:
                continue
            typed = Annotated[field.annotation, *field.metadata] if field.metadata else field.annotation
            adapter: TypeAdapter[Any] = TypeAdapter(typed)
            wrong = ['"true"', '"yes"', "1"] if bool in kinds else ['"5"', "true"]
            for text in wrong:
                with pytest.raises(ValidationError):
                    adapter.validate_json(text)
                    pytest.fail(f"{model.__name__}.{name} took {text}")
            checked += 1
    assert checked >= 12
