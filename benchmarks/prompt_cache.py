"""Prompt caching: does every model request of a turn repeat the previous one as its prefix?

A real ``hermes-acp`` runs a long turn against a scripted model on 127.0.0.1 that keeps each
request body's bytes: reads, greps and listings of a small git project, a file written, a memory
write and a new skill mid-turn, a step of several reads at once, a subagent (``delegate``) with
reads of its own; then a short second turn, a third with nothing new, and one prompt in a new
session (where the memory written shows); then a second ``hermes-acp`` reopens the session
(``session/load``) for one more prompt. Each request is compared with the previous request of
its conversation (the main session, each subagent; side requests such as compression's summaries
belong to none).

What is compared (a request's *canonical* bytes): what a provider's prefix cache sees, in the
order it sees it, as serialised on the wire (compact JSON, keys in the order sent; checked
against the bytes received, ``wire_exact``): the ``tools`` array, then for Anthropic the
``system`` blocks, then the ``messages`` array without its closing bracket (the
OpenAI-compatible system prompt is its first message). Anthropic's ``cache_control`` markers are left
out (they move to the last block on every step: they mark the prefix, they are not part of it;
``most_cache_breakpoints`` counts them, the API takes four;
``most_blocks_back_to_the_last_cache`` is how far back from its nearest breakpoint a request
must look to find where the one before cached up to, the API looks about 20 blocks back) and its
last message is left open (a block may join it). The request-only text of a turn (the learning
reminders, ``[Ephemeral reminder...``, always last) is the request's *tail*.

The property holds for a request when the previous request's canonical bytes, its tail aside,
start its own. Per conversation and turn: requests, requests compared (all but the first of a
conversation or turn), those the property holds for, the breaks (request index, byte offset, the
bytes on each side, and whether compression made them: a summary or more outputs pruned), bytes
sent (request bodies as received), canonical bytes, the bytes a prefix cache could reuse (the
common prefixes with the previous request, summed) and the new bytes. The first request of a
turn is compared with the last of the turn before under ``turn_boundaries``: a new skill changes
the system prompt there by design (skills are listed from the next turn, memory from the next
session, and a reopened session takes a new memory snapshot). Side requests (compression's
summaries) are counted with their bytes and the bytes they share with the session's last request.

Run: .venv/bin/python benchmarks/prompt_cache.py [--steps 30] [--wire openai anthropic] [--window 0 16000] [--parallel 10] [--code DIR]
(``--steps``: model requests of the first turn, its last one the answer; ``--window``: the
model's context window in tokens for a run, 0 for the provider's default; a small one makes the
turn cross compaction boundaries; ``--parallel``: how many reads the step of reads at once
makes; ``--code``: the ``hermes-acp`` of another tree of the repository, such as a ``git
worktree`` of an older revision.)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import acp
from acp.schema import AllowedOutcome, ClientCapabilities, RequestPermissionResponse

from hermes_cli.scripted_model import ScriptedOpenAIServer, ScriptedServer
from tests.fakes.anthropic_server import ScriptedAnthropicServer

__all__ = ["Canonical", "canonical", "compare", "conversation_of", "is_side_request"]

ROOT = Path(__file__).resolve().parents[1]
MARK = "[Ephemeral reminder"
SUBAGENT_MARK = "# You are a subagent"
SUMMARY_PROMPT_START = "Summarise the conversation above"
SUMMARY_MARK = "<summary of the conversation since this request"
PRUNED_MARK = "[tool output pruned to save context"
CUT_MARK = "tool output cut to save context"
SKILL_NAME = "bench-release-notes"
MEMORY_TEXT = "Release notes live in docs/CHANGES.md; each entry names the module it changes."
PROMPTS = (
    "Go through the modules under src/ and summarise what each does.",
    "Now check the tests folder the same way.",
    "Thanks, that is all.",
)
NEXT_SESSION_PROMPT = "What do you remember about release notes?"
REOPENED_PROMPT = "Anything left from before?"
NEXT_SESSION = len(PROMPTS)  # the turn numbers of the new session's prompt and of the reopened session's
REOPENED = len(PROMPTS) + 1


def _dumps(value: Any) -> str:
    # As the SDKs send bodies (httpx): compact, UTF-8, keys in the order given.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict) and isinstance(part.get("text"), str))
    return ""


def _uncached(value: Any) -> Any:
    """``value`` without Anthropic's cache_control markers."""
    if isinstance(value, dict):
        return {k: _uncached(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_uncached(v) for v in value]
    return value


def is_anthropic(body: dict) -> bool:
    return "system" in body or any(isinstance(m.get("content"), list) and m.get("role") == "assistant" for m in body.get("messages", []))


def system_text(body: dict) -> str:
    if "system" in body:
        return _text(body["system"])
    messages = body.get("messages") or []
    return _text(messages[0]["content"]) if messages and messages[0].get("role") == "system" else ""


def is_side_request(body: dict) -> bool:
    """A request outside any conversation's turn: a summary, a title (they carry no tools)."""
    return not body.get("tools")


def conversation_of(body: dict) -> str:
    """``main`` for the session's own requests; ``subagent: <goal>`` for a subagent's (its first user
    message); ``side`` for the rest."""
    if is_side_request(body):
        return "side"
    if SUBAGENT_MARK in system_text(body):
        first = next((m for m in body["messages"] if m.get("role") == "user"), None)
        goal = _text(first["content"]) if first else ""
        return f"subagent: {goal[:60]}"
    return "main"


def _strip_tail(messages: list[dict], anthropic: bool) -> list[dict]:
    """The messages without the request-only text at their end (copies where changed)."""
    if not messages:
        return messages
    last = messages[-1]
    if last.get("role") != "user":
        return messages
    content = last.get("content")
    if isinstance(content, str):
        if content.startswith(MARK):
            return messages[:-1]
        cut = content.find(f"\n\n{MARK}")
        return messages if cut < 0 else [*messages[:-1], {**last, "content": content[:cut]}]
    if isinstance(content, list):
        for index, block in enumerate(content):
            if isinstance(block, dict) and isinstance(block.get("text"), str) and block["text"].startswith(MARK):
                kept = content[:index]
                return [*messages[:-1], {**last, "content": kept}] if kept else messages[:-1]
    return messages


def _messages_bytes(messages: list[dict], anthropic: bool) -> str:
    """The messages array as sent, without its closing bracket; Anthropic's last message left open."""
    if not messages:
        return "["
    parts = [_dumps(m) for m in messages]
    if anthropic and isinstance(messages[-1].get("content"), list) and parts[-1].endswith("]}"):
        parts[-1] = parts[-1][:-2]
    return "[" + ",".join(parts)


@dataclass(frozen=True, slots=True)
class Canonical:
    """A request's canonical bytes, and how many of them come before its request-only tail."""

    data: bytes
    stable: int


def canonical(body: dict) -> Canonical:
    """The bytes of ``body`` a prefix cache sees, in order (see the module's docstring)."""
    anthropic = is_anthropic(body)
    head = _dumps(_uncached(body.get("tools") or []))
    if anthropic:
        head += _dumps(_uncached(body.get("system") or []))
    messages = _uncached(body.get("messages") or []) if anthropic else body.get("messages") or []
    whole = (head + _messages_bytes(messages, anthropic)).encode()
    stable = (head + _messages_bytes(_strip_tail(messages, anthropic), anthropic)).encode()
    if not whole.startswith(stable):  # a tail cut out of a string ends the string; keep what both share
        stable = stable[: _common(stable, whole)]
    return Canonical(whole, len(stable))


def _common(a: bytes, b: bytes) -> int:
    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    low, high = 0, n  # a[:low] == b[:low]; a[:high] != b[:high]
    while high - low > 1:
        mid = (low + high) // 2
        if a[:mid] == b[:mid]:
            low = mid
        else:
            high = mid
    return low


def _excerpt(data: bytes, at: int, width: int = 60) -> str:
    return data[max(0, at - 20) : at + width].decode("utf-8", "replace")


@dataclass(slots=True)
class Comparison:
    """One request beside the previous request of its conversation."""

    holds: bool
    common: int  # bytes both share from the start (reusable by a prefix cache)
    size: int  # this request's canonical bytes
    divergence: dict | None = None


def compare(before: Canonical, after: Canonical) -> Comparison:
    """Whether ``after`` starts with ``before`` (its tail aside), and where they part if not."""
    common = _common(before.data, after.data)
    holds = common >= before.stable
    divergence = None
    if not holds:
        divergence = {"byte": common, "previous": _excerpt(before.data, common), "this": _excerpt(after.data, common)}
    return Comparison(holds, common, len(after.data), divergence)


def _compaction_between(before: dict, after: dict, summarised: bool) -> str | None:
    """What compression changed between two requests of a conversation: a summary (``summarised``:
    a summary request came between them), more outputs pruned, or outputs cut."""
    if summarised:
        return "summary"
    a, b = _dumps(before.get("messages")), _dumps(after.get("messages"))
    if b.count(SUMMARY_MARK) > a.count(SUMMARY_MARK):
        return "summary"
    for mark, what in ((PRUNED_MARK, "pruned outputs"), (CUT_MARK, "outputs cut")):
        if b.count(mark) > a.count(mark) and b.find(mark) < len(b) - len(_dumps(after["messages"][-1:])):
            return what
    return None


def _breakpoints(body: dict) -> list[int]:
    """The indexes of the Anthropic content blocks marked with cache_control, in order."""
    blocks = [b for m in body.get("messages") or [] if isinstance(m.get("content"), list) for b in m["content"]]
    return [i for i, b in enumerate(blocks) if isinstance(b, dict) and "cache_control" in b]


def _blocks_back(before: dict, after: dict) -> int:
    """How many blocks back from its nearest breakpoint ``after`` must look to find where ``before``
    cached up to (its last breakpoint); 0 when neither marks a message block."""
    marks = _breakpoints(before)
    if not marks:
        return 0
    return min((b - marks[-1] for b in _breakpoints(after) if b >= marks[-1]), default=0)


# -- the scripted model ------------------------------------------------------------------------------


@dataclass(slots=True)
class Plan:
    """What the model asks for, step by step."""

    steps: int
    files: list[str]
    tests: list[str]
    subagent_steps: int = 3
    delegate: bool = True
    parallel: int = 0  # one step reads this many files at once (0: none)

    def main(self, turn: int, step: int) -> dict:
        if turn == 0:
            return self._first_turn(step)
        if turn == 1:
            if step >= 3:
                return {"text": "The tests cover parsing and the cache; nothing else is missing."}
            return _call(f"t{turn}-{step}", "read_file", {"path": self.tests[step % len(self.tests)]}, f"Reading test {step}.")
        if turn == 2:
            return {"text": "You are welcome."}
        if turn == REOPENED:
            return {"text": "Nothing is left."}
        return {"text": f"Release notes: {MEMORY_TEXT}"}

    def _first_turn(self, step: int) -> dict:
        last = self.steps - 1
        if step >= last:
            return {"text": "Each module is summarised above; release notes are in docs/CHANGES.md."}
        if step == self.steps // 3 - 1:
            arguments = {"path": "docs/CHANGES.md", "content": "# Changes\n- src: request handlers read from the cache.\n"}
            return _call(f"s{step}", "write_file", arguments, "Noting the change.")
        if step == self.steps // 3:
            return _call(f"s{step}", "memory", {"action": "add", "file": "memory", "text": MEMORY_TEXT}, "Noting where release notes go.")
        if step == self.steps // 2:
            content = (
                f"---\nname: {SKILL_NAME}\ndescription: Write a release note entry for a change.\n---\n"
                "1. Read docs/CHANGES.md.\n2. Add one line naming the module and the change.\n"
            )
            return _call(f"s{step}", "skill_manage", {"action": "create", "name": SKILL_NAME, "content": content}, "Saving the procedure.")
        if self.delegate and step == (2 * self.steps) // 3:
            task = {"goal": "Read the first three test files and report what they check.", "toolset": "read-only"}
            return _call(f"s{step}", "delegate", {"tasks": [task]}, "Handing the tests to a subagent.")
        if self.parallel and step == self.steps // 2 + 1:
            paths = [self.files[(step + n) % len(self.files)] for n in range(self.parallel)]
            calls = [{"id": f"s{step}-{n}", "name": "read_file", "arguments": {"path": p}} for n, p in enumerate(paths)]
            return {"text": f"Reading {len(paths)} modules at once.", "tool_calls": calls}
        if step % 7 == 6:
            return _call(f"s{step}", "grep", {"pattern": "def ", "path": "src"}, "Looking for the functions.")
        if step % 5 == 4:
            return _call(f"s{step}", "list_dir", {"path": "src"}, "Listing src.")
        return _call(f"s{step}", "read_file", {"path": self.files[step % len(self.files)]}, f"Reading module {step}.")

    def subagent(self, step: int) -> dict:
        if step >= self.subagent_steps:
            return {"text": "The first three tests check parsing, the cache and the command line."}
        return _call(f"sub{step}", "read_file", {"path": self.tests[step % len(self.tests)]}, f"Reading test {step}.")


def _call(call_id: str, name: str, arguments: dict, text: str) -> dict:
    return {"text": text, "tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]}


class Recorder:
    """The script: answers by the plan, and notes the turn each request came in (called under the
    server's lock, in the order of its ``requests``)."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.turn = 0
        self.turns: list[int] = []
        self.counts: dict[str, int] = {}

    def __call__(self, body: dict) -> dict:
        self.turns.append(self.turn)
        who = conversation_of(body)
        if who == "side":
            return {"text": f"Summary {len(self.turns)}: the modules under src/ were read; memory and a skill were saved."}
        key = f"{self.turn}:{who}"
        step = self.counts.get(key, 0)
        self.counts[key] = step + 1
        if who == "main":
            return self.plan.main(self.turn, step)
        return self.plan.subagent(step)


def _stop(answer: Any) -> str:
    """A prompt's stop reason, with the error hermes-acp reported for it if any."""
    error = ((answer.field_meta or {}).get("hermes") or {}).get("error")
    return f"{answer.stop_reason}: {error}" if error else str(answer.stop_reason)


class Editor:
    """An editor that allows whatever it is asked."""

    def __init__(self) -> None:
        self.permission_requests = 0
        self.notices: list[str] = []

    async def session_update(self, session_id, update, **_):
        return None

    async def request_permission(self, options, session_id, tool_call, **_):
        self.permission_requests += 1
        chosen = next((o for o in options if str(o.kind).startswith("allow")), options[0])
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=chosen.option_id))

    def on_connect(self, conn):
        pass


def make_project(root: Path, modules: int) -> tuple[list[str], list[str]]:
    """A small Python project: ``modules`` source files of a few KB and some tests."""
    (root / "src").mkdir(parents=True)
    (root / "tests").mkdir()
    (root / "docs").mkdir()
    (root / "docs" / "CHANGES.md").write_text("# Changes\n")
    files, tests = [], []
    for n in range(modules):
        body = "".join(
            f'def handler_{n}_{k}(request, cache):\n    """Answer request {k} of module {n} from the cache when it holds it."""\n'
            f"    key = (request.path, request.query, {k})\n    if key in cache:\n        return cache[key]\n"
            f"    value = compute_{n}(request, {k})\n    cache[key] = value\n    return value\n\n\n"
            for k in range(12)
        )
        path = f"src/module_{n:02d}.py"
        (root / path).write_text(f'"""Module {n}: request handlers."""\n\n{body}')
        files.append(path)
    for n in range(4):
        path = f"tests/test_{n}.py"
        (root / path).write_text(f"def test_{n}():\n    assert {n} + 1 == {n + 1}\n" * 20)
        tests.append(path)
    git = ["git", "-c", "user.email=bench@example.com", "-c", "user.name=bench"]
    for command in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "start"]):
        subprocess.run([*git, *command], cwd=root, check=True, capture_output=True)
    return files, tests


def hermes_acp() -> str:
    path = Path(sys.executable).parent / "hermes-acp"
    return str(path) if path.exists() else str(ROOT / ".venv" / "bin" / "hermes-acp")


def environment(tmp: Path, wire: str, base_url: str, code: str | None = None) -> dict[str, str]:
    env = {"HERMES_EDITOR_HOME": str(tmp / "home"), "HOME": str(tmp / "user-home"), "PATH": os.environ["PATH"], "HERMES_QUIET": "1"}
    if wire == "anthropic":
        env.update(
            {"ANTHROPIC_BASE_URL": base_url, "ANTHROPIC_API_KEY": "sk-ant-bench-000000", "HERMES_MODEL": "anthropic:claude-scripted"}
        )
    else:
        env.update({"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "sk-bench-000000", "HERMES_MODEL": "openai:scripted"})
    if code:
        env["PYTHONPATH"] = code  # another tree of the repository (a worktree of an older revision)
    return env


async def drive(wire: str, recorder: Recorder, tmp: Path, window: int, code: str | None = None) -> tuple[ScriptedServer, dict]:
    """The turns of one session, one prompt in a new session, then one in the first session
    reopened by a second hermes-acp; the recording server."""
    project = tmp / "project"
    home = tmp / "home"
    home.mkdir(parents=True)
    (tmp / "user-home").mkdir()
    if window:
        (home / "config.toml").write_text(f"[providers.{wire}]\ncontext_window = {window}\n")
    server: ScriptedServer = ScriptedAnthropicServer(recorder) if wire == "anthropic" else ScriptedOpenAIServer(recorder)
    server.keep_raw = True
    stops = []
    editor = Editor()

    def agent() -> Any:
        return acp.spawn_agent_process(
            editor,  # type: ignore[arg-type]  # the SDK's Client protocol, structurally
            hermes_acp(),
            env=environment(tmp, wire, server.base_url, code),
            cwd=str(project),
            transport_kwargs={"stderr": subprocess.DEVNULL},
        )

    with server:
        async with agent() as (conn, _process):
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=ClientCapabilities())
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            for turn, text in enumerate(PROMPTS):
                recorder.turn = turn
                answer = await conn.prompt(session_id=sid, prompt=[acp.text_block(text)])
                stops.append(_stop(answer))
            recorder.turn = NEXT_SESSION
            other = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            answer = await conn.prompt(session_id=other, prompt=[acp.text_block(NEXT_SESSION_PROMPT)])
            stops.append(_stop(answer))
        async with agent() as (conn, _process):
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=ClientCapabilities())
            await conn.load_session(cwd=str(project), session_id=sid, mcp_servers=[])
            recorder.turn = REOPENED
            answer = await conn.prompt(session_id=sid, prompt=[acp.text_block(REOPENED_PROMPT)])
            stops.append(_stop(answer))
    return server, {"stop_reasons": stops, "permission_requests": editor.permission_requests}


# -- the figures --------------------------------------------------------------------------------------


@dataclass(slots=True)
class TurnFigures:
    requests: int = 0
    compared: int = 0
    holds: int = 0
    bytes_sent: int = 0
    canonical_bytes: int = 0
    reusable_bytes: int = 0
    breaks: list[dict] = field(default_factory=list)

    def boundary(self, common: int) -> None:
        """The first request of a turn: what it shares with the turn before is reusable too."""
        self.reusable_bytes += common

    def add(self, raw: int, result: Comparison | None, at: int, compaction: str | None) -> None:
        self.requests += 1
        self.bytes_sent += raw
        if result is None:
            return
        self.compared += 1
        self.holds += result.holds
        self.canonical_bytes += result.size
        self.reusable_bytes += result.common
        if not result.holds:
            self.breaks.append({"request": at, **(result.divergence or {}), "compaction": compaction})

    def first(self, size: int) -> None:
        self.canonical_bytes += size

    def out(self) -> dict:
        return {
            "requests": self.requests,
            "compared": self.compared,
            "prefix_holds": self.holds,
            "bytes_sent": self.bytes_sent,
            "canonical_bytes": self.canonical_bytes,
            "reusable_bytes": self.reusable_bytes,
            "new_bytes": self.canonical_bytes - self.reusable_bytes,
            "reusable_share": round(self.reusable_bytes / self.canonical_bytes, 3) if self.canonical_bytes else 0,
            "first_divergence": self.breaks[0] if self.breaks else None,
            "breaks": len(self.breaks),
            "break_requests": [(b["request"], b["compaction"]) for b in self.breaks],
            "breaks_at_compaction": sum(1 for b in self.breaks if b["compaction"]),
        }


def analyse(bodies: list[dict], raws: list[bytes], turns: list[int]) -> dict:
    """Per conversation and turn: each request beside the previous one of its conversation."""
    last: dict[str, tuple[int, dict, Canonical, int]] = {}
    summaries = [i for i, b in enumerate(bodies) if is_side_request(b) and SUMMARY_PROMPT_START in _dumps(b.get("messages"))]
    figures: dict[str, TurnFigures] = {}
    boundaries = []
    side = side_bytes = side_reusable = 0
    wire_exact = all(_dumps(b).encode() == r for b, r in zip(bodies, raws))
    breakpoints = max((r.count(b'"cache_control"') for r in raws), default=0)
    # Anthropic looks for an earlier cache entry about 20 blocks back from a breakpoint at most.
    blocks_back = 0
    for index, (body, raw, turn) in enumerate(zip(bodies, raws, turns)):
        who = conversation_of(body)
        if who == "side":
            # A summary request beside the session's last request: what of it a cache could serve.
            side += 1
            side_bytes += len(raw)
            if "main" in last:
                side_reusable += _common(last["main"][2].data, canonical(body).data)
            continue
        label = (
            who if who != "main" else {NEXT_SESSION: "main, next session", REOPENED: "main, reopened"}.get(turn, f"main, turn {turn + 1}")
        )
        here = canonical(body)
        key = "main, next session" if label == "main, next session" else who
        previous = last.get(key)
        figure = figures.setdefault(label, TurnFigures())
        if previous is None:
            figure.add(len(raw), None, index, None)
            figure.first(len(here.data))
        elif who == "main" and previous[0] != turn:
            # The first request of a turn beside the last of the one before.
            result = compare(previous[2], here)
            figure.add(len(raw), None, index, None)
            figure.first(len(here.data))
            figure.boundary(result.common)
            changed = system_text(previous[1]) != system_text(body)
            boundaries.append(
                {
                    "request": index,
                    "into": label,
                    "prefix_holds": result.holds,
                    "common_bytes": result.common,
                    "system_prompt_changed": changed,
                    "new_skill_listed": SKILL_NAME in system_text(body) and SKILL_NAME not in system_text(previous[1]),
                    "memory_listed": MEMORY_TEXT in system_text(body) and MEMORY_TEXT not in system_text(previous[1]),
                    "divergence": result.divergence,
                }
            )
        else:
            summarised = any(s in range(previous[3], index) for s in summaries)
            figure.add(len(raw), compare(previous[2], here), index, _compaction_between(previous[1], body, summarised))
            blocks_back = max(blocks_back, _blocks_back(previous[1], body))
        last[key] = (turn, body, here, index)
    return {
        "wire_exact": wire_exact,
        "most_cache_breakpoints": breakpoints,
        "most_blocks_back_to_the_last_cache": blocks_back if breakpoints else None,
        "side_requests": side,
        "side_request_bytes": side_bytes,
        "side_request_reusable_bytes": side_reusable,
        "conversations": {label: f.out() for label, f in figures.items()},
        "turn_boundaries": boundaries,
    }


async def run(wire: str, steps: int, window: int, delegate: bool = True, code: str | None = None, parallel: int = 0) -> dict:
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        files, tests = make_project(tmp / "project", modules=max(4, min(steps, 24)))
        recorder = Recorder(Plan(steps, files, tests, delegate=delegate, parallel=parallel))
        server, driven = await drive(wire, recorder, tmp, window, code)
        bodies = [r.get("body", r) for r in server.requests]
        figures = analyse(bodies, server.raw_requests, recorder.turns)
        next_session = [b for b, t in zip(bodies, recorder.turns) if t == NEXT_SESSION and not is_side_request(b)]
        figures["next_session_memory_listed"] = bool(next_session) and MEMORY_TEXT in system_text(next_session[0])
    return {"wire": wire, "window": window or "default", "steps": steps, **driven, **figures}


def summary_line(result: dict) -> dict:
    """Totals of a run over its conversations."""
    convs = result["conversations"].values()
    return {
        "requests": sum(c["requests"] for c in convs),
        "prefix_holds": f"{sum(c['prefix_holds'] for c in convs)}/{sum(c['compared'] for c in convs)}",
        "bytes_sent": sum(c["bytes_sent"] for c in convs),
        "reusable_bytes": sum(c["reusable_bytes"] for c in convs),
        "new_bytes": sum(c["new_bytes"] for c in convs),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=30, help="model requests in the first turn (its last one answers)")
    parser.add_argument("--wire", nargs="+", choices=("openai", "anthropic"), default=["openai", "anthropic"])
    parser.add_argument("--window", nargs="+", type=int, default=[0, 16000], help="context windows in tokens (0: the default)")
    parser.add_argument("--parallel", type=int, default=10, help="one step of the first turn reads this many files at once")
    parser.add_argument("--code", help="run the hermes-acp of another tree of the repository (for a before/after)")
    args = parser.parse_args(argv)
    code = str(Path(args.code).resolve()) if args.code else None
    if args.steps < 6:
        parser.error("--steps must be at least 6 (reads, a memory write, a skill, a subagent, an answer)")
    runs = []
    for wire in args.wire:
        for window in args.window:
            result = asyncio.run(run(wire, args.steps, window, code=code, parallel=args.parallel))
            result["totals"] = summary_line(result)
            runs.append(result)
    holds = all(c["breaks"] == c["breaks_at_compaction"] for r in runs for c in r["conversations"].values())
    out = {"benchmark": "prompt_cache", "code": code or str(ROOT), "prefix_holds_outside_compaction": holds, "runs": runs}
    print(json.dumps(out, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
