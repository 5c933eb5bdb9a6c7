"""The produced tool definitions obey each provider's documented rules."""

from __future__ import annotations

import json
import re
from typing import Any

import jsonschema
import pytest

from workspacefs import InMemoryFilesystem
from workspacefs.tools import (
    ALL_TOOLS,
    EXEC_TOOLS,
    SNAPSHOT_TOOLS,
    ToolContext,
    dispatch,
    portable_schema,
    to_anthropic_tools,
    to_openai_tools,
)

# OpenAI function calling, strict mode (structured outputs): supported keywords, and every object must
# list all of its properties as required and set additionalProperties to false.
OPENAI_STRICT_KEYWORDS = {
    "type",
    "description",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
}
OPENAI_TYPES = {"string", "number", "integer", "boolean", "object", "array", "null"}
NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")  # both providers


def check_openai_strict(node: Any, where: str = "parameters") -> None:
    assert isinstance(node, dict), where
    unknown = set(node) - OPENAI_STRICT_KEYWORDS
    assert not unknown, f"{where}: keywords strict mode does not support: {unknown}"
    kinds = node.get("type")
    if kinds is not None:
        for kind in kinds if isinstance(kinds, list) else [kinds]:
            assert kind in OPENAI_TYPES, f"{where}: type {kind}"
    if node.get("type") == "object" or "properties" in node:
        assert node.get("additionalProperties") is False, f"{where}: additionalProperties must be false"
        assert sorted(node.get("required", [])) == sorted(node["properties"]), f"{where}: every property required"
        for name, sub in node["properties"].items():
            check_openai_strict(sub, f"{where}.{name}")
    if "items" in node:
        check_openai_strict(node["items"], f"{where}[]")
    for index, option in enumerate(node.get("anyOf", [])):
        check_openai_strict(option, f"{where}|{index}")


@pytest.mark.parametrize("api", ["chat", "responses"])
def test_openai_definitions_are_valid_in_strict_mode(api: str) -> None:
    assert len(to_openai_tools(api=api)) == len(ALL_TOOLS)
    definitions = to_openai_tools(ALL_TOOLS + SNAPSHOT_TOOLS + EXEC_TOOLS, api=api)
    for definition in definitions:
        function = definition["function"] if api == "chat" else definition
        assert definition["type"] == "function"
        assert NAME.match(function["name"])
        assert function["description"]
        assert function["strict"] is True
        schema = function["parameters"]
        assert schema["type"] == "object"
        check_openai_strict(schema)
        jsonschema.Draft202012Validator.check_schema(schema)
    json.dumps(definitions)  # serialisable as sent


def test_anthropic_definitions() -> None:
    for definition in to_anthropic_tools(ALL_TOOLS + SNAPSHOT_TOOLS + EXEC_TOOLS):
        assert set(definition) == {"name", "description", "input_schema"}
        assert NAME.match(definition["name"])
        assert definition["input_schema"]["type"] == "object"
        jsonschema.Draft202012Validator.check_schema(definition["input_schema"])
        assert "$ref" not in json.dumps(definition)


def test_optional_parameters_are_nullable_in_strict_mode_and_absent_elsewhere() -> None:
    strict = {d["function"]["name"]: d["function"]["parameters"] for d in to_openai_tools()}
    assert strict["read_file"]["properties"]["offset"]["type"] == ["integer", "null"]
    assert strict["read_file"]["properties"]["path"]["type"] == "string"
    assert "default 2000" in strict["read_file"]["properties"]["limit"]["description"]
    portable = portable_schema(ALL_TOOLS[1].params)
    assert portable["required"] == ["path"]
    assert portable["properties"]["limit"]["minimum"] == 1
    assert portable["properties"]["limit"]["default"] == 2000


@pytest.mark.parametrize("tool", ALL_TOOLS + SNAPSHOT_TOOLS, ids=lambda t: t.name)
def test_calls_shaped_by_each_schema_are_accepted(tool: Any) -> None:
    """A strict-mode call (every key, nulls for optional) and a minimal call both dispatch."""
    fs = InMemoryFilesystem()
    fs.write("a.txt", "alpha\n")
    context = ToolContext(filesystem=fs, read_before_write=False)
    context.snapshots.add(fs.snapshot(tag="s1"))
    every = to_openai_tools(ALL_TOOLS + SNAPSHOT_TOOLS)
    strict = next(d["function"]["parameters"] for d in every if d["function"]["name"] == tool.name)
    samples = {
        "path": "a.txt",
        "src": "a.txt",
        "dst": "b.txt",
        "pattern": "alpha",
        "content": "x",
        "old_string": "alpha",
        "new_string": "beta",
        "snapshot_id": "s1",
        "tag": "t",
    }
    full = {name: samples.get(name) for name in strict["properties"]}
    if tool.name in ("ls", "mkdir", "glob"):
        full["path"] = "newdir" if tool.name == "mkdir" else "."
    if tool.name == "edit_file":
        full["edits"] = None
    result = dispatch(tool.name, json.dumps(full), context)
    assert result.success, result.message
    jsonschema.validate(full, strict)


def test_dispatch_accepts_dicts_and_json_and_explains_bad_arguments() -> None:
    context = ToolContext(filesystem=InMemoryFilesystem())
    assert dispatch("ls", {}, context).success
    assert dispatch("ls", "{}", context).success
    assert dispatch("ls", None, context).success
    bad_json = dispatch("ls", "{path: x", context)
    assert not bad_json.success and "not valid JSON" in bad_json.message
    missing = dispatch("read_file", {}, context)
    assert not missing.success and "path: Field required" in missing.message and "It takes: path" in missing.message
    extra = dispatch("ls", {"path": ".", "colour": "red"}, context)
    assert not extra.success and "colour" in extra.message
    wrong_type = dispatch("read_file", {"path": "a", "offset": "ten"}, context)
    assert not wrong_type.success and "offset" in wrong_type.message
    not_object = dispatch("ls", "[1, 2]", context)
    assert not not_object.success and "JSON object" in not_object.message
