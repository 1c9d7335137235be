"""A long turn in an 8,000-token window, through the real hermes-acp: every request fits the
window, compressions are rare, prompt caching holds between them, and an output cut to fit can be
read back whole by the path its marker names."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import acp
import pytest

from core.store import SessionStore
from tests.acp_harness import Client, agent_env, running_agent
from tests.fakes.openai_server import ScriptedOpenAIServer

WINDOW = 8000
FILES = 12
SUMMARY_MARK = "Summarise the conversation above"
READ_BACK = re.compile(r'session_search\(session_id="([0-9a-f]+)", seq=(\d+), offset=(\d+), limit=(\d+)\)')
CUT = re.compile(r"\n\[… tool output cut to save context: [^\n]*\]\n")
MORE = re.compile(r"\n\[\d+ more characters: session_search\([^\n]*\)\]$")


def _text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def _is_summary(body: dict) -> bool:
    return SUMMARY_MARK in _text(body["messages"][-1])


def _estimate(body: dict) -> int:
    """A request's tokens by the agent's ratio (3.5 characters a token) over every byte of its body."""
    return math.ceil(len(json.dumps(body)) / 3.5)


def _file(index: int) -> str:
    lines = [f"def handler_{index}_{n}(request, retries={n % 7}):  # line {n} of module {index}\n" for n in range(110)]
    return "".join(lines)[: 7 * 1024]


class Model:
    """Reads file00.py ... file11.py one per step; then reads back the part of the last output
    that was cut, by the marker's own words, part after part; then answers."""

    def __init__(self) -> None:
        self.step = 0
        self.shown: tuple[str, str] | None = None  # head and tail of the cut output, as shown
        self.parts: list[str] = []
        self.calls = 0

    def __call__(self, body: dict) -> dict:
        if _is_summary(body):
            return {"text": f"SUMMARY: reading the project's files one at a time; {self.step} steps so far."}
        step, self.step = self.step, self.step + 1
        if step < FILES:
            return self._call("read_file", {"path": f"file{step:02d}.py"})
        last = _text(body["messages"][-1])
        if step == FILES:
            marker = CUT.search(last)
            assert marker is not None, f"the last read was not cut: {last[:300]}"
            self.shown = (last[: marker.start()], last[marker.end() :])
            return self._read_back(marker.group(0))
        more = MORE.search(last)
        header, _, rest = last.partition("\n")
        assert header.startswith("Session "), last[:300]
        self.parts.append(rest[: more.start() - len(header) - 1] if more else rest)
        if more is not None:
            return self._read_back(more.group(0))
        return {"text": "I read every file."}

    def _read_back(self, marker: str) -> dict:
        found = READ_BACK.search(marker)
        assert found is not None, marker
        sid, seq, offset, limit = found.groups()
        return self._call("session_search", {"session_id": sid, "seq": int(seq), "offset": int(offset), "limit": int(limit)})

    def _call(self, name: str, arguments: dict) -> dict:
        self.calls += 1
        return {"tool_calls": [{"id": f"call{self.calls}", "name": name, "arguments": arguments}]}


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    for i in range(FILES):
        (root / f"file{i:02d}.py").write_text(_file(i))
    return root


def _configure(home: Path, base_url: str, window: int = WINDOW) -> None:
    (home / "config.toml").write_text(
        f'model = "openai:scripted"\n\n[providers.openai]\nbase_url = "{base_url}"\napi_key = "sk-test-not-a-real-key-123456"\n'
        f"context_window = {window}\n"
    )


def _breaks(steps: list[dict]) -> list[int]:
    """Indexes of the step requests that do not start with the previous one's messages byte for byte."""
    out = []
    for i in range(1, len(steps)):
        if not json.dumps(steps[i]["messages"]).startswith(json.dumps(steps[i - 1]["messages"])[:-1]):
            out.append(i)
    return out


def _compressed(before: dict, after: dict) -> bool:
    """Whether ``after`` shows the history compressed further than ``before`` (a new summary,
    or more outputs pruned or cut)."""
    a, b = json.dumps(before["messages"]), json.dumps(after["messages"])
    summary = "<summary of the conversation since this request"
    new_summary = summary in b and _text(after["messages"][1]) != _text(before["messages"][1])
    return new_summary or b.count("to save context") > a.count("to save context")


async def test_a_long_turn_fits_an_8k_window_and_a_cut_output_reads_back_whole(hermes_home, project):
    model = Model()
    with ScriptedOpenAIServer(model) as server:
        _configure(hermes_home, server.base_url)
        client = Client(fs=False)
        async with running_agent(client, agent_env(hermes_home, None)) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            answer = await conn.prompt(session_id=sid, prompt=[acp.text_block("Read the twelve files, one at a time.")])
        bodies = [r.get("body", r) for r in server.requests]
    assert answer.stop_reason == "end_turn"
    assert client.text().endswith("I read every file.")

    # No request passes the window, by the agent's ratio over all its bytes, reply room included.
    for body in bodies:
        reply = body.get("max_tokens") or body.get("max_completion_tokens") or 0
        assert _estimate(body) + reply <= WINDOW, (_estimate(body), reply)
    # Nor by the usage the agent reports.
    usage = client.of_kind("usage_update")
    assert usage and all(u.size == WINDOW and u.used <= WINDOW for u in usage), [(u.used, u.size) for u in usage]

    # At most one summary request per four steps of the turn.
    steps = [b for b in bodies if not _is_summary(b)]
    summaries = len(bodies) - len(steps)
    assert len(steps) > FILES + 1 and 1 <= summaries <= len(steps) / 4, (summaries, len(steps))

    # Prompt caching: a request repeats the previous one as its prefix unless a compression came between.
    breaks = _breaks(steps)
    assert all(_compressed(steps[i - 1], steps[i]) for i in breaks), breaks
    assert len(breaks) <= len(steps) / 4, breaks

    # The cut output, read back by the marker's path, is the whole output the store keeps.
    async with SessionStore.open(hermes_home / "state.db") as store:
        stored = [m.message for m in await store.messages(sid)]
    outputs = [m for m in stored if m.kind == "tool_result" and m.tool_name == "read_file"]
    assert len(outputs) == FILES and model.shown is not None and len(model.parts) >= 2
    head, tail = model.shown
    whole = outputs[-1].content
    # Read from the first character left out, part after part, to the end of the stored output.
    assert whole.startswith(head) and whole.endswith(tail) and len(head) + len(tail) < len(whole)
    assert head + "".join(model.parts) == whole
    assert all(line in whole for line in _file(FILES - 1).splitlines())


async def test_in_a_large_window_the_same_turn_sends_every_output_whole_and_never_compresses(hermes_home, project):
    def model(body: dict) -> dict:
        reads = sum(1 for m in body["messages"] if m["role"] == "tool")
        if reads < FILES:
            return {"tool_calls": [{"id": f"r{reads}", "name": "read_file", "arguments": {"path": f"file{reads:02d}.py"}}]}
        return {"text": "done"}

    with ScriptedOpenAIServer(model) as server:
        _configure(hermes_home, server.base_url, window=128_000)
        client = Client(fs=False)
        async with running_agent(client, agent_env(hermes_home, None)) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            answer = await conn.prompt(session_id=sid, prompt=[acp.text_block("Read the twelve files, one at a time.")])
        bodies = [r.get("body", r) for r in server.requests]
    assert answer.stop_reason == "end_turn" and len(bodies) == FILES + 1
    assert not any(_is_summary(b) for b in bodies) and _breaks(bodies) == []
    assert "to save context" not in json.dumps(bodies[-1])
    assert bodies[-1]["max_completion_tokens"] == 8192  # the configured reply length: the window has room for it
    shown = [m["content"] for m in bodies[-1]["messages"] if m["role"] == "tool"]
    assert all(line in shown[i] for i in range(FILES) for line in _file(i).splitlines())


PROMPT_CUT = re.compile(r"\n\[… message cut to fit the context window: [^\n]*\]\n")


async def test_a_pasted_log_larger_than_the_window_is_cut_in_requests_and_reads_back(hermes_home, project):
    log = "".join(f"2026-12-02T10:{n // 60 % 60:02d}:{n % 60:02d} worker-{n % 5} processed batch {n} in {n % 97} ms\n" for n in range(1500))
    assert len(log) / 3.5 > 2 * WINDOW  # alone, it would pass the window twice
    state: dict = {"read": None, "shown": None, "marker": None}

    def model(body: dict) -> dict:
        if _is_summary(body):
            return {"text": "SUMMARY: the user pasted a log; reading it back."}
        last = _text(body["messages"][-1])
        if state["shown"] is None:
            marker = PROMPT_CUT.search(last)
            assert marker is not None, last[:300]
            state["shown"], state["marker"] = (last[: marker.start()], last[marker.end() :]), marker.group(0)
            sid, seq, offset, limit = READ_BACK.search(marker.group(0)).groups()
            arguments = {"session_id": sid, "seq": int(seq), "offset": int(offset), "limit": int(limit)}
            return {"tool_calls": [{"id": "r1", "name": "session_search", "arguments": arguments}]}
        if state["read"] is None:
            state["read"] = last
        return {"text": "The log shows 1500 batches."}

    with ScriptedOpenAIServer(model) as server:
        _configure(hermes_home, server.base_url)
        client = Client(fs=False)
        async with running_agent(client, agent_env(hermes_home, None)) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            answer = await conn.prompt(session_id=sid, prompt=[acp.text_block("What does this log show?\n" + log)])
            again = await conn.prompt(session_id=sid, prompt=[acp.text_block("Thanks.")])
        bodies = [r.get("body", r) for r in server.requests]
    assert answer.stop_reason == "end_turn" and again.stop_reason == "end_turn"
    for body in bodies:
        reply = body.get("max_tokens") or body.get("max_completion_tokens") or 0
        assert _estimate(body) + reply <= WINDOW, (_estimate(body), reply)
    usage = client.of_kind("usage_update")
    assert usage and all(u.used <= WINDOW for u in usage), [u.used for u in usage]
    # Head and tail were shown, the marker saying which characters are left out; reading from
    # the first of them gives the stored text's next characters.
    whole = "What does this log show?\n" + log
    head, tail = state["shown"]
    assert whole.startswith(head) and whole.endswith(tail) and len(head) + len(tail) < len(whole) / 4
    assert f"characters {len(head) + 1}-{len(whole) - len(tail)} of {len(whole)}" in state["marker"]
    header, _, part = state["read"].partition("\n")
    assert header.startswith(f"Session {sid}, message 1 (user), characters {len(head) + 1}-")
    part = MORE.sub("", part)
    assert part and whole[len(head) :].startswith(part)
    # The next turn's requests show the message cut the same way (the cached prefix holds).
    assert bodies[-1]["messages"][1] == bodies[0]["messages"][1]
    # The store keeps the message whole.
    async with SessionStore.open(hermes_home / "state.db") as store:
        stored = [m.message for m in await store.messages(sid)]
    assert stored[0].kind == "user" and stored[0].text == whole
