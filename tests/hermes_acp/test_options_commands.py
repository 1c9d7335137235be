"""Config options, modes, slash commands, plans, usage and title updates, queued prompts, images."""

from __future__ import annotations

import asyncio

import acp
import pytest

from tests.acp_harness import Client, agent_env, running_agent, until
from tests.fakes.openai_server import ScriptedOpenAIServer


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    return root


def _body(request: dict) -> dict:
    return request.get("body", request)


def _last_user_text(body: dict) -> str:
    content = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


def _config(home, extra: str = "") -> None:
    (home / "config.toml").write_text('fallback_models = []\n[providers.openai]\nmodels = ["other-model"]\n' + extra)


async def test_new_session_offers_model_mode_and_thought_level(hermes_home, project):
    _config(hermes_home)
    with ScriptedOpenAIServer([]) as server:
        client = Client()
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            response = await conn.new_session(cwd=str(project), mcp_servers=[])
            await until(lambda: client.of_kind("available_commands_update"), what="the command list")
    options = {o.id: o for o in response.config_options}
    assert options["model"].category == "model" and options["model"].current_value == "openai:scripted"
    assert [o.value for o in options["model"].options] == ["openai:scripted", "openai:other-model"]
    assert options["mode"].category == "mode" and options["mode"].current_value == "ask"
    assert {o.value for o in options["mode"].options} == {"read-only", "ask", "accept-edits", "auto"}
    assert options["thought_level"].category == "thought_level"
    assert response.modes.current_mode_id == "ask" and len(response.modes.available_modes) == 4
    (commands,) = client.of_kind("available_commands_update")
    names = {c.name for c in commands.available_commands}
    assert {"compact", "undo", "memory", "skills", "search", "model", "mode", "init", "cost", "help"} <= names
    search = [c for c in commands.available_commands if c.name == "search"][0]
    assert search.input.root.hint == "query"


async def test_mode_option_changes_what_asks(hermes_home, project):
    script = [
        {"tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "a.txt", "content": "a"}}]},
        {"text": "ok"},
        {"tool_calls": [{"id": "w2", "name": "write_file", "arguments": {"path": "b.txt", "content": "b"}}]},
        {"text": "refused"},
    ]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer="reject_once")
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            result = await conn.set_config_option(config_id="mode", session_id=sid, value="accept-edits")
            assert {o.id: o.current_value for o in result.config_options}["mode"] == "accept-edits"
            await conn.prompt(session_id=sid, prompt=[acp.text_block("write a")])
            await conn.set_session_mode(session_id=sid, mode_id="read-only")
            await conn.prompt(session_id=sid, prompt=[acp.text_block("write b")])
            with pytest.raises(acp.RequestError):
                await conn.set_session_mode(session_id=sid, mode_id="yolo")
    assert (project / "a.txt").read_text() == "a" and client.permission_requests == []
    assert not (project / "b.txt").exists()
    assert client.tool_updates("w2")[-1].status == "failed"
    assert "read-only" in _body(server.requests[3])["messages"][-1]["content"]


async def test_model_and_thought_level_reach_the_request(hermes_home, project):
    _config(hermes_home)
    with ScriptedOpenAIServer([{"text": "a"}, {"text": "b"}]) as server:
        async with running_agent(Client(), agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            await conn.set_config_option(config_id="model", session_id=sid, value="openai:other-model")
            await conn.set_config_option(config_id="thought_level", session_id=sid, value="high")
            await conn.prompt(session_id=sid, prompt=[acp.text_block("one")])
            with pytest.raises(acp.RequestError):
                await conn.set_config_option(config_id="model", session_id=sid, value="nope:x")
            await conn.set_config_option(config_id="thought_level", session_id=sid, value="default")
            await conn.set_config_option(config_id="model", session_id=sid, value="openai:scripted")
            await conn.prompt(session_id=sid, prompt=[acp.text_block("two")])
    first, second = _body(server.requests[0]), _body(server.requests[1])
    assert first["model"] == "other-model" and first["reasoning_effort"] == "high"
    assert second["model"] == "scripted" and "reasoning_effort" not in second


async def test_choices_survive_a_restart(hermes_home, project):
    _config(hermes_home)
    with ScriptedOpenAIServer([{"text": "x"}]) as server:
        async with running_agent(Client(), agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            await conn.set_config_option(config_id="mode", session_id=sid, value="auto")
            await conn.set_config_option(config_id="model", session_id=sid, value="openai:other-model")
        async with running_agent(Client(), agent_env(hermes_home, server.base_url)) as (conn, _, _):
            loaded = await conn.load_session(cwd=str(project), session_id=sid, mcp_servers=[])
            await conn.prompt(session_id=sid, prompt=[acp.text_block("hi")])
    assert {o.id: o.current_value for o in loaded.config_options} | {} == {
        "model": "openai:other-model",
        "mode": "auto",
        "thought_level": "default",
    }
    assert loaded.modes.current_mode_id == "auto"
    assert _body(server.requests[0])["model"] == "other-model"


async def test_slash_commands(hermes_home, project):
    _config(hermes_home)
    script = [
        {"text": "The answer involves zeppelins."},
        {"text": "Summary: we discussed zeppelins."},
        {"text": "after compact"},
        {"text": "AGENTS written"},
        {"text": "plain"},
    ]
    with ScriptedOpenAIServer(script) as server:
        client = Client()
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id

            async def say(text: str) -> str:
                before = len(client.of_kind("agent_message_chunk"))
                await conn.prompt(session_id=sid, prompt=[acp.text_block(text)])
                return "".join(u.content.text for u in client.of_kind("agent_message_chunk")[before:])

            assert "/search" in await say("/help")
            await say("tell me about airships")
            assert "zeppelins" in await say("/search zeppelins")
            assert "Output tokens" in await say("/cost")
            mode_reply = await say("/mode auto")
            assert "auto" in mode_reply and client.of_kind("current_mode_update")[-1].current_mode_id == "auto"
            assert "openai:other-model" in await say("/model openai:other-model")
            option_updates = client.of_kind("config_option_update")
            assert {o.id: o.current_value for o in option_updates[-1].config_options}["model"] == "openai:other-model"
            assert "Compacted" in await say("/compact")
            await say("what now?")
            await say("/init")
            await say("/unknown stays text")
            assert "Nothing remembered" in await say("/memory")
            assert "No skills" in await say("/skills")
    bodies = [_body(r) for r in server.requests]
    assert len(bodies) == 5, "help, search, cost, mode, model, memory and skills never reach the model"
    assert "Summarise the conversation above" in _last_user_text(bodies[1])
    after_compact = bodies[2]
    user_texts = [m["content"] for m in after_compact["messages"] if m["role"] == "user"]
    # Head/tail compression: the first request stays, followed by the summary; the reply is gone.
    assert "tell me about airships" in str(user_texts[0]) and "we discussed zeppelins" in str(user_texts[0])
    assert "The answer involves zeppelins" not in str(after_compact["messages"])
    assert "AGENTS.md" in _last_user_text(bodies[3])
    assert _last_user_text(bodies[4]) == "/unknown stays text"


async def test_usage_title_and_plan_updates(hermes_home, project):
    script = [
        {
            "tool_calls": [
                {
                    "id": "p",
                    "name": "update_plan",
                    "arguments": {
                        "entries": [
                            {"content": "Read", "status": "completed", "priority": "high"},
                            {"content": "Write", "status": "in_progress"},
                        ]
                    },
                }
            ],
            "usage": {"input_tokens": 1200, "output_tokens": 30},
        },
        {"text": "done", "usage": {"input_tokens": 1300, "output_tokens": 5}},
    ]
    with ScriptedOpenAIServer(script) as server:
        client = Client()
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[acp.text_block("Plan the refactor of the parser")])
    (plan,) = client.of_kind("plan")
    assert [(e.content, e.status, e.priority) for e in plan.entries] == [("Read", "completed", "high"), ("Write", "in_progress", "medium")]
    usage = client.of_kind("usage_update")
    assert len(usage) == 2 and usage[-1].used == 1305 and usage[-1].size == 128_000
    (info,) = client.of_kind("session_info_update")
    assert info.title == "Plan the refactor of the parser"


async def test_a_second_prompt_waits_for_the_first(hermes_home, project):
    script = [{"text": "first " * 30, "chunk_size": 6, "delay": 0.02}, {"text": "second"}]
    with ScriptedOpenAIServer(script) as server:
        client = Client()
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            first = asyncio.create_task(conn.prompt(session_id=sid, prompt=[acp.text_block("one")]))
            await until(lambda: client.of_kind("agent_message_chunk"), what="the first turn's first chunk")
            second = await conn.prompt(session_id=sid, prompt=[acp.text_block("two")])
            assert (await first).stop_reason == "end_turn" and second.stop_reason == "end_turn"
    assert "Queued" in client.text()
    assert client.text().rstrip().endswith("second")
    assert _last_user_text(_body(server.requests[1])) == "two"


async def test_images_reach_models_that_take_them(hermes_home, project):
    pixel = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    with ScriptedOpenAIServer([{"text": "a red pixel"}]) as server:
        async with running_agent(Client(), agent_env(hermes_home, server.base_url)) as (conn, _, _):
            assert conn.init_response.agent_capabilities.prompt_capabilities.image is True
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[acp.text_block("what is this?"), acp.image_block(pixel, "image/png")])
    content = [m for m in _body(server.requests[0])["messages"] if m["role"] == "user"][-1]["content"]
    images = [p for p in content if p.get("type") == "image_url"]
    assert images and images[0]["image_url"]["url"] == f"data:image/png;base64,{pixel}"


async def test_undo_command_restores_the_last_turns_files(hermes_home, project):
    (project / "keep.txt").write_text("original\n")
    script = [
        {
            "tool_calls": [
                {"id": "e", "name": "write_file", "arguments": {"path": "keep.txt", "content": "changed\n"}},
                {"id": "n", "name": "write_file", "arguments": {"path": "new.txt", "content": "new\n"}},
            ]
        },
        {"text": "changed both"},
    ]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer="allow_once")
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            assert "Nothing to undo" in await _say(conn, client, sid, "/undo")
            await conn.prompt(session_id=sid, prompt=[acp.text_block("change things")])
            assert (project / "keep.txt").read_text() == "changed\n" and (project / "new.txt").exists()
            reply = await _say(conn, client, sid, "/undo")
    assert "Restored" in reply and "keep.txt" in reply
    assert (project / "keep.txt").read_text() == "original\n" and not (project / "new.txt").exists()
    assert len(server.requests) == 2, "/undo never reaches the model"


async def _say(conn, client, sid, text):
    before = len(client.of_kind("agent_message_chunk"))
    await conn.prompt(session_id=sid, prompt=[acp.text_block(text)])
    return "".join(u.content.text for u in client.of_kind("agent_message_chunk")[before:])
