"""hermes-acp loads only what a turn uses: the ACP SDK's protocol models are built on first use,
and a plain turn on an OpenAI-compatible model loads no provider SDK at all (it talks HTTP over
httpx), no git, no MCP and no aiohttp. What the client sees stays the same (tests/hermes_acp/test_fast_start.py
compares the early answers with the server's own; here the models loaded lazily are compared
with the same models loaded the plain way)."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.acp_harness import agent_env
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.hermes_acp.test_fast_start import RawClient

# Loaded by a turn that only talks to an OpenAI-compatible model: none of these (the openai SDK
# included: the chat-completions adapter speaks HTTP itself).
UNUSED = ("openai", "anthropic", "aiohttp", "git", "mcp", "watchfiles", "unidiff", "rich")


def test_a_plain_turn_loads_no_sdk_it_does_not_use(hermes_home, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    stderr = tmp_path / "stderr.log"
    with ScriptedOpenAIServer([{"text": "hello"}]) as server:
        # The interpreter lists every module it imports on stderr (python -X importtime).
        client = RawClient(agent_env(hermes_home, server.base_url, extra={"PYTHONPROFILEIMPORTTIME": "1"}), stderr)
        client.request(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        client.request(2, "session/new", {"cwd": str(project), "mcpServers": []})
        session_id = client.answer(2)["result"]["sessionId"]
        client.request(3, "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "say hello"}]})
        assert client.answer(3)["result"]["stopReason"] == "end_turn"
        client.close()
    imported = {
        line.split("|")[2].strip()
        for line in stderr.read_text(errors="replace").splitlines()
        if line.startswith("import time:") and "|" in line
    }
    # What the turn needs is seen loading, so the check below can see a module load.
    assert {"httpx", "httpx_sse", "acp.schema", "hermes_acp.sdk_load", "core.agent.loop"} <= imported
    loaded = sorted(m for m in imported if m.split(".")[0] in UNUSED)
    assert not loaded, f"a plain turn loaded {loaded}"


LOAD = """
import json, sys
if sys.argv[1] == "lazy":
    from hermes_acp.sdk_load import load_sdk
    load_sdk()
import acp.schema as schema
from pydantic import ValidationError

out = {"unused_built": schema.ReadTextFileRequest.__pydantic_complete__}
prompt = schema.PromptRequest.model_validate(
    {"sessionId": "s1", "prompt": [{"type": "text", "text": "hi"}, {"type": "resource_link", "uri": "file:///a.py", "name": "a.py"}]}
)
out["prompt"] = prompt.model_dump(mode="json", by_alias=True, exclude_none=True)
update = schema.SessionNotification.model_validate(
    {"sessionId": "s1", "update": {"sessionUpdate": "tool_call", "toolCallId": "t1", "title": "Read a.py", "kind": "read",
     "status": "pending", "locations": [{"path": "/a.py", "line": 3}], "_meta": {"x": 1}}}
)
out["update"] = update.model_dump_json(by_alias=True, exclude_none=True)
out["answer"] = schema.PromptResponse(stop_reason="end_turn", field_meta={"hermes": {"error": None}}).model_dump(by_alias=True)
try:
    schema.PromptRequest.model_validate({"sessionId": 3, "prompt": [{"type": "bogus"}]})
except ValidationError as exc:
    out["error"] = exc.errors(include_url=False)
print(json.dumps(out, default=str))
"""


def test_the_sdk_models_load_lazily_and_answer_as_loaded_plainly():
    def run(how: str) -> dict:
        proc = subprocess.run([sys.executable, "-c", LOAD, how], capture_output=True, text=True, check=True)
        return json.loads(proc.stdout)

    lazy, plain = run("lazy"), run("plain")
    # Loaded through load_sdk, a model nothing used is not built yet; loaded plainly, it is.
    assert lazy.pop("unused_built") is False
    assert plain.pop("unused_built") is True
    assert lazy == plain
    assert "error" in lazy and json.loads(lazy["update"])["update"]["_meta"] == {"x": 1}


def test_other_models_keep_their_own_config(tmp_path):
    # A file, not -c: pydantic reads attribute docstrings from the source.
    script = tmp_path / "later.py"
    script.write_text(
        "from hermes_acp.sdk_load import load_sdk\n"
        "load_sdk()\n"
        "import acp.schema, pydantic\n"
        "class Later(pydantic.BaseModel):\n"
        "    model_config = pydantic.ConfigDict(use_attribute_docstrings=True)\n"
        "    x: int = 0\n"
        '    """the x"""\n'
        "print(Later.__pydantic_complete__, repr(Later.model_fields['x'].description), "
        "acp.schema.BaseModel.model_config.get('defer_build'))\n"
    )
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=True)
    assert proc.stdout.split() == ["True", "'the", "x'", "True"]
