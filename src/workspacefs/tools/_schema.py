"""JSON Schemas for tool parameters, in the shapes providers accept.

One source: each tool's pydantic model. From it, a *portable* schema (refs inlined, titles dropped,
``additionalProperties: false``) that Anthropic and MCP take as is, and an OpenAI *strict-mode*
schema (every property required, optional ones nullable, only the keywords strict mode supports;
bounds and defaults move into the descriptions so the model still learns them).
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import BaseModel

__all__ = ["openai_strict_schema", "portable_schema", "prune_nulls"]

JsonSchema = dict[str, Any]

# Keywords OpenAI strict mode accepts; everything else is folded into the description.
_STRICT_KEYWORDS = frozenset(
    {"type", "description", "properties", "required", "additionalProperties", "items", "enum", "const", "anyOf"}
)
_BOUNDS = {
    "minimum": "at least {}",
    "maximum": "at most {}",
    "exclusiveMinimum": "more than {}",
    "exclusiveMaximum": "less than {}",
    "minLength": "at least {} characters",
    "maxLength": "at most {} characters",
    "minItems": "at least {} items",
    "maxItems": "at most {} items",
}


def _inline(node: Any, definitions: dict[str, Any]) -> Any:
    if isinstance(node, dict):
        if "$ref" in node:
            name = node["$ref"].rsplit("/", 1)[-1]
            merged = {**copy.deepcopy(definitions[name]), **{k: v for k, v in node.items() if k != "$ref"}}
            return _inline(merged, definitions)
        return {k: _inline(v, definitions) for k, v in node.items() if k not in ("title", "$defs")}
    if isinstance(node, list):
        return [_inline(item, definitions) for item in node]
    return node


def _drop_null_branch(node: JsonSchema) -> JsonSchema:
    """``anyOf: [X, null]`` (pydantic's spelling of an optional field) becomes ``X``: absent means null."""
    options = node.get("anyOf")
    if isinstance(options, list):
        concrete = [o for o in options if o != {"type": "null"}]
        if len(concrete) == 1 and len(concrete) < len(options):
            rest = {k: v for k, v in node.items() if k != "anyOf" and not (k == "default" and v is None)}
            return {**concrete[0], **rest}
    return node


def _close_objects(node: Any) -> Any:
    if isinstance(node, dict):
        node = _drop_null_branch({k: _close_objects(v) for k, v in node.items()})
        if node.get("type") == "object" and "properties" in node:
            node["additionalProperties"] = False
        return node
    if isinstance(node, list):
        return [_close_objects(item) for item in node]
    return node


def portable_schema(model: type[BaseModel]) -> JsonSchema:
    """The model's parameter schema with references inlined and objects closed."""
    raw = model.model_json_schema()
    inlined = _inline(raw, raw.get("$defs", {}))
    schema: JsonSchema = _close_objects(inlined)
    return schema


def _describe(node: JsonSchema, extra: list[str]) -> None:
    if extra:
        text = node.get("description", "")
        node["description"] = (text + " " if text else "") + "(" + "; ".join(extra) + ")"


def _strict(node: Any, *, optional: bool = False) -> Any:
    if isinstance(node, list):
        return [_strict(item) for item in node]
    if not isinstance(node, dict):
        return node
    notes = [template.format(node[key]) for key, template in _BOUNDS.items() if key in node]
    if "default" in node and node["default"] is not None:
        notes.append(f"default {node['default']!r}".replace("True", "true").replace("False", "false"))
    result: JsonSchema = {}
    for key, value in node.items():
        if key not in _STRICT_KEYWORDS:
            continue
        if key == "properties":
            required = set(node.get("required", []))
            result[key] = {name: _strict(sub, optional=name not in required) for name, sub in value.items()}
        elif key in ("items", "anyOf"):
            result[key] = _strict(value)
        else:
            result[key] = copy.deepcopy(value)
    if "properties" in result:
        result["required"] = list(result["properties"])
        result["additionalProperties"] = False
    _describe(result, notes)
    if optional:
        if "anyOf" in result:
            result["anyOf"] = [*result["anyOf"], {"type": "null"}]
        elif isinstance(result.get("type"), str):
            result["type"] = [result["type"], "null"]
    return result


def openai_strict_schema(model: type[BaseModel]) -> JsonSchema:
    """A schema valid under OpenAI's strict function calling: all properties required, nulls for optional."""
    schema: JsonSchema = _strict(portable_schema(model))
    return schema


def prune_nulls(value: Any) -> Any:
    """Drop ``null`` object members, so strict-mode calls (which send every optional key) get defaults."""
    if isinstance(value, dict):
        return {k: prune_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [prune_nulls(item) for item in value]
    return value
