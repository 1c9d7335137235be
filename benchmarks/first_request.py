"""Size of the first model request for "say hello" in an empty project, editor toolset.

Where the reference is installed (benchmarks/reference.py), its ``hermes-acp`` gets the same
prompt in an empty project through ACP, and the first request it sends to the same scripted
model is measured the same way; the ratios are reference / ours.
Run: .venv/bin/python benchmarks/first_request.py [--reference-venv PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

from benchmarks.reference import Reference, add_option, find, ratio, spawn
from core.agent.loop import Agent
from core.config import load_config
from core.host.local import LocalHost
from core.messages import UserMessage
from core.models import build_model
from core.policy.approvals import ApprovalBroker
from core.store import SessionStore
from hermes_cli.scripted_model import ScriptedOpenAIServer
from toolsets import toolset

PROMPT = "say hello"
FIGURES = ("bytes", "system_prompt_bytes", "tool_schema_bytes")


def sizes(body: dict) -> dict:
    return {
        "bytes": len(json.dumps(body)),
        "system_prompt_bytes": len(body["messages"][0]["content"]),
        "tool_schema_bytes": len(json.dumps(body.get("tools", []))),
        "tools": len(body.get("tools", [])),
    }


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
        async for _ in agent.run_turn(session, UserMessage.of(PROMPT)):
            pass
        await agent.model.aclose()
        await store.close()
        body = server.requests[0].get("body", server.requests[0])
    return {"benchmark": "first_request", **sizes(body)}


def measure_reference(reference: Reference) -> dict:
    """The reference's first model request for the same prompt, through its ACP server."""
    with ScriptedOpenAIServer(lambda body: {"text": "hello"}) as server, tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / "project"
        project.mkdir()
        _, rpc = spawn(reference.acp_command, reference.env(Path(tmp) / "home", server.base_url), project)
        rpc.call("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        session = rpc.call("session/new", {"cwd": str(project), "mcpServers": []})
        rpc.call("session/prompt", {"sessionId": session["sessionId"], "prompt": [{"type": "text", "text": PROMPT}]})
        rpc.close()
        # The turn's request is the one with tools (side requests, such as a title, carry none).
        body = next((r for r in server.requests if r.get("tools")), server.requests[0])
    return {"name": reference.name, "toolset": "hermes-acp", **sizes(body)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    add_option(parser)
    args = parser.parse_args()
    reference = find(args.reference_venv)
    result = asyncio.run(measure())
    if reference:
        result["reference"] = measure_reference(reference)
        result["reference_over_ours"] = {key: ratio(result["reference"][key], result[key]) for key in FIGURES}
    else:
        result["reference"] = {"hermes-agent 0.19.0 (quoted, not re-measured)": 43000}
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
