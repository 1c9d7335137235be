"""What a remote MCP tool becomes here: a name providers accept, an arguments model from its
input schema, and the text of its result."""

from __future__ import annotations

import copy
import hashlib
import json
import re
from typing import Any

from pydantic import RootModel

__all__ = ["MAX_RESULT_CHARS", "arguments_model", "hashed_tool_name", "mcp_tool_name", "normalise_schema", "result_text"]

MAX_NAME = 64  # what OpenAI and Anthropic accept for a tool name
MAX_RESULT_CHARS = 50_000


def mcp_tool_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``, limited to [A-Za-z0-9_-] and 64 characters.

    A name that would be too long keeps its start and gets a short hash of the full name, so
    it stays unique and the same from session to session (a byte-stable prompt prefix).
    """
    name = f"mcp__{_sanitise(server)}__{_sanitise(tool)}"
    if len(name) <= MAX_NAME:
        return name
    return name[: MAX_NAME - 9] + "_" + _short_hash(server, tool)


def hashed_tool_name(name: str, server: str, tool: str) -> str:
    """``name`` cut short with a hash of where it came from: for two remote names that sanitise alike."""
    return name[: MAX_NAME - 9] + "_" + _short_hash(server, tool)


def _sanitise(part: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", part) or "_"


def _short_hash(*parts: str) -> str:
    return hashlib.sha1("\0".join(parts).encode()).hexdigest()[:8]


def result_text(result: Any, limit: int = MAX_RESULT_CHARS) -> str:
    """The text the model reads for a ``CallToolResult``: text blocks joined, the rest summarised."""
    parts: list[str] = []
    has_text = False
    for block in result.content:
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append(block.text)
            has_text = True
        elif kind in ("image", "audio"):
            size = len(block.data) * 3 // 4 - block.data[-2:].count("=")  # decoded size of the base64
            parts.append(f"[{kind} {block.mime_type}, {size} bytes]")
        elif kind == "resource_link":
            parts.append(f"[resource {block.uri}]")
        elif kind == "resource":
            resource = block.resource
            text = getattr(resource, "text", None)
            if text is not None:
                # Embedded text is the content itself (a file, a page): the model needs it.
                parts.append(f"[resource {resource.uri}]\n{text}")
                has_text = True
            else:
                parts.append(f"[resource {resource.uri}, {resource.mime_type or 'binary'}]")
        else:
            parts.append(f"[{kind or 'unknown'} content]")
    if not has_text and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    text = "\n".join(parts)
    if len(text) > limit:
        text = text[:limit] + f"\n[truncated: the result has {len(text)} characters; showing the first {limit}]"
    return text


def arguments_model(schema: dict[str, Any]) -> type[RootModel[dict[str, Any]]]:
    """An arguments model that accepts any JSON object and whose JSON schema is the server's."""
    schema = normalise_schema(schema)

    class RemoteArguments(RootModel[dict[str, Any]]):
        # Tool.spec() asks the model for its schema; the server's own schema is the truth, and
        # the server validates the arguments itself (its errors come back for the model to read).
        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return copy.deepcopy(schema)

    return RemoteArguments


def normalise_schema(raw: Any) -> dict[str, Any]:
    """The server's input schema, made safe for Tool.spec() and for providers."""
    schema: dict[str, Any] = copy.deepcopy(raw) if isinstance(raw, dict) else {}
    schema.setdefault("type", "object")
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        properties = {}
    # Boolean sub-schemas are valid JSON Schema, but Tool.spec() edits each property as a dict.
    schema["properties"] = {key: value if isinstance(value, dict) else ({} if value else {"not": {}}) for key, value in properties.items()}
    return schema
