"""What keeps a step's cost from growing with the conversation: the repaired history kept up to
date message by message, and each message's chat entry built once; requests stay the same."""

from __future__ import annotations

import json

from core.messages import (
    AssistantMessage,
    HistoryRepair,
    Message,
    SummaryMessage,
    TextPart,
    ToolCallPart,
    ToolResultMessage,
    UserMessage,
    dump_message,
    repair_history,
)
from core.models.base import ModelRequest
from core.models.openai_compat import chat_messages, encode_body


def _call(call_id: str) -> ToolCallPart:
    return ToolCallPart(id=call_id, name="read_file", arguments={"path": f"{call_id}.txt"})


def _messy_history() -> list[Message]:
    """Every case repair_history handles: answered and dangling calls, orphan results, empty
    interruptions, a summary, and calls still waiting at the end."""
    return [
        UserMessage.of("hi"),
        AssistantMessage(parts=[TextPart(text="reading"), _call("a"), _call("b")]),
        ToolResultMessage(tool_call_id="a", tool_name="read_file", content="A"),
        UserMessage.of("a crash left b unanswered"),
        ToolResultMessage(tool_call_id="zz", tool_name="read_file", content="orphan"),
        AssistantMessage(parts=[], interrupted=True),
        AssistantMessage(parts=[TextPart(text="cut")], interrupted=True),
        AssistantMessage(parts=[_call("c")]),
        ToolResultMessage(tool_call_id="c", tool_name="read_file", content="C"),
        SummaryMessage(text="all of that"),
        ToolResultMessage(tool_call_id="c", tool_name="read_file", content="after the summary"),
        UserMessage.of("go on"),
        AssistantMessage(parts=[_call("d"), _call("e")]),
        ToolResultMessage(tool_call_id="e", tool_name="read_file", content="E"),
    ]


def _dumped(messages: list[Message]) -> list[str]:
    return [dump_message(m) for m in messages]


def test_the_kept_repair_matches_repair_history_after_every_message():
    history: list[Message] = []
    kept = HistoryRepair()
    for message in _messy_history():
        history.append(message)
        assert _dumped(kept(history)) == _dumped(repair_history(history))
        assert _dumped(kept(history)) == _dumped(repair_history(history))  # asked again, unchanged


def test_the_kept_repair_starts_over_for_another_history():
    kept = HistoryRepair()
    first = _messy_history()
    kept(first)
    other = [UserMessage.of("elsewhere"), AssistantMessage(parts=[_call("x")])]
    assert _dumped(kept(other)) == _dumped(repair_history(other))
    shorter = first[:3]
    assert _dumped(kept(shorter)) == _dumped(repair_history(shorter))


def test_a_request_only_reminder_does_not_stick_to_the_shared_entries():
    history: list[Message] = [UserMessage.of("first"), AssistantMessage(parts=[TextPart(text="ok")]), UserMessage.of("second")]
    with_nudge = chat_messages(ModelRequest(system="s", messages=history, ephemeral="[Ephemeral reminder]"))
    without = chat_messages(ModelRequest(system="s", messages=history))
    assert with_nudge[-1]["content"] == "second\n\n[Ephemeral reminder]"
    assert without[-1]["content"] == "second"
    assert chat_messages(ModelRequest(system="s", messages=history)) == without


def _plain_json(body: dict) -> str:
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def test_the_request_body_is_the_plain_json_of_its_messages_step_after_step():
    """Each shared message is encoded once for the requests that carry it; the bytes are those
    of encoding the whole body at once, at every step, reminder or not, whatever the text."""
    history: list[Message] = []
    tools = [{"type": "function", "function": {"name": "read_file", "description": "Read «a» file", "parameters": {"type": "object"}}}]
    for i, message in enumerate([*_messy_history(), UserMessage.of('ünïcode ✓ \u2028 "quoted" \\ back')]):
        history.append(message)
        for ephemeral in (None, "[reminder]"):
            entries = chat_messages(ModelRequest(system="sys ✓", messages=repair_history(history), ephemeral=ephemeral))
            body = {"model": "m", "stream": True, "messages": entries, "tools": tools, "max_tokens": 100 + i}
            assert encode_body(body) == _plain_json(body)
    # A reminder on the last entry never reaches the JSON kept for that message.
    last = chat_messages(ModelRequest(system="s", messages=history))
    with_reminder = chat_messages(ModelRequest(system="s", messages=history, ephemeral="[nudge]"))
    assert encode_body({"messages": with_reminder}) == _plain_json({"messages": with_reminder})
    assert encode_body({"messages": last}) == _plain_json({"messages": last})
    assert "[nudge]" not in encode_body({"messages": last})
