"""delegate end to end: the real hermes-acp, the scripted model answering the parent and each
subagent by what their requests hold, and the ACP SDK client as the editor."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import acp
import pytest

from core.messages import AssistantMessage, ToolResultMessage, UserMessage
from core.store import SessionStore
from tests.acp_harness import Client, agent_env, processes_with, running_agent, until
from tests.fakes.openai_server import ScriptedOpenAIServer

PARENT_PROMPT = "PARENT-ONLY-WORDS: look into alpha and beta for me"
SUBAGENT_MARK = "# You are a subagent"


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "alpha.txt").write_text("alpha holds 41\n")
    (root / "beta.txt").write_text("beta holds 42\n")
    return root


def _system(body: dict) -> str:
    first = body["messages"][0]
    return first["content"] if first["role"] == "system" else ""


def _is_subagent(body: dict) -> bool:
    return SUBAGENT_MARK in _system(body)


def _goal(body: dict) -> str:
    """The subagent's task: its first user message."""
    user = next(m for m in body["messages"] if m["role"] == "user")
    content = user["content"]
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


def _tool_results(body: dict) -> list[str]:
    return [m["content"] if isinstance(m["content"], str) else json.dumps(m["content"]) for m in body["messages"] if m["role"] == "tool"]


def _call(call_id: str, name: str, args: dict) -> dict:
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": args}]}


class SubagentServer(ScriptedOpenAIServer):
    """Answers by request: the parent's (no subagent note in the system prompt) and each
    subagent's (by its goal). ``barrier`` holds each subagent's first request until the other's
    has arrived too, so the test passes only when they run at the same time; ``hang`` keeps
    subagent requests open until the client goes away."""

    def __init__(self, parent: list[dict], subagent, *, barrier: int = 0, hang: bool = False) -> None:
        self.parent_script = list(parent)
        self.subagent = subagent
        self.barrier = threading.Barrier(barrier) if barrier else None
        self.overlapped: list[bool] = []
        self.hang = hang
        self.hangs_ended = 0
        super().__init__(self.answer)

    def answer(self, body: dict) -> dict:
        if _is_subagent(body):
            return {"hang": True} if self.hang else self.subagent(body)
        if not self.parent_script:
            return {"error": 400, "message": "scripted server: the parent's script is spent"}
        return self.parent_script.pop(0)

    def respond(self, handler, spec, body) -> None:
        first_step = _is_subagent(body) and not _tool_results(body)
        if self.barrier is not None and first_step:
            try:
                self.barrier.wait(timeout=30)
                self.overlapped.append(True)
            except threading.BrokenBarrierError:
                self.overlapped.append(False)
        try:
            super().respond(handler, spec, body)
        finally:
            if spec.get("hang"):
                with self._changed:
                    self.hangs_ended += 1
                    self._changed.notify_all()

    def subagent_requests(self) -> list[dict]:
        return [b for b in self.requests if _is_subagent(b)]

    def parent_requests(self) -> list[dict]:
        return [b for b in self.requests if not _is_subagent(b)]


class OrderedClient(Client):
    """Records, for each permission request, whether the editor had been shown its tool call."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.announced_before_asking: list[bool] = []

    async def request_permission(self, options, session_id, tool_call, **kwargs):
        shown = any(u.session_update == "tool_call" and u.tool_call_id == tool_call.tool_call_id for u in self.updates)
        self.announced_before_asking.append(shown)
        return await super().request_permission(options, session_id, tool_call, **kwargs)


async def _session(conn, project: Path) -> str:
    return (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id


def _read_then_report(body: dict) -> dict:
    """A subagent reads the file its goal names, then reports what it holds."""
    name = "alpha" if "alpha" in _goal(body) else "beta"
    results = _tool_results(body)
    if not results:
        return _call(f"read_{name}", "read_file", {"path": f"{name}.txt"})
    number = "41" if "41" in results[0] else "??"
    return {"text": f"{name.upper()}-REPORT: {name}.txt holds {number}."}


async def test_two_subagents_run_in_parallel_isolated_and_report_to_the_parent(hermes_home, project):
    tasks = [
        {"goal": "Find what alpha.txt holds", "context": "CONTEXT-FOR-ALPHA: the file is at the project root"},
        {"goal": "Find what beta.txt holds", "toolset": "read-only"},
    ]
    parent = [_call("call_d", "delegate", {"tasks": tasks}), {"text": "Both subagents reported."}]
    with SubagentServer(parent, _read_then_report, barrier=2) as server:
        client = Client()
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = await _session(conn, project)
            response = await conn.prompt(session_id=sid, prompt=[acp.text_block(PARENT_PROMPT)])
            listed = await conn.list_sessions(cwd=str(project))
    assert response.stop_reason == "end_turn", client.text()

    # Parallel: each subagent's first request waited for the other's at the barrier.
    assert server.overlapped == [True, True]
    subs = server.subagent_requests()
    assert len(subs) == 4
    # Isolated: the parent's words never reach a subagent; each gets its goal and its context only.
    for body in subs:
        assert "PARENT-ONLY-WORDS" not in json.dumps(body)
    alpha = [b for b in subs if "alpha" in _goal(b)]
    beta = [b for b in subs if "beta" in _goal(b)]
    assert "CONTEXT-FOR-ALPHA" in _goal(alpha[0]) and "CONTEXT-FOR-ALPHA" not in json.dumps(beta)
    # Restricted tools: no delegate (no nesting) nor undo; the read-only one cannot write.
    alpha_tools = {t["function"]["name"] for t in alpha[0]["tools"]}
    beta_tools = {t["function"]["name"] for t in beta[0]["tools"]}
    assert "write_file" in alpha_tools and "delegate" not in alpha_tools and "undo" not in alpha_tools
    assert "read_file" in beta_tools and not beta_tools & {"write_file", "edit_file", "run_command", "delegate"}

    # The reports reach the parent's next request, as the delegate call's result; the transcripts do not.
    (result,) = _tool_results(server.parent_requests()[1])
    assert "ALPHA-REPORT: alpha.txt holds 41." in result and "BETA-REPORT" in result
    assert "alpha holds 41" not in result  # the file text the subagent read stays with it

    # The editor saw each subagent as a tool call streaming its progress, then its report.
    for n, report in ((1, "ALPHA-REPORT"), (2, "BETA-REPORT")):
        updates = client.tool_updates(f"call_d/{n}")
        assert updates[0].session_update == "tool_call" and updates[0].kind == "think"
        assert updates[0].title.startswith(f"Subagent {n}: ")
        assert updates[-1].status == "completed"
        final = updates[-1].content[0].content.text
        assert "✓ Read" in final and report in final
    assert client.tool_updates("call_d")[-1].status == "completed"
    # Reading calls are lines of the subagent's call, not tool calls of their own.
    assert client.tool_updates("call_d/1/read_alpha") == []

    # The store links each subagent's session to the parent's call; their words are searchable;
    # the editor's session list leaves them out.
    assert [s.session_id for s in listed.sessions] == [sid]
    store = await SessionStore.open(hermes_home / "state.db")
    try:
        children = await store.subagent_sessions(sid)
        assert [(c.parent_id, c.parent_call_id, c.meta["subagent"]["number"]) for c in children] == [
            (sid, "call_d", 1),
            (sid, "call_d", 2),
        ]
        first = [m.message for m in await store.messages(children[0].id)]
        assert isinstance(first[0], UserMessage) and "Find what alpha.txt holds" in first[0].text
        assert isinstance(first[-1], AssistantMessage) and "ALPHA-REPORT" in first[-1].text
        hits = await store.search("ALPHA-REPORT")
        assert children[0].id in {h.session_id for h in hits}
        parent_messages = [m.message for m in await store.messages(sid)]
        assert not any("alpha holds 41" in getattr(m, "content", "") for m in parent_messages if isinstance(m, ToolResultMessage))
    finally:
        await store.close()

    # session/load replays the delegate call with its subagents' progress and reports as its content.
    with ScriptedOpenAIServer([]) as idle:
        again = Client()
        async with running_agent(again, agent_env(hermes_home, idle.base_url)) as (conn, _, _):
            await conn.load_session(cwd=str(project), session_id=sid, mcp_servers=[])
    (done,) = [u for u in again.tool_updates("call_d") if u.session_update == "tool_call_update"]
    texts = [c.content.text for c in done.content if c.type == "content"]
    assert any(t.startswith("Subagent 1: Find what alpha.txt holds") and "ALPHA-REPORT" in t and "✓ Read" in t for t in texts)
    assert any(t.startswith("Subagent 2: Find what beta.txt holds") and "BETA-REPORT" in t for t in texts)


async def test_a_subagents_write_asks_the_user_like_the_parents(hermes_home, project):
    target = project / "notes.md"

    def write_then_report(body: dict) -> dict:
        results = _tool_results(body)
        if not results:
            return _call("call_w", "write_file", {"path": "notes.md", "content": "- from the subagent\n"})
        return {"text": f"WROTE-REPORT: {results[0][:60]}"}

    parent = [_call("call_d", "delegate", {"tasks": [{"goal": "Write notes.md"}]}), {"text": "ok"}]
    with SubagentServer(parent, write_then_report) as server:
        client = OrderedClient(answer="allow_once")
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = await _session(conn, project)
            await conn.set_session_mode(session_id=sid, mode_id="ask")
            response = await conn.prompt(session_id=sid, prompt=[acp.text_block("write the notes")])
            assert target.read_text() == "- from the subagent\n"
            # The write belongs to the parent's turn: /undo in the parent's session takes it back.
            await conn.prompt(session_id=sid, prompt=[acp.text_block("/undo")])
            assert not target.exists()
    assert response.stop_reason == "end_turn"
    # The question named the subagent and a tool call the editor was shown, with the diff.
    (request,) = client.permission_requests
    assert request.tool_call_id == "call_d/1/call_w"
    assert request.title.startswith("Subagent 1: ")
    assert request.content[0].type == "diff" and request.content[0].path == str(target)
    updates = client.tool_updates("call_d/1/call_w")
    assert updates[0].session_update == "tool_call" and updates[0].kind == "edit"
    assert updates[-1].status == "completed" and updates[-1].content[0].type == "diff"
    assert client.announced_before_asking == [True]
    (result,) = _tool_results(server.parent_requests()[1])
    assert "WROTE-REPORT" in result
    # The question is the parent session's, in the store too (where the phone and the CLI find it).
    store = await SessionStore.open(hermes_home / "state.db")
    try:
        rows = await store.select("SELECT session_id, tool_call_id, title FROM approvals")
    finally:
        await store.close()
    assert [(r["session_id"], r["tool_call_id"]) for r in rows] == [(sid, "call_d/1/call_w")]
    assert rows[0]["title"].startswith("Subagent 1: ")
    # session/load shows the subagent's change as a diff in the delegate call.
    with ScriptedOpenAIServer([]) as idle:
        again = Client()
        async with running_agent(again, agent_env(hermes_home, idle.base_url)) as (conn, _, _):
            await conn.load_session(cwd=str(project), session_id=sid, mcp_servers=[])
    (done,) = [u for u in again.tool_updates("call_d") if u.session_update == "tool_call_update"]
    diffs = [c for c in done.content if c.type == "diff"]
    assert [(d.path, d.old_text, d.new_text) for d in diffs] == [(str(target), None, "- from the subagent\n")]


async def test_a_rejected_subagent_write_leaves_the_file_and_the_report_says_so(hermes_home, project):
    def write_then_report(body: dict) -> dict:
        results = _tool_results(body)
        if not results:
            return _call("call_w", "write_file", {"path": "alpha.txt", "content": "overwritten\n"})
        return {"text": f"REPORT: {results[0][:80]}"}

    parent = [_call("call_d", "delegate", {"tasks": [{"goal": "Overwrite alpha.txt"}]}), {"text": "ok"}]
    with SubagentServer(parent, write_then_report) as server:
        client = Client(answer="reject_once")
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = await _session(conn, project)
            await conn.prompt(session_id=sid, prompt=[acp.text_block("overwrite")])
    assert (project / "alpha.txt").read_text() == "alpha holds 41\n"
    assert client.tool_updates("call_d/1/call_w")[-1].status == "failed"
    (result,) = _tool_results(server.parent_requests()[1])
    assert "REPORT: The user declined" in result


async def test_cancel_stops_every_subagent_and_its_command(hermes_home, project):
    marker = f"hermes-delegate-cancel-{os.getpid()}"
    started = project / "started"

    def command_or_hang(body: dict) -> dict:
        if "alpha" in _goal(body):
            return _call("call_sleep", "run_command", {"command": f"touch {started} && sh -c 'sleep 60; true' {marker}"})
        return {"hang": True}

    tasks = [{"goal": "Run the alpha command"}, {"goal": "Think about beta"}]
    parent = [_call("call_d", "delegate", {"tasks": tasks}), {"text": "never"}]
    with SubagentServer(parent, command_or_hang) as server:
        client = Client(answer="allow_once", terminal=False)
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = await _session(conn, project)
            turn = asyncio.create_task(conn.prompt(session_id=sid, prompt=[acp.text_block(PARENT_PROMPT)]))
            # Both subagents are mid-work: one's command runs, the other's model request is open.
            await until(lambda: started.exists() or turn.done(), what="the subagent's command to start")
            await asyncio.to_thread(server.wait_for, lambda: any("beta" in _goal(b) for b in server.subagent_requests()))
            await conn.cancel(session_id=sid)
            response = await asyncio.wait_for(turn, 20)
            # The open model request was dropped and the command's processes are gone.
            await asyncio.to_thread(server.wait_for, lambda: server.hangs_ended == 1, 20, "the hanging request to be dropped")

            await until(lambda: not processes_with(marker), timeout=15, what="the subagent's command to be stopped")
            requests = len(server.requests)
            # The session still answers; the subagents made no request after the cancel.
            server.parent_script.append({"text": "still here"})
            again = await conn.prompt(session_id=sid, prompt=[acp.text_block("are you there?")])
    assert response.stop_reason == "cancelled"
    assert again.stop_reason == "end_turn"
    assert requests == 3  # the parent's first, and one per subagent
    assert len(server.requests) == 4 and not _is_subagent(server.requests[-1])
    for call_id in ("call_d/1", "call_d/2", "call_d/1/call_sleep", "call_d"):
        assert client.tool_updates(call_id)[-1].status == "failed", call_id
    assert "Cancelled" in client.tool_updates("call_d/2")[-1].content[0].content.text


async def test_cost_counts_the_subagents_once(hermes_home, project):
    priced = {"input_tokens": 100, "output_tokens": 10, "cost": 0.01}
    parent = [{**_call("call_d", "delegate", {"tasks": [{"goal": "Say hi"}]}), "usage": priced}, {"text": "Done.", "usage": priced}]
    sub = {"input_tokens": 40, "output_tokens": 4, "cost": 0.005}
    with SubagentServer(parent, lambda body: {"text": "HI-REPORT", "usage": sub}) as server:
        client = Client()
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = await _session(conn, project)
            await conn.prompt(session_id=sid, prompt=[acp.text_block(PARENT_PROMPT)])
            meter = client.of_kind("usage_update")[-1]
            before = len(client.of_kind("agent_message_chunk"))
            await conn.prompt(session_id=sid, prompt=[acp.text_block("/cost")])
            live = "".join(u.content.text for u in client.of_kind("agent_message_chunk")[before:])
        again = Client()
        async with running_agent(again, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            await conn.load_session(cwd=str(project), session_id=sid, mcp_servers=[])
            before = len(again.of_kind("agent_message_chunk"))
            await conn.prompt(session_id=sid, prompt=[acp.text_block("/cost")])
            loaded = "".join(u.content.text for u in again.of_kind("agent_message_chunk")[before:])
    # The turn's bill is the parent's two requests and the subagent's one; the subagent's share is named.
    assert meter.cost is not None and meter.cost.amount == pytest.approx(0.025)
    for shown in (live, loaded):
        assert "Input tokens: 240 " in shown and "Output tokens: 24" in shown, shown
        assert "Of which subagents: 40 input, 4 output tokens" in shown, shown
        assert "Cost: $0.0250 (of which subagents: $0.0050)" in shown, shown
    # Each session keeps its own usage, so the store's totals count the subagent once.
    stats = subprocess.run(
        [str(Path(sys.executable).parent / "hermes-editor"), "sessions", "stats", "--json"],
        capture_output=True,
        text=True,
        env=agent_env(hermes_home, None),
        timeout=90,
    )
    found = json.loads(stats.stdout)
    assert (found["input_tokens"], found["output_tokens"]) == (240, 24) and found["cost_usd"] == pytest.approx(0.025), stats.stdout
