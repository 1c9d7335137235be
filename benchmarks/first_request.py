"""Size of the first model request for "say hello" in an empty project, editor toolset.

Run: .venv/bin/python benchmarks/first_request.py
"""

from __future__ import annotations

import asyncio
import json
import sys
import tempfile
from pathlib import Path

from core.agent import Agent
from core.approvals import ApprovalBroker
from core.config import load_config
from core.host import LocalHost
from core.messages import UserMessage
from core.models import build_model
from core.store import SessionStore
from hermes_cli.scripted_model import ScriptedOpenAIServer
from toolsets import toolset


async def measure() -> dict:
    with ScriptedOpenAIServer([{"text": "hello"}]) as server, tempfile.TemporaryDirectory() as tmp:
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-bench-000000", "HERMES_MODEL": "openai:scripted"}
        config = load_config(Path(tmp) / "absent.toml", env=env)
        store = await SessionStore.open(Path(tmp) / "state.db")
        tools = toolset("editor")
        agent = Agent(model=build_model(config), tools=tools, store=store, broker=ApprovalBroker(store), surface="acp")
        project = Path(tmp) / "project"
        project.mkdir()
        session = await agent.new_session(project, LocalHost())
        async for _ in agent.run_turn(session, UserMessage.of("say hello")):
            pass
        await agent.model.aclose()
        await store.close()
        body = server.requests[0].get("body", server.requests[0])
    return {
        "benchmark": "first_request",
        "bytes": len(json.dumps(body)),
        "system_prompt_bytes": len(body["messages"][0]["content"]),
        "tool_schema_bytes": len(json.dumps(body.get("tools", []))),
        "tools": len(tools),
        "reference": {"hermes-agent 0.19.0 (quoted, not re-measured)": 43000},
    }


def main() -> int:
    print(json.dumps(asyncio.run(measure()), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
