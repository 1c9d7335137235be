"""core.learning.export and export_clean: what each format makes of awkward histories, streaming
past a page, outcomes, and what the cleaner replaces."""

from __future__ import annotations

import json
from pathlib import Path

from core.agent.prompt import PROMPT_KEY
from core.learning import export
from core.learning.export import LAST_TURN_KEY, Selection, export_sessions, outcome_of, select_sessions
from core.learning.export_clean import Anonymiser, Cleaner, secret_free
from core.messages import AssistantMessage, TextPart, ToolCallPart, ToolResultMessage, UserMessage
from core.store import SessionStore


def call(call_id: str, name: str = "read_file", **arguments: object) -> ToolCallPart:
    return ToolCallPart(id=call_id, name=name, arguments=arguments)


def reply(text: str = "", *calls: ToolCallPart, interrupted: bool = False) -> AssistantMessage:
    parts: list = [TextPart(text=text)] if text else []
    return AssistantMessage(parts=[*parts, *calls], model="m", interrupted=interrupted)


def result(call_id: str, content: str, *, error: bool = False) -> ToolResultMessage:
    return ToolResultMessage(tool_call_id=call_id, tool_name="read_file", content=content, is_error=error)


async def run(store: SessionStore, fmt: str, cleaner: Cleaner | None = None, **selection: object) -> tuple[str, export.Exported]:
    out: list[str] = []
    done = await export_sessions(store, select_sessions(store, Selection(**selection)), fmt, out.append, cleaner=cleaner)  # type: ignore[arg-type]
    return "".join(out), done


async def session(store: SessionStore, cwd: str, *messages: object, surface: str = "acp", meta: dict | None = None) -> str:
    record = await store.create_session(cwd=cwd, surface=surface, meta=meta)  # type: ignore[arg-type]
    for message in messages:
        await store.append_message(record.id, message)  # type: ignore[arg-type]
    return record.id


async def test_awkward_histories_stay_valid_in_each_trainer_format(tmp_path):
    async with SessionStore.open(tmp_path / "state.db") as store:
        await session(
            store,
            "/p",
            UserMessage.of("first"),
            UserMessage.of("second, before any answer"),
            reply("", call("a")),
            result("a", "A"),
            result("zz", "a result whose call is not in the history"),
            reply("partial", interrupted=True),
            UserMessage.of("go on"),
            reply("looking", call("b"), call("c")),
            result("c", "C"),  # b never answered (a crash)
            UserMessage.of("and?"),
            reply("done"),
            meta={PROMPT_KEY: "You are Hermes."},
        )
        text, done = await run(store, "openai")
        (row,) = [json.loads(line) for line in text.splitlines()]
        assert [m["role"] for m in row["messages"]] == [
            "system", "user", "user", "assistant", "tool", "assistant", "user", "assistant", "tool", "tool", "user", "assistant",
        ]  # fmt: skip
        assert row["messages"][5] == {"role": "assistant", "content": "partial", "weight": 0}
        assert [(m["tool_call_id"], m["content"]) for m in row["messages"][8:10]] == [("b", export.INTERRUPTED), ("c", "C")]
        assert "zz" not in text and row["parallel_tool_calls"] is True
        assert row["tools"][0]["function"] == {"name": "read_file", "description": "", "parameters": {"type": "object"}}

        text, _ = await run(store, "sharegpt")
        (item,) = json.loads(text)
        assert item["system"] == "You are Hermes."
        convo = [(t["from"], t["value"]) for t in item["conversations"]]
        # The prompts before an answer are one; the interrupted reply is the answer of that turn; the
        # turn whose calls never reached an answer is left out, its prompt joined to the next.
        assert convo[0] == ("human", "first\n\nsecond, before any answer")
        assert [c[0] for c in convo] == ["human", "function_call", "observation", "gpt", "human", "gpt"]
        assert convo[3] == ("gpt", "partial") and convo[4] == ("human", "go on\n\nand?") and convo[5] == ("gpt", "done")


async def test_sessions_and_messages_stream_past_a_page_in_order(tmp_path, monkeypatch):
    monkeypatch.setattr(export, "_PAGE", 7)
    async with SessionStore.open(tmp_path / "state.db") as store:
        ids = []
        for n in range(9):
            messages = [m for i in range(5) for m in (UserMessage.of(f"s{n} q{i}"), reply(f"s{n} a{i}"))]
            ids.append(await session(store, f"/p/{n}", *messages))
        text, done = await run(store, "openai")
        rows = [json.loads(line) for line in text.splitlines()]
        assert done.written == ids and len(rows) == 9
        assert [m["content"] for m in rows[8]["messages"]] == [t for i in range(5) for t in (f"s8 q{i}", f"s8 a{i}")]
        text, _ = await run(store, "trajectory", project="/p/3")
        (one,) = [json.loads(line) for line in text.splitlines()]
        assert one["session"]["id"] == ids[3] and [s["index"] for s in one["steps"]] == list(range(10))


def test_outcome_prefers_the_kept_end_of_the_last_turn():
    ended = {LAST_TURN_KEY: {"stop_reason": "cancelled", "error": False, "ended_at": 100.0}}
    assert outcome_of(ended, reply("x"), 90.0) == "cancelled"
    assert outcome_of({LAST_TURN_KEY: {"stop_reason": "end_turn", "error": True, "ended_at": 100.0}}, None, 90.0) == "failed"
    assert outcome_of({LAST_TURN_KEY: {"stop_reason": "refusal", "error": False, "ended_at": 100.0}}, None, 90.0) == "refused"
    assert outcome_of({LAST_TURN_KEY: {"stop_reason": "max_turn_requests", "error": False, "ended_at": 1.0}}, None, None) == "incomplete"
    # A prompt after the kept end: that turn never ended (a killed process), judged by the last message.
    assert outcome_of(ended, UserMessage.of("hello"), 120.0) == "unknown"
    assert outcome_of(ended, reply("answered"), 120.0) == "completed"
    assert outcome_of({}, reply("", call("a")), None) == "unknown"
    assert outcome_of({}, reply("cut", interrupted=True), None) == "unknown"


def test_secrets_go_from_text_and_from_secret_named_arguments():
    text = 'key sk-abcdefghijklmnopqrstuv and {"db_password": "hunter2hunter2"} and Authorization: Bearer abcdefghijklmnop0123'
    clean = secret_free(text)
    assert "sk-abcdef" not in clean and "hunter2" not in clean and "abcdefghijklmnop0123" not in clean
    assert '"db_password": "[redacted]"' in clean and "Bearer [redacted]" in clean
    value = Cleaner().value({"token": "short-but-secret", "nested": [{"API_KEY": "x" * 9}], "path": "a.py", "count": 3}, None)
    assert value == {"token": "[redacted]", "nested": [{"API_KEY": "[redacted]"}], "path": "a.py", "count": 3}


def test_anonymiser_replaces_whole_paths_names_and_emails_consistently():
    anonymiser = Anonymiser(home=("/home/Ann",), names=("Ann Lee", "ann"))
    said = anonymiser.text(
        "/home/Ann/work/app/main.py, /home/Ann/work/app2, /home/Ann/work/app. /home/Annex/x "
        "ANN wrote to Bob@Example.com and bob@example.com, cc carol@example.net; Ann Lee, annotated",
        "/home/Ann/work/app",
    )
    assert said == (
        "<project>/main.py, ~/work/app2, <project>. /home/Annex/x "
        "<user> wrote to user1@example.com and user1@example.com, cc user2@example.com; <user>, annotated"
    )
    assert anonymiser.text("again carol@example.net", None) == "again user2@example.com"  # the same across sessions
    assert anonymiser.text("/srv/app/x and /home/Ann", "/srv/app") == "<project>/x and ~"


def test_this_users_anonymiser_takes_the_home_and_login(monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "h"))
    monkeypatch.setenv("LOGNAME", "wombat")
    found = Anonymiser.of_this_user()
    assert str(Path(tmp_path / "h")) in found.home and "wombat" in found.names


async def test_reused_call_ids_become_unique_and_each_result_follows_its_own_call(tmp_path):
    async with SessionStore.open(tmp_path / "state.db") as store:
        steps = [m for n in range(3) for m in (reply("", call("call_1", path=f"f{n}")), result("call_1", f"F{n}"))]
        await session(store, "/p", UserMessage.of("go"), *steps, reply("", call("call_1_2")), result("call_1_2", "X"), reply("ok"))
        text, _ = await run(store, "openai")
        messages = json.loads(text)["messages"]
        calls = [c["id"] for m in messages for c in m.get("tool_calls", [])]
        assert calls == ["call_1", "call_1_2", "call_1_3", "call_1_2_2"]
        assert [(m["tool_call_id"], m["content"]) for m in messages if m["role"] == "tool"] == list(zip(calls, ["F0", "F1", "F2", "X"]))


async def test_a_turn_that_never_ended_has_no_stop_reason(tmp_path):
    async with SessionStore.open(tmp_path / "state.db") as store:
        kept = {LAST_TURN_KEY: {"stop_reason": "end_turn", "error": False, "ended_at": 1.0}}
        await session(store, "/p", UserMessage.of("a prompt after that turn, never answered"), meta=kept)
        await session(store, "/q", meta=kept)
        text, _ = await run(store, "trajectory")
        stale, fresh = [json.loads(line)["session"] for line in text.splitlines()]
        assert (stale["outcome"], stale["stop_reason"]) == ("unknown", None)
        assert (fresh["outcome"], fresh["stop_reason"]) == ("completed", "end_turn")
