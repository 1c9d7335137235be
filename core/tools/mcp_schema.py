"""What a remote MCP tool becomes here: a name providers accept, an arguments model from its
input schema, and the text of its result."""

from __future__ import annotations

import copy
import hashlib
import json
import re
from typing import Any

from pydantic import RootModel

__all__ = ["MAX_NAME", "MAX_RESULT_CHARS", "arguments_model", "mcp_tool_name", "normalise_schema", "result_text"]

MAX_NAME = 64  # what OpenAI and Anthropic accept for a tool name
MAX_RESULT_CHARS = 50_000


def mcp_tool_name(server: str, tool: str) -> str:
    """The name the model calls a remote tool by: ``mcp__<server>__<tool>``, or a hashed form.

    Providers take ``[A-Za-z0-9_-]{1,64}``. The plain form is used when the server name has no
    ``__`` and no ``_`` at either end and the tool name is already in that alphabet, within 64
    characters: then the server is what precedes the first ``__`` after ``mcp__``, so two
    different (server, tool) pairs never meet. Anything else becomes
    ``mcp_<hash>_<server>__<tool>`` (sanitised, cut to 64), where the hash is of the exact pair;
    the fifth character tells the forms apart (``_`` or a hex digit). The same pair always gets
    the same name, so prompts stay byte-stable from session to session.
    """
    plain = f"mcp__{server}__{tool}"
    if _PLAIN_SERVER.fullmatch(server) and _PLAIN_TOOL.fullmatch(tool) and len(plain) <= MAX_NAME:
        return plain
    return f"mcp_{_short_hash(server, tool)}_{_sanitise(server)}__{_sanitise(tool)}"[:MAX_NAME]


_PLAIN_SERVER = re.compile(r"[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*")
_PLAIN_TOOL = re.compile(r"[A-Za-z0-9_-]+")


def _sanitise(part: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", part) or "_"


def _short_hash(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:10]


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
