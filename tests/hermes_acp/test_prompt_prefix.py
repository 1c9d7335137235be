"""Prompt caching end to end: every model request of a turn starts with the previous request of
its conversation, byte for byte as sent (its request-only reminder aside), through a memory write,
a new skill and a subagent mid-turn. What those writes change reaches the prompt later, as
documented: a new skill is listed from the next turn, the memory from the next session.

The real hermes-acp, the ACP SDK client as the editor, and a scripted model (OpenAI-compatible or
Anthropic) on 127.0.0.1 that keeps each request body's bytes. Canonical bytes (tools, system,
messages, as serialised on the wire) are defined in benchmarks/prompt_cache.py.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import acp
import pytest

from benchmarks.prompt_cache import MARK, SUBAGENT_MARK, canonical, compare, conversation_of, is_anthropic, system_text
from core.agent.subagents import SUBAGENT_NOTE
from hermes_cli.scripted_model import ScriptedOpenAIServer
from tests.acp_harness import Client, agent_env, running_agent
from tests.fakes.anthropic_server import ScriptedAnthropicServer

SKILL = "prefix-probe-skill"
MEMORY = "PREFIX-PROBE: the deploy script lives in ops/deploy.sh."
SKILL_MD = f"---\nname: {SKILL}\ndescription: Probe how skills reach the prompt.\n---\nStep one: read the notes.\n"
GOAL = "Read notes_a.txt and notes_b.txt and report their first lines."


def _call(call_id: str, name: str, arguments: dict) -> dict:
    return {"text": f"Calling {name}.", "tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]}


FIRST_TURN = [
    _call("c1", "read_file", {"path": "app.py"}),
    _call("c2", "memory", {"action": "add", "file": "memory", "text": MEMORY}),
    _call("c3", "read_file", {"path": "notes_a.txt"}),
    _call("c4", "skill_manage", {"action": "create", "name": SKILL, "content": SKILL_MD}),
    _call("c5", "delegate", {"tasks": [{"goal": GOAL, "toolset": "read-only"}]}),
    _call("c6", "grep", {"pattern": "def ", "path": "."}),
    _call("c7", "read_file", {"path": "notes_b.txt"}),
    {"text": "Done: read, remembered, saved a skill, delegated."},
]
SECOND_TURN = [_call("d1", "read_file", {"path": "app.py"}), {"text": "Still the same."}]
SUBAGENT = [
    _call("s1", "read_file", {"path": "notes_a.txt"}),
    _call("s2", "read_file", {"path": "notes_b.txt"}),
    {"text": "notes_a starts with alpha, notes_b with beta."},
]


def _server(wire: str):
    base = ScriptedAnthropicServer if wire == "anthropic" else ScriptedOpenAIServer

    class Recording(base):  # type: ignore[valid-type,misc]
        """Answers the session's turns and the subagent from their scripts; keeps the bytes."""

        keep_raw = True

        def __init__(self) -> None:
            self.turn = 0
            self.turns: list[int] = []
            self.scripts = {0: list(FIRST_TURN), 1: list(SECOND_TURN), 2: [{"text": "Noted."}]}
            self.subagent = list(SUBAGENT)
            super().__init__(self.answer)

        def answer(self, body: dict) -> dict:
            self.turns.append(self.turn)
            who = conversation_of(body)
            if who == "side":
                return {"text": "ok"}
            script = self.subagent if who != "main" else self.scripts[self.turn]
            return script.pop(0) if script else {"error": 400, "message": "scripted server: script spent"}

    return Recording()


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "app.py").write_text("def greet():\n    return 'hi'\n" * 40)
    (root / "notes_a.txt").write_text("alpha\n" + "a line of notes\n" * 60)
    (root / "notes_b.txt").write_text("beta\n" + "another line\n" * 60)
    return root


def _env(home: Path, wire: str, base_url: str) -> dict:
    if wire == "openai":
        return agent_env(home, base_url)
    extra = {"ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_API_KEY": "sk-ant-test-000000", "HERMES_MODEL": "anthropic:claude-scripted"}
    return agent_env(home, None, extra=extra)


def _messages_without_reminder(body: dict) -> list:
    """The conversation's messages, cache markers and the request-only reminder (only ever at the
    end of the last message) left out."""
    out = []
    for n, message in enumerate(body["messages"], 1 - len(body["messages"])):
        content = message.get("content")
        if isinstance(content, list):
            content = [{k: v for k, v in b.items() if k != "cache_control"} for b in content]
            if n == 0 and content and str(content[-1].get("text", "")).startswith(MARK):
                content = content[:-1]
        elif n == 0 and isinstance(content, str):
            if content.startswith(MARK):
                continue
            content = content.split(f"\n\n{MARK}")[0]
        if content == []:
            continue
        out.append({**message, "content": content})
    return out


def _assert_each_starts_with_the_last(requests: list[tuple[bytes, dict]], what: str) -> None:
    assert len(requests) >= 2, what
    for n, ((_, before), (raw, after)) in enumerate(zip(requests, requests[1:]), 1):
        # Whole parts, as parsed: the same tools and system, and the earlier messages first.
        assert json.dumps(after["tools"]) == json.dumps(before["tools"]) or is_anthropic(after), f"{what}: tools changed at {n}"
        assert system_text(after) == system_text(before), f"{what}: system prompt changed at request {n}"
        earlier = _messages_without_reminder(before)
        later = _messages_without_reminder(after)
        if is_anthropic(after):  # a block may join the last message; compare blocks in order
            flat = [(m["role"], b) for m in earlier for b in m["content"]]
            assert [(m["role"], b) for m in later for b in m["content"]][: len(flat)] == flat, f"{what}: request {n}"
        else:
            assert later[: len(earlier)] == earlier, f"{what}: request {n} does not start with the one before"
        # Byte for byte, as sent: the canonical bytes of the one before (its reminder aside) start this one.
        result = compare(canonical(before), canonical(after))
        assert result.holds, f"{what}: request {n} parts from the one before at {result.divergence}"
        assert result.common > 0.5 * result.size
        # The canonical bytes are the bytes sent: the SDK sends compact JSON in the order built.
        assert raw == json.dumps(after, ensure_ascii=False, separators=(",", ":")).encode()


@pytest.mark.parametrize("wire", ["openai", "anthropic"])
async def test_each_request_of_a_turn_starts_with_the_last_one(hermes_home, project, wire):
    with _server(wire) as server:
        client = Client(answer="allow_once")
        async with running_agent(client, _env(hermes_home, wire, server.base_url)) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            first = await conn.prompt(session_id=sid, prompt=[acp.text_block("look around, remember and delegate")])
            server.turn = 1
            second = await conn.prompt(session_id=sid, prompt=[acp.text_block("once more")])
            server.turn = 2
            other = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            third = await conn.prompt(session_id=other, prompt=[acp.text_block("what do you remember?")])
    assert [first.stop_reason, second.stop_reason, third.stop_reason] == ["end_turn"] * 3, client.text()
    assert not any(server.scripts.values()) and not server.subagent  # every scripted answer was asked for

    bodies = [r.get("body", r) for r in server.requests]
    sent = list(zip(server.raw_requests, bodies))
    assert len(sent) == len(bodies) == len(server.turns)
    main = [(raw, b, t) for (raw, b), t in zip(sent, server.turns) if conversation_of(b) == "main"]
    turn1 = [(raw, b) for raw, b, t in main if t == 0]
    turn2 = [(raw, b) for raw, b, t in main if t == 1]
    later_session = [b for _, b, t in main if t == 2]
    subagent = [(raw, b) for raw, b in sent if conversation_of(b).startswith("subagent")]
    assert (len(turn1), len(turn2), len(later_session), len(subagent)) == (8, 2, 1, 3)

    # The memory write and the new skill change nothing in this turn's requests.
    _assert_each_starts_with_the_last(turn1, "first turn")
    opening = system_text(turn1[0][1])
    assert SKILL not in opening and MEMORY not in opening

    # The subagent's conversation is its own: the parent's prompt and its note, then its goal;
    # each of its requests starts with its last.
    _assert_each_starts_with_the_last(subagent, "subagent")
    assert system_text(subagent[0][1]) == f"{opening}\n\n{SUBAGENT_NOTE}" and SUBAGENT_MARK in SUBAGENT_NOTE
    assert GOAL in json.dumps(subagent[0][1]["messages"]) and "remember and delegate" not in json.dumps(subagent[0][1])

    # The next turn lists the new skill (skills apply from the next turn); the memory written is
    # a snapshot's change, which the next session sees, not this one.
    _assert_each_starts_with_the_last(turn2, "second turn")
    # Each of its requests carries the skill reminder (the first turn was long), once and last.
    for _, body in turn2:
        assert json.dumps(body["messages"]).count(MARK) == 1 and MARK in json.dumps(body["messages"][-1])
    next_turn = system_text(turn2[0][1])
    assert SKILL in next_turn and MEMORY not in next_turn
    # The skill's line is the only change: what the turns share up to it is kept.
    assert next_turn.replace(f"\n- {SKILL}: Probe how skills reach the prompt.", "") == opening
    assert MEMORY in system_text(later_session[0]) and SKILL in system_text(later_session[0])


async def test_a_reopened_session_begins_its_requests_as_before(hermes_home, project):
    """A session reopened by another hermes-acp (an editor restarted, a script's next turn) keeps the
    opening of its prompt, git line included, though the turn changed files: the cached
    conversation stays cached. A new session gets a fresh one."""
    git = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q"], cwd=project, check=True)
    subprocess.run([*git, "add", "-A"], cwd=project, check=True)
    subprocess.run([*git, "commit", "-qm", "start"], cwd=project, check=True)
    (project / "notes_a.txt").write_text("changed before the session\n")
    script = [
        _call("w1", "write_file", {"path": "new.py", "content": "x = 1\n"}),
        {"text": "Wrote new.py."},
        {"text": "Still here."},
        {"text": "A fresh start."},
    ]
    with ScriptedOpenAIServer(script) as server:
        server.keep_raw = True
        env = agent_env(hermes_home, server.base_url)
        async with running_agent(Client(answer="allow_once"), env) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            assert (await conn.prompt(session_id=sid, prompt=[acp.text_block("write new.py")])).stop_reason == "end_turn"
        async with running_agent(Client(), env) as (conn, _, _):
            await conn.load_session(cwd=str(project), session_id=sid, mcp_servers=[])
            assert (await conn.prompt(session_id=sid, prompt=[acp.text_block("and now?")])).stop_reason == "end_turn"
            other = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            assert (await conn.prompt(session_id=other, prompt=[acp.text_block("hello")])).stop_reason == "end_turn"
    assert (project / "new.py").exists()
    bodies = [r.get("body", r) for r in server.requests if r.get("tools")]
    assert len(bodies) == 4
    before, after, fresh = bodies[1], bodies[2], bodies[3]
    assert "Git: branch" in system_text(before) and "1 changed file\n" in system_text(before)
    assert system_text(after) == system_text(before)
    result = compare(canonical(before), canonical(after))
    assert result.holds, result.divergence
    assert "2 changed files\n" in system_text(fresh)


async def test_after_many_calls_at_once_the_last_cache_is_still_within_reach(hermes_home, project):
    """Anthropic finds an earlier cache entry only about 20 blocks back from a breakpoint: after a
    step of twelve reads at once (25 new blocks), the request marks where the one before ended
    too, so what it cached is read, not written again; four breakpoints at most."""
    for n in range(12):
        (project / f"part_{n}.txt").write_text(f"part {n}\n" * 30)
    reads = [{"id": f"r{n}", "name": "read_file", "arguments": {"path": f"part_{n}.txt"}} for n in range(12)]
    script = [_call("c1", "read_file", {"path": "app.py"}), {"text": "Reading them all.", "tool_calls": reads}, {"text": "Done."}]
    with ScriptedAnthropicServer(script) as server:
        async with running_agent(Client(), _env(hermes_home, "anthropic", server.base_url)) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            assert (await conn.prompt(session_id=sid, prompt=[acp.text_block("read every part")])).stop_reason == "end_turn"
    bodies = [r.get("body", r) for r in server.requests if r.get("tools")]
    assert len(bodies) == 3

    def marks(body: dict) -> list[int]:
        blocks = [b for m in body["messages"] for b in m["content"]]
        return [i for i, b in enumerate(blocks) if "cache_control" in b]

    for before, after in zip(bodies, bodies[1:]):
        assert compare(canonical(before), canonical(after)).holds
        assert json.dumps(after).count("cache_control") <= 4
        cached_to = marks(before)[-1]
        assert any(0 <= mark - cached_to <= 18 for mark in marks(after)), (cached_to, marks(after))
    assert marks(bodies[2])[-1] - marks(bodies[1])[-1] > 20  # the exchange itself is longer than the look-back
