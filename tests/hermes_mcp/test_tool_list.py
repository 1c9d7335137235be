"""The tool list: few short names, every tool async, annotations that tell the truth, output schemas, small."""

from __future__ import annotations

import json

import pytest

from hermes_mcp.app import build_server
from hermes_mcp.runtime import Runtime
from hermes_mcp.tools import TOOL_NAMES, compact_schema, tool_names
from tests.hermes_mcp.harness import ERAS, connected, mcp_env

# name -> (readOnly, destructive, idempotent, openWorld); None where the hint does not apply
ANNOTATIONS = {
    "ask": (False, True, False, True),
    "task_start": (False, True, False, True),
    "task_status": (True, None, None, False),
    "task_wait": (True, None, None, False),
    "task_cancel": (False, False, True, False),
    "approvals_list": (True, None, None, False),
    "approval_respond": (False, True, True, False),
    "sessions_search": (True, None, None, False),
    "sessions_list": (True, None, None, False),
    "session_read": (True, None, None, False),
    "skills_list": (True, None, None, False),
    "skill_view": (True, None, None, False),
    "memory_read": (True, None, None, False),
    "memory_add": (False, False, False, False),
}
# The whole tools/list result; the issue asks for this figure (README and report quote it).
TOOL_LIST_MAX_BYTES = 26_000


@pytest.mark.parametrize("mode", ERAS)
@pytest.mark.parametrize("trusted", [False, True])
async def test_tools_are_few_short_annotated_and_structured(hermes_home, mode, trusted):
    args = ("--trust-client-approvals",) if trusted else ()
    async with connected(mcp_env(hermes_home), mode=mode, args=args) as client:
        listed = await client.list_tools()
    tools = {t.name: t for t in listed.tools}
    assert list(tools) == list(tool_names(trusted)) and len(tools) <= 15
    assert ("approval_respond" in tools) is trusted, "only an explicit flag lets the client's model answer approvals"
    for name, tool in tools.items():
        assert len(name) <= 16 and tool.description and len(tool.description) < 400, name
        hints = tool.annotations
        assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint, hints.open_world_hint) == ANNOTATIONS[name], name
        assert hints.title
        assert tool.output_schema and tool.output_schema["type"] == "object", name
        assert "title" not in json.dumps(tool.input_schema).replace('"title": {', ""), name
    size = len(json.dumps(listed.model_dump(mode="json", by_alias=True, exclude_none=True), separators=(",", ":")))
    assert size < TOOL_LIST_MAX_BYTES, size


@pytest.mark.parametrize("trusted", [False, True])
def test_every_tool_is_async(hermes_home, trusted):
    server = build_server(Runtime(trust_client_approvals=trusted))
    registered = server._tool_manager.list_tools()
    assert [t.name for t in registered] == list(tool_names(trusted))
    assert all(t.is_async for t in registered)
    assert len(TOOL_NAMES) == 13 and len(tool_names(True)) == 14


def test_compact_schema_keeps_the_meaning():
    schema = {
        "title": "Args",
        "type": "object",
        "properties": {
            "title": {"title": "Title", "anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            "n": {"title": "N", "type": "integer", "default": 3},
            "kind": {"enum": ["title", "x"], "type": "string"},
        },
    }
    assert compact_schema(schema) == {
        "type": "object",
        "properties": {
            "title": {"type": "string"},
            "n": {"type": "integer", "default": 3},
            "kind": {"enum": ["title", "x"], "type": "string"},
        },
    }
    output = compact_schema(schema, output=True)
    assert output["properties"]["title"] == {"anyOf": [{"type": "string"}, {"type": "null"}]}
    assert "default" not in json.dumps(output)
