"""New files are sent with an explicit ``"oldText": null``, as editors expect."""

import acp

from tests.acp_harness import Client, agent_env, running_agent
from tests.fakes.openai_server import ScriptedOpenAIServer


async def test_new_file_diff_has_explicit_null_old_text(hermes_home, tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    script = [{"tool_calls": [{"id": "c1", "name": "write_file", "arguments": {"path": "new.txt", "content": "x\n"}}]}, {"text": "ok"}]
    with ScriptedOpenAIServer(script) as server:
        client = Client()
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, transcript):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[acp.text_block("new file")])
    sent = transcript.from_agent()
    permission = [m for m in sent if m.get("method") == "session/request_permission"][0]
    diff = permission["params"]["toolCall"]["content"][0]
    assert diff["type"] == "diff" and "oldText" in diff and diff["oldText"] is None
    final = [m for m in sent if m.get("method") == "session/update" and m["params"]["update"].get("status") == "completed"][0]
    assert final["params"]["update"]["content"][0]["oldText"] is None
