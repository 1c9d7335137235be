"""The real hermes-gateway process against the fake Bot API and the scripted model: chat, auth, approvals."""

from __future__ import annotations

import asyncio
import subprocess

from core.messages import AssistantMessage, TextPart, UserMessage
from core.store import SessionStore
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.fakes.telegram_server import html_error
from tests.hermes_gateway.harness import BIN, OWNER, STRANGER, cli, gateway_env, settle, start

FRIEND = 5151
GROUP = -100200


def test_chat_streams_and_splits_a_long_reply(hermes_home, project, telegram):
    paragraph = "A **bold** claim with `code` & <angle> brackets. " * 12
    reply = "\n\n".join(f"{i}. {paragraph}" for i in range(40)) + "\n\n```python\n" + "print('x')\n" * 300 + "```"
    # Streamed over about two seconds: past the first draft's moment, so a draft is edited.
    spec = {"text": reply, "chunk_size": 2000, "delay": 0.15}
    with ScriptedOpenAIServer([spec]) as model, start(hermes_home, project, telegram, model) as gateway:
        telegram.send_user_message(OWNER, "write me an essay")
        telegram.wait_for(lambda: len([m for m in telegram.sent(OWNER) if m["text"].startswith("(")]) >= 3, 30, "numbered chunks")
        gateway.stop()
    messages = [m for m in telegram.sent(OWNER)]
    chunks = [m for m in messages if m["text"].startswith("(")]
    total = len(chunks)
    assert total >= 4 and all(m["text"].startswith(f"({i}/{total})") for i, m in enumerate(chunks, 1))
    assert all(len(m["text"]) <= 4096 and m["parse_mode"] == "HTML" and html_error(m["text"]) is None for m in chunks)
    assert chunks[0]["edits"] >= 1  # the streamed draft became the first chunk
    # Nothing was dropped: every paragraph and every code line arrived.
    joined = "\n".join(m["text"] for m in chunks)
    assert all(f"{i}. A <b>bold</b> claim" in joined for i in range(40))
    assert joined.count("print(&#x27;x&#x27;)") + joined.count("print('x')") == 300
    assert any(m for m, p in telegram.calls if m == "sendChatAction")


def test_html_rejected_by_telegram_falls_back_to_plain_text(hermes_home, project, telegram):
    telegram.reject_html = True
    with ScriptedOpenAIServer([{"text": "Some **markdown** here."}]) as model, start(hermes_home, project, telegram, model):
        telegram.send_user_message(OWNER, "reply with markdown")
        found = telegram.wait_text(OWNER, "Some **markdown** here.")
    assert found["parse_mode"] is None


def test_authorisation_matrix_denies_before_any_work(hermes_home, project, telegram):
    with ScriptedOpenAIServer([{"text": "should never be asked"}]) as model, start(hermes_home, project, telegram, model) as gateway:
        telegram.send_user_message(STRANGER, "hello")
        code_message = telegram.wait_text(STRANGER, "Pairing code")
        telegram.send_user_message(STRANGER, "/help")
        telegram.send_user_message(STRANGER, "edited text", edited=True)
        telegram.send_user_message(STRANGER, "@hermes_test_bot do things", chat_id=GROUP, chat_type="supergroup")
        query = telegram.press(STRANGER, {"message_id": code_message["message_id"], "chat_id": STRANGER, "text": "x"}, "ap|0123|o")
        assert "not authorised" in telegram.answer_for(query)["text"]
        telegram.wait_text(GROUP, "Message me privately to pair")
        settle(telegram)  # every stranger's update is handled through and through
        gateway.stop()
        assert model.requests == []  # no turn ever started
    stranger_texts = [m["text"] for m in telegram.sent(STRANGER)]
    # The same code again for /help (rate limit), never the help text; the edit got nothing.
    assert len(stranger_texts) == 2 and all("Pairing code" in t for t in stranger_texts)
    assert stranger_texts[0].split("Pairing code: ")[1][:8] == stranger_texts[1].split("Pairing code: ")[1][:8]


def test_pairing_approved_on_the_machine_lets_the_user_chat(hermes_home, project, telegram):
    with ScriptedOpenAIServer([{"text": "Welcome aboard."}]) as model, start(hermes_home, project, telegram, model):
        telegram.send_user_message(STRANGER, "hi")
        text = telegram.wait_text(STRANGER, "Pairing code")["text"]
        code = text.split("Pairing code: ")[1][:8]
        assert cli(hermes_home, "pairing", "approve", "WRONG123").returncode == 1
        listed = cli(hermes_home, "pairing", "list")
        assert code in listed.stdout and str(STRANGER) in listed.stdout
        approved = cli(hermes_home, "pairing", "approve", code)
        assert approved.returncode == 0 and str(STRANGER) in approved.stdout
        telegram.send_user_message(STRANGER, "now?")
        telegram.wait_text(STRANGER, "Welcome aboard.")
        assert str(STRANGER) in cli(hermes_home, "pairing", "users").stdout


def test_approval_buttons_are_bound_to_the_requesting_user_and_chat(hermes_home, project, telegram):
    script = [
        {"tool_calls": [{"id": "c1", "name": "write_file", "arguments": {"path": "notes.txt", "content": "hi\n"}}]},
        {"text": "Wrote it."},
    ]
    with ScriptedOpenAIServer(script) as model, start(hermes_home, project, telegram, model, allowed=(OWNER, FRIEND)):
        telegram.send_user_message(OWNER, "@hermes_test_bot write notes.txt", chat_id=GROUP, chat_type="supergroup")
        asked = telegram.wait_text(GROUP, "Approval needed")
        buttons = [b["callback_data"] for row in asked["reply_markup"]["inline_keyboard"] for b in row]
        assert len(buttons) == 3 and all(len(b.encode()) <= 64 for b in buttons)
        allow_once = next(b for b in buttons if b.endswith("|o"))
        # An allowed user, but not the one who asked: refused, and nothing happens.
        refused = telegram.press(FRIEND, asked, allow_once)
        assert "Only the person who asked" in telegram.answer_for(refused)["text"]
        assert not (project / "notes.txt").exists()
        # Still pending after the refusal ("Allowed once", not "already answered"): the refused press allowed nothing.
        accepted = telegram.press(OWNER, asked, allow_once)
        assert telegram.answer_for(accepted)["text"] == "Allowed once"
        telegram.wait_text(GROUP, "Wrote it.")
        assert (project / "notes.txt").read_text() == "hi\n"
        late = telegram.press(OWNER, asked, allow_once)
        assert "expired or was already answered" in telegram.answer_for(late)["text"]


def test_approval_timeout_denies(hermes_home, project, telegram):
    script = [
        {"tool_calls": [{"id": "c1", "name": "write_file", "arguments": {"path": "late.txt", "content": "x"}}]},
        {"text": "Could not write."},
    ]
    with ScriptedOpenAIServer(script) as model, start(hermes_home, project, telegram, model, extra="[approvals]\ntimeout = 1.5"):
        telegram.send_user_message(OWNER, "write late.txt")
        asked = telegram.wait_text(OWNER, "Approval needed")
        allow_once = asked["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        telegram.wait_text(OWNER, "Could not write.")
        telegram.wait_text(OWNER, "late.txt — Expired")  # the question's message says so
        late = telegram.press(OWNER, asked, allow_once)
        assert "expired" in telegram.answer_for(late)["text"]
    assert not (project / "late.txt").exists()


def test_commands_sessions_resume_mode_and_continuity(hermes_home, project, telegram):
    async def editor_session() -> str:
        async with SessionStore.open() as store:
            record = await store.create_session(cwd=str(project), surface="acp", title="Fix the parser")
            await store.append_message(record.id, UserMessage.of("the parser breaks on tabs"))
            await store.append_message(record.id, AssistantMessage(parts=[TextPart(text="Noted: tabs.")], model="m"))
            return record.id

    session_id = asyncio.run(editor_session())
    with ScriptedOpenAIServer([{"text": "Continuing from the phone."}]) as model, start(hermes_home, project, telegram, model):
        telegram.send_user_message(OWNER, "/sessions")
        telegram.wait_text(OWNER, "Fix the parser")
        telegram.send_user_message(OWNER, f"/resume {session_id[:8]}")
        telegram.wait_text(OWNER, "Resumed Fix the parser (2 messages, from acp)")
        telegram.send_user_message(OWNER, "/mode read-only")
        telegram.wait_text(OWNER, "Mode set to read-only")
        telegram.send_user_message(OWNER, "/project nowhere")
        telegram.wait_text(OWNER, "No project named 'nowhere'")
        telegram.send_user_message(OWNER, "/whoami")
        telegram.wait_text(OWNER, f"User id: {OWNER}")
        telegram.send_user_message(OWNER, "and spaces?")
        telegram.wait_text(OWNER, "Continuing from the phone.")
        # The model saw the editor's history.
        sent = [m.get("content") for m in model.requests[0]["messages"]]
        assert any("the parser breaks on tabs" in str(c) for c in sent)

    async def stored() -> list[str]:
        async with SessionStore.open() as store:
            return [m.message.text for m in await store.messages(session_id)]

    assert "Continuing from the phone." in asyncio.run(stored())  # the editor sees it on reload


def test_second_gateway_for_the_same_bot_exits_and_status_reports(hermes_home, project, telegram):
    with ScriptedOpenAIServer([]) as model, start(hermes_home, project, telegram, model) as first:
        env = gateway_env(hermes_home, telegram, model.base_url)
        second = subprocess.run([str(BIN / "hermes-gateway"), "run"], env=env, capture_output=True, text=True, timeout=60)
        assert second.returncode == 1 and "already running for this bot" in second.stderr
        status = cli(hermes_home, "gateway", "status")
        assert status.returncode == 0 and "running" in status.stdout and "@hermes_test_bot" in status.stdout
        code, err = first.stop()
    assert code == 0
    assert "not running" in cli(hermes_home, "gateway", "status").stdout
    # The token never reaches a log or the status file.
    logs = "".join(p.read_text() for p in (hermes_home / "logs").glob("*.log"))
    statuses = "".join(p.read_text() for p in (hermes_home / "gateway").glob("*.json"))
    assert telegram.token not in logs + statuses + err
    assert telegram.token.split(":")[1] not in logs + statuses + err


def test_sigterm_lets_the_turn_in_flight_finish(hermes_home, project, telegram):
    with (
        ScriptedOpenAIServer([{"text": "slow but complete", "delay": 1.5}]) as model,
        start(hermes_home, project, telegram, model) as gateway,
    ):
        telegram.send_user_message(OWNER, "take your time")
        telegram.wait_for(lambda: model.requests, 20, "the model request")
        code, _ = gateway.stop()
    assert code == 0
    assert any("slow but complete" in m["text"] for m in telegram.sent(OWNER))


def test_documents_are_saved_and_given_to_the_agent(hermes_home, project, telegram):
    telegram.files["doc1"] = b"line one\nline two\n"
    with ScriptedOpenAIServer([{"text": "Read your file."}]) as model, start(hermes_home, project, telegram, model):
        telegram.send_user_message(
            OWNER,
            "",
            document={"file_id": "doc1", "file_unique_id": "u1", "file_name": "notes.txt", "mime_type": "text/plain", "file_size": 18},
            caption="summarise",
        )
        telegram.wait_text(OWNER, "Read your file.")
        prompt = str(model.requests[0]["messages"][-1]["content"])
    assert "line two" in prompt and "summarise" in prompt
    assert list((hermes_home / "gateway" / "uploads").rglob("*notes.txt"))
