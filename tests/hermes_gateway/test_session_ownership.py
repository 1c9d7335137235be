"""Sessions belong to whoever started them, against the real hermes-gateway and the fake Bot API:
a paired user reaches only their own chat sessions (listing, /resume, /undo, turns, the
session_search tool); the owner reaches all; approvals stay with the owner and the asker."""

from __future__ import annotations

import asyncio
import json
import re
import sqlite3
import time

from core.messages import AssistantMessage, TextPart, UserMessage
from core.store import SessionStore, db
from core.store.gateway import ChatBinding, GatewayStore
from core.store.migrations import MIGRATIONS, m006_gateway_session_starter
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.hermes_gateway.harness import OWNER, GatewayProcess, gateway_env, start, write_config

FRIEND = 5151
GROUP = -100400
BOT = "@hermes_test_bot"
# What the owner's sessions hold; none of it may reach the friend's chat or the friend's model requests.
EDITOR_TITLE, EDITOR_SECRET = "Secret editor work", "ZX-9931"
CRON_TITLE, CRON_SECRET = "Nightly deploy check", "OWNER-CRON-SECRET"
CHAT_SECRET = "OWNER-CHAT-SECRET"
SECRETS = (EDITOR_TITLE, EDITOR_SECRET, CRON_TITLE, CRON_SECRET, CHAT_SECRET)


def _session(project, surface: str, title: str, text: str) -> str:
    """A session of the owner made outside any chat (the editor, or a machine job's run)."""

    async def body() -> str:
        async with SessionStore.open() as store:
            record = await store.create_session(cwd=str(project), surface=surface, title=title)
            await store.append_message(record.id, UserMessage.of(text))
            await store.append_message(record.id, AssistantMessage(parts=[TextPart(text="Understood.")], model="m"))
            return record.id

    return asyncio.run(body())


def _messages(session_id: str) -> list[str]:
    async def body() -> list[str]:
        async with SessionStore.open() as store:
            return [m.message.model_dump_json() for m in await store.messages(session_id)]

    return asyncio.run(body())


def _bound(hermes_home, chat_key: str) -> str | None:
    with sqlite3.connect(hermes_home / "state.db") as conn:
        row = conn.execute("SELECT session_id FROM gateway_chats WHERE chat_key = ?", (chat_key,)).fetchone()
    return row[0] if row else None


def _count(telegram, chat: int, needle: str) -> int:
    return sum(needle in m["text"] for m in telegram.sent(chat))


def _whoami(telegram, user: int, chat: int | None = None) -> str:
    chat = user if chat is None else chat
    seen = _count(telegram, chat, "User id")
    telegram.send_user_message(user, "/whoami", **({"chat_id": chat, "chat_type": "supergroup"} if chat != user else {}))
    telegram.wait_for(lambda: _count(telegram, chat, "User id") > seen, 20, "/whoami")
    return [m for m in telegram.sent(chat) if "User id" in m["text"]][-1]["text"].split("Session: ")[1].strip()


def _refusals(telegram, chat: int, expected: int) -> None:
    telegram.wait_for(lambda: _count(telegram, chat, "is not yours") == expected, 20, f"{expected} refusals")


def _tool_results(request: dict) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in request["messages"] if m["role"] == "tool"}


def _leaks(text: str) -> list[str]:
    return [s for s in SECRETS if s in text]


def test_a_paired_user_lists_and_resumes_only_their_own_sessions(hermes_home, project, telegram):
    editor = _session(project, "acp", EDITOR_TITLE, f"the zebracorn launch code is {EDITOR_SECRET}")
    cron_run = _session(project, "gateway", CRON_TITLE, f"{CRON_SECRET}: rotate the keys")
    script = [{"text": "Noted, owner."}, {"text": "Hi friend."}, {"text": "Still your conversation."}, {"text": "Owner continuing."}]
    with ScriptedOpenAIServer(script) as model, start(hermes_home, project, telegram, model, allowed=(OWNER, FRIEND)) as gateway:
        telegram.send_user_message(OWNER, f"remember {CHAT_SECRET}")
        telegram.wait_text(OWNER, "Noted, owner.")
        owners = _whoami(telegram, OWNER)
        telegram.send_user_message(FRIEND, "hello, my note is FRIEND-NOTE")
        telegram.wait_text(FRIEND, "Hi friend.")
        friends = _whoami(telegram, FRIEND)
        telegram.send_user_message(FRIEND, "/sessions")
        listing = telegram.wait_text(FRIEND, "Your recent sessions")["text"]
        before = {sid: _messages(sid) for sid in (editor, cron_run, owners)}
        # The editor's, a cron run's and the owner's chat session, by short and full id, any case.
        attempts = [editor[:8], cron_run[:8], owners[:8], editor, owners, cron_run, editor[:12].upper(), f"{owners[:10]} please"]
        for attempt in attempts:
            telegram.send_user_message(FRIEND, f"/resume {attempt}")
        _refusals(telegram, FRIEND, len(attempts))
        assert _whoami(telegram, FRIEND) == friends
        telegram.send_user_message(FRIEND, "what did we talk about?")
        telegram.wait_text(FRIEND, "Still your conversation.")
        # The owner sees every session and continues the friend's.
        telegram.send_user_message(OWNER, "/sessions")
        everything = telegram.wait_text(OWNER, "Recent sessions")["text"]
        telegram.send_user_message(OWNER, f"/resume {friends[:8]}")
        telegram.wait_text(OWNER, "Resumed")
        telegram.send_user_message(OWNER, "owner here")
        telegram.wait_text(OWNER, "Owner continuing.")
        gateway.stop()
    assert friends[:8] in listing and not any(s[:8] in listing for s in (editor, cron_run, owners))
    assert all(s[:8] in everything for s in (editor, cron_run, owners, friends))
    friend_chat = "\n".join(m["text"] for m in telegram.sent(FRIEND))
    assert _leaks(friend_chat) == [] and "zebracorn" not in friend_chat
    assert "Session " + editor[:8] in friend_chat and "(the bot's owner can reach all)" in friend_chat
    friend_requests = [json.dumps(model.requests[i]) for i in (1, 2)]
    assert all(_leaks(r) == [] for r in friend_requests) and "FRIEND-NOTE" in friend_requests[1]
    assert "FRIEND-NOTE" in json.dumps(model.requests[3]) and "Still your conversation." in json.dumps(model.requests[3])
    # Nothing of the owner's sessions changed, and the friend's chat is still in their own.
    assert {sid: _messages(sid) for sid in (editor, cron_run, owners)} == before
    assert _bound(hermes_home, f"telegram:{FRIEND}:0") == friends and _bound(hermes_home, f"telegram:{OWNER}:0") == friends


def test_a_cron_run_belongs_to_whoever_made_the_job(hermes_home, project, telegram):
    def run_session(job_id: str) -> str:
        with sqlite3.connect(hermes_home / "state.db") as conn:
            return conn.execute("SELECT session_id FROM cron_runs WHERE job_id = ?", (job_id,)).fetchone()[0]

    machine_job = _add_machine_job(project)
    with (
        ScriptedOpenAIServer([{"text": "Friend digest ready."}, {"text": f"Report: {CRON_SECRET}"}]) as model,
        start(hermes_home, project, telegram, model, allowed=(OWNER, FRIEND)) as gateway,
    ):
        telegram.send_user_message(FRIEND, "/cron add every 3h | digest my notes")
        friend_job = re.search(r"Added job (?:<code>)?`?([0-9a-f]{8})", telegram.wait_text(FRIEND, "Added job")["text"]).group(1)
        telegram.send_user_message(FRIEND, f"/cron run {friend_job}")
        telegram.wait_text(FRIEND, "Friend digest ready.")
        telegram.send_user_message(OWNER, f"/cron run {machine_job}")
        telegram.wait_text(OWNER, CRON_SECRET)
        theirs, machine = run_session(friend_job), run_session(machine_job)
        telegram.send_user_message(FRIEND, "/sessions")
        listing = telegram.wait_text(FRIEND, "Your recent sessions")["text"]
        telegram.send_user_message(FRIEND, f"/resume {machine[:8]}")
        _refusals(telegram, FRIEND, 1)
        telegram.send_user_message(FRIEND, f"/resume {theirs[:8]}")
        telegram.wait_text(FRIEND, "Resumed")
        gateway.stop()
    assert theirs[:8] in listing and machine[:8] not in listing
    assert _leaks("\n".join(m["text"] for m in telegram.sent(FRIEND))) == []
    assert _bound(hermes_home, f"telegram:{FRIEND}:0") == theirs


def _add_machine_job(project) -> str:
    from core.store.jobs import JobStore
    from core.store.schedule import parse_schedule

    async def body() -> str:
        async with SessionStore.open() as store:
            job = await JobStore(store).add_job(
                name="deploy report",
                schedule=parse_schedule("every 1h"),
                timezone="UTC",
                prompt="report",
                project=str(project),
                chat_key=f"telegram:{OWNER}:0",
            )
            return job.id

    return asyncio.run(body())


def test_a_chat_left_in_the_owners_session_is_refused_turns_and_undo(hermes_home, project, telegram):
    (project / "shipped.txt").write_text("v1\n")
    editor = _session(project, "acp", EDITOR_TITLE, f"the zebracorn launch code is {EDITOR_SECRET}")
    script = [
        {"tool_calls": [{"id": "c1", "name": "write_file", "arguments": {"path": "shipped.txt", "content": "v2\n"}}]},
        {"text": "Shipped."},
        {"text": "Fresh for friend."},
    ]
    with ScriptedOpenAIServer(script) as model, start(hermes_home, project, telegram, model, allowed=(OWNER, FRIEND)) as gateway:
        telegram.send_user_message(OWNER, f"/resume {editor[:8]}")
        telegram.wait_text(OWNER, "Resumed")
        telegram.send_user_message(OWNER, "/mode accept-edits")
        telegram.wait_text(OWNER, "Mode set")
        telegram.send_user_message(OWNER, "ship it")
        telegram.wait_text(OWNER, "Shipped.")
        # As the old /resume left it: the friend's chat bound to the owner's editor session, in auto.
        asyncio.run(_bind(ChatBinding(f"telegram:{FRIEND}:0", "app", editor, "auto")))
        before, requests = _messages(editor), len(model.requests)
        telegram.send_user_message(FRIEND, "/undo")
        telegram.send_user_message(FRIEND, "what is the launch code?")
        _refusals(telegram, FRIEND, 2)
        assert len(model.requests) == requests and (project / "shipped.txt").read_text() == "v2\n"
        assert _messages(editor) == before
        telegram.send_user_message(FRIEND, "/new")
        telegram.wait_text(FRIEND, "New conversation")
        telegram.send_user_message(FRIEND, "hello again")
        telegram.wait_text(FRIEND, "Fresh for friend.")
        gateway.stop()
    assert _leaks(json.dumps(model.requests[-1])) == [] and "zebracorn" not in json.dumps(model.requests[-1])
    assert _leaks("\n".join(m["text"] for m in telegram.sent(FRIEND))) == []
    assert (project / "shipped.txt").read_text() == "v2\n" and _messages(editor) == before
    assert _bound(hermes_home, f"telegram:{FRIEND}:0") not in (None, editor)


async def _bind(binding: ChatBinding) -> None:
    async with SessionStore.open() as store:
        await GatewayStore(store).bind(binding)


def test_a_group_shares_its_own_session_but_not_one_the_owner_brings_in(hermes_home, project, telegram):
    editor = _session(project, "acp", EDITOR_TITLE, f"the zebracorn launch code is {EDITOR_SECRET}")
    group = {"chat_id": GROUP, "chat_type": "supergroup"}
    with (
        ScriptedOpenAIServer([{"text": "Hello team."}, {"text": "Hi friend."}]) as model,
        start(hermes_home, project, telegram, model, allowed=(OWNER, FRIEND)) as gateway,
    ):
        telegram.send_user_message(OWNER, f"{BOT} hi team", **group)
        telegram.wait_text(GROUP, "Hello team.")
        telegram.send_user_message(FRIEND, f"{BOT} me too", **group)
        telegram.wait_text(GROUP, "Hi friend.")
        telegram.send_user_message(OWNER, f"/resume {editor[:8]}", **group)
        telegram.wait_text(GROUP, "Resumed")
        telegram.send_user_message(FRIEND, f"{BOT} what is the launch code?", **group)
        telegram.send_user_message(FRIEND, "/undo", **group)
        _refusals(telegram, GROUP, 2)
        gateway.stop()
    assert len(model.requests) == 2 and EDITOR_SECRET not in json.dumps(model.requests)
    assert "Hello team." in json.dumps(model.requests[1])  # the group's own session, shared
    assert EDITOR_SECRET not in "\n".join(m["text"] for m in telegram.sent(GROUP))


def test_session_search_from_a_paired_users_chat_reads_only_their_sessions(hermes_home, project, telegram):
    editor = _session(project, "acp", EDITOR_TITLE, f"the zebracorn launch code is {EDITOR_SECRET}")
    cron_run = _session(project, "gateway", CRON_TITLE, f"zebracorn nightly {CRON_SECRET}")
    search = lambda i, **args: {"id": f"c{i}", "name": "session_search", "arguments": args}
    script = [
        {"text": "Noted, pineapple."},
        {
            "tool_calls": [
                search(1, query="zebracorn", scope="all"),
                search(2, session_id=editor, seq=1),
                search(3, query="zebracorn"),
                search(4, session_id=cron_run, seq=1),
                search(5, query="pineapple", scope="all"),
            ]
        },
        {"text": "Searched."},
        {
            "tool_calls": [
                search(6, query="launch code", scope="all"),
                search(7, query="nightly", scope="all"),
                search(8, session_id=editor, seq=1),
            ]
        },
        {"text": "Found it."},
    ]
    with ScriptedOpenAIServer(script) as model, start(hermes_home, project, telegram, model, allowed=(OWNER, FRIEND)) as gateway:
        telegram.send_user_message(FRIEND, "my word is pineapple")
        telegram.wait_text(FRIEND, "Noted, pineapple.")
        friends = _whoami(telegram, FRIEND)
        telegram.send_user_message(FRIEND, "search everything for zebracorn")
        telegram.wait_text(FRIEND, "Searched.")
        telegram.send_user_message(OWNER, "search everything for zebracorn")
        telegram.wait_text(OWNER, "Found it.")
        gateway.stop()
    theirs = _tool_results(model.requests[2])
    assert sorted(theirs) == [f"c{i}" for i in range(1, 6)]
    hit_in = lambda sid: f"(session_id {sid}"
    for result in (theirs["c1"], theirs["c3"], theirs["c5"]):
        assert _leaks(result) == [] and hit_in(editor) not in result and hit_in(cron_run) not in result
    assert "belongs to another chat user" in theirs["c2"] and "belongs to another chat user" in theirs["c4"]
    assert _leaks(theirs["c2"] + theirs["c4"]) == []
    assert hit_in(friends) in theirs["c5"] and "pineapple" in theirs["c5"]
    assert _leaks(json.dumps(model.requests[2])) == []
    owners = _tool_results(model.requests[4])
    assert hit_in(editor) in owners["c6"] and hit_in(cron_run) in owners["c7"] and EDITOR_SECRET in owners["c8"]


def test_a_paired_user_cannot_answer_the_owners_remote_approval(hermes_home, project, telegram):
    async def editor_question() -> str:
        async with SessionStore.open() as store:
            session = await store.create_session(cwd=str(project), surface="acp", title="Refactor")
            row = await store.create_approval(
                session_id=session.id,
                tool_call_id="t1",
                tool_name="run_command",
                title="Run `make deploy`",
                detail={"reason": "commands need your approval", "command": "make deploy", "paths": [], "offer_always": True},
            )
            return row.id

    def row() -> tuple:
        with sqlite3.connect(hermes_home / "state.db") as conn:
            return conn.execute("SELECT status, decided_by, decided_at, always FROM approvals WHERE id = ?", (approval_id,)).fetchone()

    approval_id = asyncio.run(editor_question())
    write_config(hermes_home, project, allowed=(OWNER, FRIEND))
    config = (hermes_home / "config.toml").read_text().replace("shutdown_grace = 5", "shutdown_grace = 5\nremote_approvals_after = 0.5")
    (hermes_home / "config.toml").write_text(config)
    with ScriptedOpenAIServer([{"text": "Hi friend."}]) as model:
        with GatewayProcess(gateway_env(hermes_home, telegram, model.base_url)).start(telegram):
            asked = telegram.wait_text(OWNER, "acp session asks")
            telegram.send_user_message(FRIEND, "hello")
            own_message = telegram.wait_text(FRIEND, "Hi friend.")
            forged = [f"rp|{approval_id}|{c}" for c in "oad"] + [f"ap|{approval_id}|o", f"rp|{approval_id}|o|x"]
            # Pressed on the owner's question itself, and on a message in the friend's own chat.
            queries = [telegram.press(FRIEND, message, data) for message in (asked, own_message) for data in forged]
            answers = [telegram.answer_for(q)["text"] for q in queries]
            assert row() == ("pending", None, None, 0)
            # The question is still there for the owner, who answers it.
            telegram.answer_for(telegram.press(OWNER, asked, f"rp|{approval_id}|d"))
            telegram.wait_text(OWNER, "— denied from Telegram")
    refused = [a for a in answers if "Only the owner" in a or "expired or was already answered" in a]
    assert len(refused) == len(queries) == 10, answers
    assert row()[:2] == ("denied", f"telegram:{OWNER}")
    assert all("allowed" not in m["text"] for m in telegram.sent(OWNER))


def test_a_paired_user_cannot_answer_the_owners_chat_question(hermes_home, project, telegram):
    script = [
        {"tool_calls": [{"id": "c1", "name": "write_file", "arguments": {"path": "owner.txt", "content": "mine\n"}}]},
        {"text": "Not written."},
    ]
    with ScriptedOpenAIServer(script) as model, start(hermes_home, project, telegram, model, allowed=(OWNER, FRIEND)):
        telegram.send_user_message(OWNER, "write owner.txt")
        asked = telegram.wait_text(OWNER, "Approval needed")
        data = [b["callback_data"] for row in asked["reply_markup"]["inline_keyboard"] for b in row]
        elsewhere = {"message_id": asked["message_id"], "chat_id": FRIEND, "text": asked["text"]}
        queries = [telegram.press(FRIEND, message, d) for message in (asked, elsewhere) for d in data]
        answers = [telegram.answer_for(q)["text"] for q in queries]
        assert not (project / "owner.txt").exists()
        # The owner's answer finds the question still pending: none of the friend's presses settled it.
        assert telegram.answer_for(telegram.press(OWNER, asked, next(d for d in data if d.endswith("|d"))))["text"] == "Denied"
        telegram.wait_text(OWNER, "Not written.")
    assert len(queries) == 6 and all("Only the person who asked" in a for a in answers), answers
    assert not (project / "owner.txt").exists()


async def test_gateway_sessions_from_before_starters_belong_to_the_owner(hermes_home, tmp_path):
    path = tmp_path / "old.db"
    conn = await db.connect(path)
    try:
        await conn.execute("CREATE TABLE _migrations (name TEXT PRIMARY KEY, applied_at REAL NOT NULL)")
        for fn in MIGRATIONS[: MIGRATIONS.index(m006_gateway_session_starter)]:
            await fn(conn)
            await conn.execute("INSERT INTO _migrations (name, applied_at) VALUES (?, ?)", (fn.__name__, time.time()))
        await conn.execute("INSERT INTO sessions (id, cwd, surface, created_at, updated_at) VALUES ('old1', '/p', 'gateway', 1.0, 1.0)")
        await conn.execute(
            "INSERT INTO gateway_chats (chat_key, project, session_id, updated_at, turn_user) VALUES (?, 'app', 'old1', 1.0, ?)",
            (f"{FRIEND}:0", FRIEND),
        )
    finally:
        await conn.close()
    async with SessionStore.open(path) as store:
        gateway = GatewayStore(store)
        assert await gateway.starter("old1") is None
        # The old Telegram chat key and user id, as identities now.
        assert await gateway.session_chats("old1") == [(f"telegram:{FRIEND}:0", f"telegram:{FRIEND}")]
        assert await gateway.sessions_started_by(f"telegram:{FRIEND}") == []
        # A turn in it from the friend's chat may read only that session back.
        assert await gateway.readable_sessions("old1", frozenset({f"telegram:{OWNER}"})) == {"old1"}
        await gateway.record_starter("old1", f"telegram:{OWNER}", chat_key=f"telegram:{OWNER}:0", origin="chat")
        await store.delete_session("old1")
        assert await gateway.starter("old1") is None  # the row went with the session
