"""History over MCP: sessions of every surface listed, searched and read a page at a time, kept small."""

from __future__ import annotations

import json

import pytest

from core.messages import AssistantMessage, TextPart, ToolCallPart, ToolResultMessage, UserMessage
from core.store import SessionStore
from tests.hermes_mcp.harness import ERAS, connected, data, error_text, mcp_env


async def _seed(count: int = 5) -> list[str]:
    ids = []
    async with SessionStore.open() as store:
        for n in range(count):
            surface = "acp" if n % 2 == 0 else "gateway"
            record = await store.create_session(cwd=f"/work/p{n % 2}", surface=surface, model="openai:x", title=f"session {n}")
            await store.append_message(record.id, UserMessage.of(f"please fix the flux capacitor number {n}"))
            await store.append_message(
                record.id,
                AssistantMessage(
                    parts=[TextPart(text=f"Looking at flux {n}."), ToolCallPart(id="c1", name="read_file", arguments={"path": "flux.py"})]
                ),
            )
            await store.append_message(record.id, ToolResultMessage(tool_call_id="c1", tool_name="read_file", content="1\tflux = 1"))
            ids.append(record.id)
    return ids


@pytest.mark.parametrize("mode", ERAS)
async def test_sessions_list_pages_newest_first(hermes_home, mode):
    ids = await _seed(5)
    async with connected(mcp_env(hermes_home), mode=mode) as client:
        first = data(await client.call_tool("sessions_list", {"limit": 2}))
        second = data(await client.call_tool("sessions_list", {"limit": 2, "cursor": first["next_cursor"]}))
        third = data(await client.call_tool("sessions_list", {"limit": 2, "cursor": second["next_cursor"]}))
        only_p1 = data(await client.call_tool("sessions_list", {"cwd": "/work/p1"}))
        bad = error_text(await client.call_tool("sessions_list", {"cursor": "garbage"}))
    seen = [s["session_id"] for page in (first, second, third) for s in page["sessions"]]
    assert seen == list(reversed(ids))
    assert third["next_cursor"] is None
    assert {s["surface"] for s in first["sessions"] + second["sessions"]} == {"acp", "gateway"}
    assert {s["cwd"] for s in only_p1["sessions"]} == {"/work/p1"} and len(only_p1["sessions"]) == 2
    assert "cursor" in bad


async def test_sessions_search_finds_messages_of_every_surface(hermes_home):
    ids = await _seed(4)
    async with connected(mcp_env(hermes_home)) as client:
        page = data(await client.call_tool("sessions_search", {"query": "flux capacitor", "limit": 3}))
        rest = data(await client.call_tool("sessions_search", {"query": "flux capacitor", "limit": 3, "cursor": page["next_cursor"]}))
        one = data(await client.call_tool("sessions_search", {"query": "flux", "session_id": ids[2]}))
        operators = data(await client.call_tool("sessions_search", {"query": 'NEAR( "flux" AND -'}))
    hits = page["hits"] + rest["hits"]
    assert sorted(h["session_id"] for h in hits) == sorted(ids)
    assert rest["next_cursor"] is None
    assert all("[flux]" in h["snippet"] and h["role"] == "user" for h in hits)
    assert {h["session_id"] for h in one["hits"]} == {ids[2]}
    assert operators["hits"] == []  # free text, never FTS syntax


async def test_session_read_pages_through_a_conversation(hermes_home):
    (sid,) = await _seed(1)
    async with connected(mcp_env(hermes_home)) as client:
        first = data(await client.call_tool("session_read", {"session_id": sid, "limit": 2}))
        rest = data(await client.call_tool("session_read", {"session_id": sid, "after": first["next_after"]}))
    assert first["total_messages"] == 3 and first["session"]["title"] == "session 0"
    assert [m["role"] for m in first["messages"]] == ["user", "assistant"]
    assert first["messages"][1]["tool_calls"] == ['read_file({"path": "flux.py"})']
    assert first["next_after"] == 2
    assert [(m["seq"], m["role"], m["tool_name"]) for m in rest["messages"]] == [(3, "tool_result", "read_file")]
    assert rest["next_after"] is None


async def test_big_conversations_stay_under_100_kb_per_result(hermes_home):
    huge = "x" * 300_000
    async with SessionStore.open() as store:
        record = await store.create_session(cwd="/work/big", surface="acp", title="big")
        for _ in range(60):
            await store.append_message(record.id, UserMessage.of("flux " + huge))
    async with connected(mcp_env(hermes_home)) as client:
        page = await client.call_tool("session_read", {"session_id": record.id, "limit": 100})
        hits = await client.call_tool("sessions_search", {"query": "flux", "limit": 50})
        resource = await client.read_resource(f"hermes://sessions/{record.id}")
    for result in (page, hits):
        wire = len(json.dumps(result.model_dump(mode="json", by_alias=True, exclude_none=True)))
        assert wire < 100_000, wire
    read = data(page)
    assert read["messages"] and all(m["truncated"] for m in read["messages"])
    assert read["next_after"] is not None
    text = resource.contents[0].text
    assert len(text) < 100_000 and "[cut: " in text and "session_read(session_id=" in text


async def test_session_resource_is_markdown(hermes_home):
    (sid,) = await _seed(1)
    async with connected(mcp_env(hermes_home)) as client:
        listed = await client.list_resources()
        content = await client.read_resource(f"hermes://sessions/{sid}")
        index = await client.read_resource("hermes://sessions")
    assert f"hermes://sessions/{sid}" in [str(r.uri) for r in listed.resources]
    text = content.contents[0].text
    assert text.startswith("# session 0") and "please fix the flux capacitor" in text and "read_file" in text
    assert sid in index.contents[0].text
