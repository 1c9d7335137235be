"""Skills the editor's session is not offered (``fallback_for_toolsets`` naming one of its toolsets,
``requires_toolsets`` naming one it lacks) are neither slash commands nor listed nor in the prompt's
index; a fallback for toolsets it lacks is all three. Real hermes-acp, the ACP SDK client, a scripted model."""

from __future__ import annotations

import acp

from benchmarks.prompt_cache import system_text
from tests.acp_harness import Client, agent_env, running_agent, until
from tests.fakes.openai_server import ScriptedOpenAIServer


def _skill(root, name: str, extra: str) -> None:
    folder = root / ".agents" / "skills" / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: the {name} skill\n{extra}---\nBODY OF {name}.\n")


async def test_conditions_hold_for_commands_listing_and_index(hermes_home, tmp_path):
    project = tmp_path / "project"
    _skill(project, "instead-of-editor", "fallback_for_toolsets: [editor]\n")
    _skill(project, "needs-cron", "requires_toolsets: [cron]\n")
    _skill(project, "instead-of-browser", "fallback_for_toolsets: [browser]\n")
    # Written as Hermes Agent's skills write their conditions, naming its capability toolsets.
    _skill(project, "curl-instead-of-web", "metadata:\n  hermes:\n    fallback_for_toolsets:\n      - web\n")
    _skill(project, "needs-a-terminal", "metadata:\n  hermes:\n    requires_toolsets: [terminal, file]\n")
    with ScriptedOpenAIServer([{"text": "plain"}, {"text": "skilled"}]) as server:
        client = Client()
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            await until(lambda: client.of_kind("available_commands_update"), what="the command list")
            offered = {c.name for c in client.of_kind("available_commands_update")[-1].available_commands}
            before = len(client.of_kind("agent_message_chunk"))
            await conn.prompt(session_id=sid, prompt=[acp.text_block("/skills")])
            listing = "".join(u.content.text for u in client.of_kind("agent_message_chunk")[before:])
            await conn.prompt(session_id=sid, prompt=[acp.text_block("/instead-of-editor now")])
            await conn.prompt(session_id=sid, prompt=[acp.text_block("/instead-of-browser now")])
    assert "instead-of-browser" in offered and "personality" in offered
    assert "instead-of-editor" not in offered and "needs-cron" not in offered
    # The editor's session has web tools, a terminal and file tools: the groups skills name.
    assert "curl-instead-of-web" not in offered and "needs-a-terminal" in offered
    assert "`instead-of-browser`" in listing and "instead-of-editor" not in listing and "needs-cron" not in listing
    plain, skilled = (r.get("body", r) for r in server.requests)
    # Not a command here: the text goes to the model as typed.
    assert plain["messages"][-1]["content"] == "/instead-of-editor now"
    index = system_text(plain)
    assert "- instead-of-browser: the instead-of-browser skill" in index and "instead-of-editor" not in index
    assert "BODY OF instead-of-browser." in str(skilled["messages"][-1]["content"])
