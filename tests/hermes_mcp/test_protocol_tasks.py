"""The protocol's own tasks (2025-11-25) for ``ask``: status, result, cancel and list over raw JSON-RPC on
stdio (the SDK client has no tasks API), one task seen through both the protocol and our task_* tools;
and none of it in the 2026-07-28 era."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.hermes_mcp.harness import ERAS, allow_projects, call, connected, hermes_mcp, mcp_env

TASKS_CAPABILITY = {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}
RELATED = "io.modelcontextprotocol/related-task"
ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {},
}
WAIT = 60  # seconds an awaited message may take on a busy machine (a bound, not a measurement)


class RpcError(Exception):
    def __init__(self, error: dict) -> None:
        super().__init__(f"{error.get('code')}: {error.get('message')}")
        self.code = error.get("code")
        self.message = str(error.get("message"))


class RawClient:
    """JSON-RPC over the real hermes-mcp's stdin/stdout: requests, notifications, and answers to its requests."""

    def __init__(self, proc: asyncio.subprocess.Process, answer: Callable[[dict], dict] | None) -> None:
        self.proc = proc
        self.answer = answer
        self.notifications: list[dict] = []
        self.server_requests: list[dict] = []
        self._waiting: dict[Any, asyncio.Future[dict]] = {}
        self._arrived = asyncio.Condition()
        self._next = 0
        self._reader = asyncio.create_task(self._read())

    async def _read(self) -> None:
        assert self.proc.stdout
        while line := await self.proc.stdout.readline():
            message = json.loads(line)  # anything but JSON on stdout fails the test
            if "method" in message and "id" in message:
                self.server_requests.append(message)
                assert self.answer is not None, f"unexpected request from the server: {message}"
                await self._send({"jsonrpc": "2.0", "id": message["id"], "result": self.answer(message)})
            elif "method" in message:
                async with self._arrived:
                    self.notifications.append(message)
                    self._arrived.notify_all()
            else:
                future = self._waiting.pop(message.get("id"), None)
                if future is not None and not future.done():
                    future.set_result(message)

    async def _send(self, message: dict) -> None:
        assert self.proc.stdin
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        await self.proc.stdin.drain()

    async def request(self, method: str, params: dict | None = None) -> dict:
        self._next += 1
        request_id = f"r{self._next}"
        future: asyncio.Future[dict] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = future
        message: dict = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        await self._send(message)
        answer = await asyncio.wait_for(future, WAIT)
        if "error" in answer:
            raise RpcError(answer["error"])
        return answer["result"]

    async def notify(self, method: str) -> None:
        await self._send({"jsonrpc": "2.0", "method": method})

    async def notification(self, method: str, match: Callable[[dict], bool]) -> dict:
        """The first notification of ``method`` whose params ``match``, waiting for it if need be."""

        def found() -> dict | None:
            return next((n["params"] for n in self.notifications if n["method"] == method and match(n.get("params") or {})), None)

        async with self._arrived:
            await asyncio.wait_for(self._arrived.wait_for(lambda: found() is not None), WAIT)
        result = found()
        assert result is not None
        return result

    async def tool(self, name: str, arguments: dict) -> dict:
        return await self.request("tools/call", {"name": name, "arguments": arguments})


@contextlib.asynccontextmanager
async def raw_client(
    env: dict, *, capabilities: dict | None = None, era: str = "2025-11-25", answer: Callable[[dict], dict] | None = None
) -> AsyncIterator[RawClient]:
    """The real hermes-mcp on stdio, after the era's opening (the handshake, or nothing in 2026-07-28)."""
    stderr = open(Path(env["HERMES_EDITOR_HOME"]) / "stderr.log", "a")
    proc = await asyncio.create_subprocess_exec(
        hermes_mcp(), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=stderr, env=env, limit=16 * 1024 * 1024
    )
    client = RawClient(proc, answer)
    try:
        if era == "2025-11-25":
            opened = await client.request(
                "initialize", {"protocolVersion": era, "capabilities": capabilities or {}, "clientInfo": {"name": "raw", "version": "1"}}
            )
            assert opened["protocolVersion"] == era
            await client.notify("notifications/initialized")
        yield client
    finally:
        assert proc.stdin
        proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 30)
        finally:
            if proc.returncode is None:
                proc.kill()
            client._reader.cancel()
            stderr.close()


@pytest.fixture
def project(tmp_path, hermes_home) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "app.py").write_text("def greet():\n    return 'hi'\n")
    allow_projects(hermes_home, root)
    return root


class Held:
    """A scripted model whose first answer waits until the test lets it go."""

    def __init__(self, text: str) -> None:
        self.go = threading.Event()
        self.text = text
        self.asked = threading.Event()

    def __call__(self, body: dict) -> dict:
        self.asked.set()
        self.go.wait(WAIT)
        return {"text": self.text}


def _ask(project: Path, prompt: str, *, ttl: int | None = 120_000, mode: str = "ask") -> dict:
    params: dict = {"name": "ask", "arguments": {"prompt": prompt, "cwd": str(project), "mode": mode}}
    params["task"] = {} if ttl is None else {"ttl": ttl}
    return params


async def test_the_handshake_offers_tasks_and_ask_says_it_runs_as_one(hermes_home):
    async with raw_client(mcp_env(hermes_home)) as client:
        tools = {t["name"]: t for t in (await client.request("tools/list"))["tools"]}
    assert tools["ask"]["execution"] == {"taskSupport": "optional"}
    assert all("execution" not in t for name, t in tools.items() if name != "ask"), "only ask runs as a task"
    for fast in (True, False):
        env = mcp_env(hermes_home, extra={} if fast else {"HERMES_MCP_NO_FAST_INIT": "1"})
        proc = await asyncio.create_subprocess_exec(hermes_mcp(), stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, env=env)
        opening = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
        out, _ = await asyncio.wait_for(
            proc.communicate((json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": opening}) + "\n").encode()), WAIT
        )
        assert json.loads(out.splitlines()[0])["result"]["capabilities"]["tasks"] == TASKS_CAPABILITY, f"early answer: {fast}"


async def test_a_long_ask_runs_as_a_protocol_task_and_as_our_task(hermes_home, project):
    model = Held("Done, slowly.")
    with ScriptedOpenAIServer(model) as server:
        async with raw_client(mcp_env(hermes_home, server.base_url)) as client:
            created = await client.request("tools/call", _ask(project, "take your time"))
            task = created["task"]
            task_id = task["taskId"]
            assert task["status"] == "working" and task["ttl"] == 120_000 and task["pollInterval"] > 0
            assert task["createdAt"].endswith("Z") and task["lastUpdatedAt"].endswith("Z")
            assert task_id in created["_meta"]["io.modelcontextprotocol/model-immediate-response"]
            assert "content" not in created, "a task-augmented call answers with the task, not the tool's result"
            await asyncio.to_thread(model.asked.wait, WAIT)
            working = await client.request("tasks/get", {"taskId": task_id})
            assert working["status"] == "working" and working["statusMessage"] == "Thinking"
            # The same task through our own tool: one task, two views.
            ours = (await client.tool("task_status", {"task_id": task_id}))["structuredContent"]
            assert ours["status"] == "running" and ours["task_id"] == task_id
            listed = await client.request("tasks/list")
            assert [t["taskId"] for t in listed["tasks"]] == [task_id] and "nextCursor" not in listed
            model.go.set()
            result = await client.request("tasks/result", {"taskId": task_id})
            done = await client.request("tasks/get", {"taskId": task_id})
            notice = await client.notification("notifications/tasks/status", lambda p: p.get("status") == "completed")
            ours = (await client.tool("task_status", {"task_id": task_id}))["structuredContent"]
    view = result["structuredContent"]
    assert result["isError"] is False and view["status"] == "done" and view["reply"] == "Done, slowly."
    assert json.loads(result["content"][0]["text"]) == view, "the same result ask itself returns"
    assert result["_meta"][RELATED] == {"taskId": task_id}
    assert done["status"] == "completed" and done["createdAt"] == task["createdAt"]
    assert done["lastUpdatedAt"] >= task["lastUpdatedAt"]
    assert notice["taskId"] == task_id
    assert ours["status"] == "done" and ours["session_id"] == view["session_id"]


async def test_cancel_from_either_view_shows_in_both(hermes_home, project):
    with ScriptedOpenAIServer([{"hang": True}, {"hang": True}]) as server:
        async with raw_client(mcp_env(hermes_home, server.base_url)) as client:
            first = (await client.request("tools/call", _ask(project, "never ends", ttl=None)))["task"]
            assert first["ttl"] == 3_600_000, "an hour unless the client asks otherwise"
            cancelled = await client.request("tasks/cancel", {"taskId": first["taskId"]})
            ours = (await client.tool("task_status", {"task_id": first["taskId"]}))["structuredContent"]
            with pytest.raises(RpcError) as again:
                await client.request("tasks/cancel", {"taskId": first["taskId"]})
            second = (await client.request("tools/call", _ask(project, "never ends either")))["task"]
            by_tool = (await client.tool("task_cancel", {"task_id": second["taskId"]}))["structuredContent"]
            seen = await client.request("tasks/get", {"taskId": second["taskId"]})
            result = await client.request("tasks/result", {"taskId": second["taskId"]})
            listed = await client.request("tasks/list")
    assert cancelled["status"] == "cancelled" and cancelled["taskId"] == first["taskId"]
    assert ours["status"] == "cancelled" and ours["stop_reason"] == "cancelled"
    assert again.value.code == -32602 and "already cancelled" in again.value.message
    assert by_tool["status"] == "cancelled"
    assert seen["status"] == "cancelled" and "Cancelled" in seen["statusMessage"]
    assert result["structuredContent"]["status"] == "cancelled" and result["_meta"][RELATED] == {"taskId": second["taskId"]}
    assert [t["taskId"] for t in listed["tasks"]] == [first["taskId"], second["taskId"]]


async def test_an_approval_makes_the_task_input_required_and_tasks_result_asks_the_user(hermes_home, project):
    def elicit(request: dict) -> dict:
        assert request["method"] == "elicitation/create", request
        return {"action": "accept", "content": {"decision": "allow"}}

    script = [call("write_file", {"path": "todo.md", "content": "- ship it\n"}), {"text": "Created."}]
    with ScriptedOpenAIServer(script) as server:
        env = mcp_env(hermes_home, server.base_url)
        async with raw_client(env, capabilities={"elicitation": {}}, answer=elicit) as client:
            task_id = (await client.request("tools/call", _ask(project, "add a todo")))["task"]["taskId"]
            waiting = await client.notification("notifications/tasks/status", lambda p: p.get("status") == "input_required")
            seen = await client.request("tasks/get", {"taskId": task_id})
            result = await client.request("tasks/result", {"taskId": task_id})
            asked = list(client.server_requests)
    assert waiting["taskId"] == task_id
    assert seen["status"] == "input_required" and "approval" in seen["statusMessage"] and "hermes-editor approvals" in seen["statusMessage"]
    assert [r["method"] for r in asked] == ["elicitation/create"] and "todo.md" in json.dumps(asked[0]["params"])
    assert asked[0]["params"]["_meta"][RELATED] == {"taskId": task_id}, "the question names its task"
    assert result["structuredContent"]["status"] == "done" and result["structuredContent"]["reply"] == "Created."
    assert (project / "todo.md").read_text() == "- ship it\n"


async def test_a_task_on_the_clients_model_is_carried_by_tasks_result(hermes_home, project):
    """No model configured: the client's model answers (sampling), and tasks/result carries its steps."""

    def sample(request: dict) -> dict:
        assert request["method"] == "sampling/createMessage", request
        return {"role": "assistant", "content": {"type": "text", "text": "From the client's model."}, "model": "client-model-7"}

    async with raw_client(mcp_env(hermes_home), capabilities={"sampling": {}}, answer=sample) as client:
        task_id = (await client.request("tools/call", _ask(project, "say hello")))["task"]["taskId"]
        result = await client.request("tasks/result", {"taskId": task_id})
        asked = [r["method"] for r in client.server_requests]
    view = result["structuredContent"]
    assert view["status"] == "done" and view["reply"] == "From the client's model.", view
    assert "sampling/createMessage" in asked
    assert "client-model-7" in json.dumps(view), "the result says which model answered"


async def test_what_cannot_run_as_a_task_is_told_so(hermes_home, project, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    with ScriptedOpenAIServer([]) as server:
        async with raw_client(mcp_env(hermes_home, server.base_url)) as client:
            with pytest.raises(RpcError) as forbidden:
                await client.request("tools/call", {"name": "task_status", "arguments": {"task_id": "x"}, "task": {}})
            with pytest.raises(RpcError) as unknown_tool:
                await client.request("tools/call", {"name": "no_such_tool", "arguments": {}, "task": {}})
            with pytest.raises(RpcError) as unknown_task:
                await client.request("tasks/get", {"taskId": "nope"})
            with pytest.raises(RpcError) as bad_ttl:
                await client.request("tools/call", {**_ask(project, "hi"), "task": {"ttl": "soon"}})
            refused = (await client.request("tools/call", _ask(outside, "work here")))["task"]
            refused_result = await client.request("tasks/result", {"taskId": refused["taskId"]})
            refused_seen = await client.request("tasks/get", {"taskId": refused["taskId"]})
    assert forbidden.value.code == -32601 and "task_status" in forbidden.value.message
    assert unknown_tool.value.code == -32602 and "no_such_tool" in unknown_tool.value.message
    assert unknown_task.value.code == -32602 and "nope" in unknown_task.value.message
    assert bad_ttl.value.code == -32602
    assert refused["status"] == "failed" and refused_seen["status"] == "failed"
    assert refused_result["isError"] is True and str(outside) in refused_result["content"][0]["text"]
    assert refused_result["_meta"][RELATED] == {"taskId": refused["taskId"]}
    assert server.requests == [], "nothing reached the model"


async def test_the_2026_era_has_no_protocol_tasks(hermes_home, project):
    with ScriptedOpenAIServer([{"text": "Plain answer."}]) as server:
        async with raw_client(mcp_env(hermes_home, server.base_url), era="2026-07-28") as client:
            tools = {t["name"]: t for t in (await client.request("tools/list", {"_meta": ENVELOPE}))["tools"]}
            discovered = await client.request("server/discover", {"_meta": ENVELOPE})
            with pytest.raises(RpcError) as unknown:
                await client.request("tasks/get", {"taskId": "x", "_meta": ENVELOPE})
            answered = await client.request("tools/call", {**_ask(project, "hello"), "_meta": ENVELOPE})
    assert "execution" not in tools["ask"]
    assert "tasks" not in discovered["capabilities"]
    assert unknown.value.code == -32601
    assert "task" not in answered and answered["structuredContent"]["reply"] == "Plain answer.", "the task field is not of this era"


@pytest.mark.parametrize("mode", ERAS)
async def test_sdk_clients_see_ask_as_a_task_only_in_the_handshake_era(hermes_home, mode):
    async with connected(mcp_env(hermes_home), mode=mode) as client:
        tasks = client.server_capabilities.tasks
        ask = next(t for t in (await client.list_tools()).tools if t.name == "ask")
    if mode == "legacy":
        assert (
            tasks is not None and tasks.requests is not None and tasks.requests.tools is not None and tasks.requests.tools.call is not None
        )
        assert tasks.list is not None and tasks.cancel is not None
        assert ask.execution is not None and ask.execution.task_support == "optional"
    else:
        assert tasks is None and ask.execution is None


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_the_inspector_sees_ask_as_a_task_only_in_the_handshake_era(hermes_home, era):
    from tests.hermes_mcp.test_fast_listing import inspector_run

    opened = inspector_run(hermes_home, hermes_home.parent, era, "initialize")
    tools = {t["name"]: t for t in inspector_run(hermes_home, hermes_home.parent, era, "tools/list")["tools"]}
    if era == "legacy":
        assert opened["capabilities"]["tasks"] == TASKS_CAPABILITY
        assert tools["ask"]["execution"] == {"taskSupport": "optional"}
    else:
        assert "tasks" not in opened["capabilities"] and "execution" not in tools["ask"]
