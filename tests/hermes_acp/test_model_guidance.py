"""Model-family guidance: the request for a model of a family carries that family's few lines and no
other's; a model switch changes them at the next turn's start, never within a turn (every request
of a turn starts with the one before it, byte for byte).

The real hermes-acp, the ACP SDK client as the editor, and a scripted OpenAI-compatible model."""

from __future__ import annotations

import acp

from benchmarks.prompt_cache import canonical, compare, system_text
from core.models.families import FAMILIES
from tests.acp_harness import Client, agent_env, running_agent
from tests.fakes.openai_server import ScriptedOpenAIServer

GUIDANCE = {f.name: f.guidance for f in FAMILIES}


def _bodies(server) -> list[dict]:
    return [r.get("body", r) for r in server.requests]


def _families(body: dict) -> set[str]:
    return {name for name, text in GUIDANCE.items() if text in system_text(body)}


class _SwitchingClient(Client):
    """Switches the session's model while the turn waits for its permission answer."""

    def __init__(self, sid_box: list[str], label: str) -> None:
        super().__init__(answer="allow_once")
        self.sid_box, self.label = sid_box, label

    async def request_permission(self, options, session_id, tool_call, **kwargs):
        await self.conn.set_config_option(config_id="model", session_id=self.sid_box[0], value=self.label)
        return await super().request_permission(options, session_id, tool_call, **kwargs)


async def test_guidance_follows_the_models_family_from_the_next_turn(hermes_home, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (hermes_home / "config.toml").write_text('fallback_models = []\n[providers.openai]\nmodels = ["qwen3-coder:30b", "my-finetune"]\n')
    script = [
        {"text": "Writing.", "tool_calls": [{"id": "w1", "name": "write_file", "arguments": {"path": "a.txt", "content": "a\n"}}]},
        {"text": "Done."},
        {"text": "Next turn."},
        {"text": "Unknown family."},
    ]
    sid_box: list[str] = []
    with ScriptedOpenAIServer(script) as server:
        server.keep_raw = True
        client = _SwitchingClient(sid_box, "openai:qwen3-coder:30b")
        async with running_agent(client, agent_env(hermes_home, server.base_url, model="openai:gpt-4.1")) as (conn, _, _):
            sid_box.append((await conn.new_session(cwd=str(project), mcp_servers=[])).session_id)
            for text in ["write a.txt", "and now?"]:
                assert (await conn.prompt(session_id=sid_box[0], prompt=[acp.text_block(text)])).stop_reason == "end_turn"
            await conn.set_config_option(config_id="model", session_id=sid_box[0], value="openai:my-finetune")
            assert (await conn.prompt(session_id=sid_box[0], prompt=[acp.text_block("who?")])).stop_reason == "end_turn"
    first, second, next_turn, unknown = _bodies(server)
    assert [b["model"] for b in (first, second, next_turn, unknown)] == ["gpt-4.1", "qwen3-coder:30b", "qwen3-coder:30b", "my-finetune"]
    assert _families(first) == {"gpt"}
    # Switched mid-turn: the new model answers the rest of the turn under the prompt the turn began with.
    assert system_text(second) == system_text(first)
    assert compare(canonical(first), canonical(second)).holds
    assert _families(next_turn) == {"open-weights"}
    assert system_text(next_turn).replace(GUIDANCE["open-weights"], GUIDANCE["gpt"]) == system_text(first)
    assert _families(unknown) == set() and "# Working notes for this model" not in system_text(unknown)


async def test_each_family_gets_its_own_lines(hermes_home, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    labels = {"claude": "claude-sonnet-4.5", "gpt": "gpt-5", "gemini": "gemini-2.5-pro", "deepseek": "deepseek-chat"}
    models = ", ".join(f'"{m}"' for m in labels.values())
    (hermes_home / "config.toml").write_text(f"fallback_models = []\n[providers.openai]\nmodels = [{models}]\n")
    with ScriptedOpenAIServer([{"text": "ok"}] * len(labels)) as server:
        async with running_agent(Client(), agent_env(hermes_home, server.base_url)) as (conn, _, _):
            for model in labels.values():
                sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
                await conn.set_config_option(config_id="model", session_id=sid, value=f"openai:{model}")
                await conn.prompt(session_id=sid, prompt=[acp.text_block("hi")])
    for family, body in zip(labels, _bodies(server)):
        assert body["model"] == labels[family] and _families(body) == {family}


async def test_a_providers_family_setting_decides_over_the_models_name(hermes_home, tmp_path):
    """gpt-oss is an open-weights model behind an OpenAI-compatible server: its entry says so."""
    project = tmp_path / "project"
    project.mkdir()
    (hermes_home / "config.toml").write_text('fallback_models = []\n[providers.openai]\nfamily = "open-weights"\n')
    with ScriptedOpenAIServer([{"text": "ok"}]) as server:
        async with running_agent(Client(), agent_env(hermes_home, server.base_url, model="openai:gpt-oss-20b")) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[acp.text_block("hi")])
    (body,) = _bodies(server)
    assert body["model"] == "gpt-oss-20b" and _families(body) == {"open-weights"}
