"""Every surface builds its agent from the same config and honours every setting."""

from __future__ import annotations

import json
from pathlib import Path

import acp
import pytest

from core.agent.builder import SURFACES, build_agent
from core.agent.prompt import base_prompt
from core.config import load_config
from core.models.resilient import ResilientModel
from core.store import SessionStore
from tests.acp_harness import Client, agent_env, running_agent
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.hermes_mcp.harness import allow_projects, connected, data, mcp_env
from toolsets import toolset

# Every value differs from its default, so a surface that drops one is caught.
CONFIG = """\
model = "openai:main-model"
fallback_models = ["anthropic:backup-model"]
max_steps = 7
max_tokens = 1234

[providers.openai]
api_key = "sk-test-openai-key-0123456789"
base_url = "http://127.0.0.1:9/v1"
context_window = 54321

[providers.anthropic]
api_key = "sk-ant-test-key-0123456789"
base_url = "http://127.0.0.1:9"

[approvals]
timeout = 42

[learning]
search_summary = true
summary_model = "openai:cheap-model"
memory_nudge_turns = 3
skill_nudge = false
compress_at = 0.5
compress_keep_tail = 4
memory_chars = 999
"""


def _assert_honours(agent, config, surface: str) -> None:
    spec = SURFACES[surface]
    assert isinstance(agent.model, ResilientModel), surface
    assert [m.name for m in agent.model.models] == ["openai:main-model", "anthropic:backup-model"], surface
    assert agent.model.retry == config.retry
    assert agent.max_steps == 7 and agent.max_tokens == 1234, surface
    assert agent.learning == config.learning, surface
    assert agent.summary_model is not None and agent.summary_model.name == "openai:cheap-model", surface
    assert agent.context_window == 54321, surface
    assert list(agent.tools) == [t.name for t in toolset(spec.toolset)], surface
    assert agent.surface == spec.store_name
    expected_timeout = 42 if spec.approval_timeout is None else spec.approval_timeout
    assert agent.broker._timeout == expected_timeout, surface  # [approvals] timeout


@pytest.fixture
def configured(hermes_home: Path, tmp_path: Path):
    (hermes_home / "config.toml").write_text(CONFIG)
    return load_config()


@pytest.mark.parametrize("surface", sorted(SURFACES))
async def test_the_builder_honours_every_setting(configured, surface):
    async with SessionStore.open() as store:
        agent = build_agent(configured, surface, toolset=toolset, store=store)
        _assert_honours(agent, configured, surface)


async def test_acp_surface_builds_through_the_builder(configured):
    from hermes_acp.server import HermesAgent

    server = HermesAgent()
    server._backend.load_config()
    agent = await server._backend.core()
    try:
        _assert_honours(agent, configured, "acp")
    finally:
        await server._backend.aclose()


async def test_mcp_surface_builds_through_the_builder(configured):
    from hermes_mcp.runtime import Runtime

    runtime = Runtime()
    try:
        _assert_honours(await runtime.agent(), configured, "mcp")
    finally:
        await runtime.aclose()


async def test_gateway_surfaces_build_through_the_builder(hermes_home, tmp_path):
    from hermes_gateway.app import Gateway

    project = tmp_path / "project"
    project.mkdir()
    text = CONFIG.replace(
        "[approvals]", f'[telegram]\ntoken = "123:test-token"\n\n[gateway]\nprojects = {{ p = "{project}" }}\n\n[approvals]'
    )
    (hermes_home / "config.toml").write_text(text)
    config = load_config()
    gateway = Gateway(config)
    await gateway.open()
    try:
        _assert_honours(gateway.agent, config, "gateway")
        _assert_honours(gateway.cron_agent, config, "cron")
        assert gateway.cron_agent.model is gateway.agent.model
    finally:
        await gateway.store.close()


@pytest.mark.parametrize("surface", sorted(SURFACES))
def test_the_base_prompt_promises_only_the_tools_a_surface_has(surface):
    names = [t.name for t in toolset(SURFACES[surface].toolset)]
    text = base_prompt(names)
    assert ("run commands" in text) == ("run_command" in names)
    assert ("approves writes and commands" in text) == ("run_command" in names)


def test_the_base_prompt_without_a_tool_list_is_unchanged():
    assert base_prompt() == base_prompt(["read_file", "run_command"])
    assert "run commands through tools" in base_prompt()


def test_an_unknown_surface_is_named():
    with pytest.raises(ValueError, match="unknown surface 'web'"):
        build_agent(load_config(), "web", toolset=toolset, store=None)  # type: ignore[arg-type]


# --- through the real processes: the setting reaches the model's request ------------------------

SETTINGS = "max_tokens = 1234\nmax_steps = 2\n"


def _max_tokens(body: dict) -> int | None:
    return body.get("max_tokens", body.get("max_completion_tokens"))


def _call(name: str, args: dict, call_id: str) -> dict:
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": args}]}


def _looping_script() -> list[dict]:
    # More requests than max_steps allows: the limit, not the script, must end the turn.
    return [_call("list_dir", {"path": "."}, f"c{i}") for i in range(4)] + [{"text": "done"}]


async def test_acp_process_sends_configured_limits(hermes_home, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (hermes_home / "config.toml").write_text(SETTINGS)
    with ScriptedOpenAIServer(_looping_script()) as server:
        async with running_agent(Client(), agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[acp.text_block("look around")])
    assert len(server.requests) == 2
    assert [_max_tokens(body) for body in server.requests] == [1234, 1234]
    assert {body["model"] for body in server.requests} == {"scripted"}


async def test_mcp_process_sends_configured_limits(hermes_home, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (hermes_home / "config.toml").write_text(SETTINGS)
    allow_projects(hermes_home, project)
    with ScriptedOpenAIServer(_looping_script()) as server:
        async with connected(mcp_env(hermes_home, server.base_url)) as client:
            view = data(await client.call_tool("ask", {"prompt": "look around", "cwd": str(project)}))
    assert view["status"] == "done", view
    assert len(server.requests) == 2
    assert [_max_tokens(body) for body in server.requests] == [1234, 1234]
    assert {body["model"] for body in server.requests} == {"scripted"}


async def test_each_surface_is_told_only_of_tools_it_has(hermes_home, tmp_path):
    """The prompt lists skills, memory editing and commands only to a session that has those tools."""
    project = tmp_path / "project"
    (project / ".agents" / "skills" / "deploy").mkdir(parents=True)
    (project / ".agents" / "skills" / "deploy" / "SKILL.md").write_text(
        "---\nname: deploy\ndescription: Ship the site.\n---\nRun make deploy.\n"
    )
    (hermes_home / "memories").mkdir()
    (hermes_home / "memories" / "MEMORY.md").write_text("The user likes short answers.\n")
    allow_projects(hermes_home, project)

    def system(body: dict) -> str:
        return body["messages"][0]["content"] if isinstance(body["messages"][0]["content"], str) else json.dumps(body["messages"][0])

    with ScriptedOpenAIServer([{"text": "hi"}]) as server:
        async with connected(mcp_env(hermes_home, server.base_url)) as client:
            view = data(await client.call_tool("ask", {"prompt": "hello", "cwd": str(project)}))
    assert view["status"] == "done", view
    mcp_prompt = system(server.requests[0])
    offered = {t["function"]["name"] for t in server.requests[0]["tools"]}
    assert "short answers" in mcp_prompt, "memory is still in the prompt"
    for tool, words in (("skill_view", "skill_view"), ("memory", "the memory tool"), ("run_command", "run commands")):
        assert (tool in offered) == (words in mcp_prompt), f"the MCP agent's prompt and its {tool} tool disagree"
    # hermes-mcp runs the whole agent: the prompt's skills and memory are ones it can use.
    assert offered == {t.name for t in toolset("editor")}
    assert "deploy" in mcp_prompt and "skill_view" in mcp_prompt

    with ScriptedOpenAIServer([{"text": "hi"}]) as server:
        async with running_agent(Client(), agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[acp.text_block("hello")])
    acp_prompt = system(server.requests[0])
    assert "skill_view" in acp_prompt and "deploy" in acp_prompt and "the memory tool" in acp_prompt
