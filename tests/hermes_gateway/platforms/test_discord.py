"""The Discord adapter against a fake Discord (Gateway websocket + REST v10), through the real discord.py."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from core.config import Config
from hermes_gateway.platform import Button, Incoming, Place, PlatformConfigError, PlatformDown, Press
from hermes_gateway.platforms import ADAPTERS, build
from hermes_gateway.platforms.discord import LIMIT, DiscordError, DiscordPlatform, to_discord
from hermes_gateway.render import number_chunks
from tests.fakes.discord_server import FakeDiscord

WAIT = 15.0
ADA = 310000000000000001
BOB = 310000000000000002
CHOICES = [Button("Allow once", "ap|7f3a|o"), Button("Allow always", "ap|7f3a|a"), Button("Deny", "ap|7f3a|d")]
# Intents the bot asks for: guilds, guild messages, DMs, message content; never members or presences.
GUILDS, GUILD_MESSAGES, DIRECT_MESSAGES, MESSAGE_CONTENT = 1 << 0, 1 << 9, 1 << 12, 1 << 15


class Recorder:
    """The conversation layer's side of the contract: what the adapter delivered, in order."""

    def __init__(self, on_press: Callable[[Press], Awaitable[None]] | None = None) -> None:
        self.messages: asyncio.Queue[Incoming] = asyncio.Queue()
        self.presses: asyncio.Queue[Press] = asyncio.Queue()
        self.on_press = on_press

    async def message(self, incoming: Incoming) -> None:
        await self.messages.put(incoming)

    async def press(self, press: Press) -> None:
        if self.on_press is not None:
            await self.on_press(press)
        await self.presses.put(press)

    async def next_message(self) -> Incoming:
        return await asyncio.wait_for(self.messages.get(), WAIT)

    async def next_press(self) -> Press:
        return await asyncio.wait_for(self.presses.get(), WAIT)


async def until(predicate: Callable[[], Any], what: str, timeout: float = WAIT) -> Any:
    """Wait (without blocking the loop the adapter runs on) until ``predicate()`` is truthy."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := predicate():
            return found
        await asyncio.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


def settings(fake: FakeDiscord | None = None, **extra: Any) -> Config:
    section: dict[str, Any] = {"token": fake.token if fake else "not-a-real-token"}
    if fake is not None:
        section |= {"api_base_url": fake.api_base_url, "gateway_url": fake.gateway_url}
    return Config.model_validate({"discord": {**section, **extra}})


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def fake():
    with FakeDiscord() as server:
        yield server


@pytest.fixture
async def connected(fake):
    platform = DiscordPlatform(settings(fake))
    events = Recorder()
    await platform.start(events)
    yield platform, events
    await platform.stop()


# -- connecting ---------------------------------------------------------------------------


async def test_start_logs_in_identifies_and_names_the_bot(fake):
    assert ADAPTERS["discord"] == "hermes_gateway.platforms.discord:DiscordPlatform"
    platform = build("discord", settings(fake))
    assert isinstance(platform, DiscordPlatform)
    await platform.start(Recorder())
    try:
        assert platform.account == "hermes"
        assert fake.connected() == 1
        assert ("GET", "/users/@me") in fake.requests
        [identify] = fake.identifies
        intents = identify["intents"]
        assert identify["token"] == fake.token
        assert intents & GUILDS and intents & GUILD_MESSAGES and intents & DIRECT_MESSAGES and intents & MESSAGE_CONTENT
        assert not intents & (1 << 1) and not intents & (1 << 8)  # members and presences are not asked for
        assert platform.limits.text == 2000 and platform.limits.buttons and platform.limits.edits
    finally:
        await platform.stop()


async def test_the_gateway_address_comes_from_the_api_when_not_configured(fake):
    platform = DiscordPlatform(Config.model_validate({"discord": {"token": fake.token, "api_base_url": fake.api_base_url}}))
    await platform.start(Recorder())
    try:
        assert ("GET", "/gateway/bot") in fake.requests
        assert fake.connected() == 1
    finally:
        await platform.stop()


async def test_a_rejected_token_is_platform_down_without_the_token(fake):
    wrong = "MTIzNDU2Nzg5MDEyMzQ1Njc4.wrong.token-that-discord-does-not-know"
    platform = DiscordPlatform(settings(fake, token=wrong))
    with pytest.raises(PlatformDown) as caught:
        await platform.start(Recorder())
    why = caught.value.why
    assert "rejected the bot token" in why and "DISCORD_BOT_TOKEN" in why
    assert wrong not in why and fake.token not in why
    assert caught.value.retry_after == 300
    assert fake.identifies == []  # it never reached the gateway
    await platform.stop()  # safe after a failed start


async def test_an_unreachable_api_is_platform_down_naming_the_host():
    port = free_port()
    config = Config.model_validate({"discord": {"token": "t0ken", "api_base_url": f"http://127.0.0.1:{port}/api/v10"}})
    platform = DiscordPlatform(config)
    with pytest.raises(PlatformDown) as caught:
        await platform.start(Recorder())
    assert f"cannot reach Discord's API at 127.0.0.1:{port}" in caught.value.why
    assert "t0ken" not in caught.value.why


async def test_an_unreachable_gateway_is_platform_down(fake):
    port = free_port()
    platform = DiscordPlatform(settings(fake, gateway_url=f"ws://127.0.0.1:{port}/gateway"))
    with pytest.raises(PlatformDown) as caught:
        await platform.start(Recorder())
    assert f"cannot connect to Discord's gateway at ws://127.0.0.1:{port}/gateway" in caught.value.why
    assert fake.token not in caught.value.why


async def test_message_content_intent_not_enabled_says_where_to_turn_it_on(fake):
    fake.message_content_allowed = False
    platform = DiscordPlatform(settings(fake))
    with pytest.raises(PlatformDown) as caught:
        await platform.start(Recorder())
    assert "MESSAGE CONTENT INTENT" in caught.value.why and "Developer Portal" in caught.value.why
    assert fake.connected() == 0


def test_a_section_without_a_token_is_a_config_error():
    with pytest.raises(PlatformConfigError, match=r"\[discord\] token"):
        DiscordPlatform(Config.model_validate({"discord": {}}))


async def test_a_dropped_connection_is_resumed_and_messages_keep_coming(fake, connected):
    platform, events = connected
    fake.drop_connections()
    await until(lambda: fake.resumes == 1 and fake.connected() == 1, "the session to be resumed")
    fake.dm(ADA, "still there?")
    assert (await events.next_message()).text == "still there?"


async def test_stop_closes_the_connection_and_is_idempotent(fake):
    platform = DiscordPlatform(settings(fake))
    await platform.stop()  # never started
    await platform.start(Recorder())
    await until(lambda: fake.connected() == 1, "the connection")
    await platform.stop()
    await until(lambda: fake.connected() == 0, "the connection to close")
    await platform.stop()
    with pytest.raises(DiscordError, match="not connected"):
        await platform.send(Place("discord", str(fake.channel_id)), "hello")


# -- receiving ------------------------------------------------------------------------------


async def test_a_dm_is_a_direct_addressed_place_of_its_own(fake, connected):
    _, events = connected
    fake.dm(ADA, "/help", name="Ada")
    incoming = await events.next_message()
    assert incoming.place == Place("discord", f"@{ADA}", None, direct=True)
    assert incoming.place.key == f"discord:@{ADA}:0"
    assert incoming.sender.id == f"discord:{ADA}" and incoming.sender.name == "Ada" and not incoming.sender.is_bot
    assert incoming.text == "/help" and incoming.addressed and incoming.attachments == []


async def test_channel_chatter_is_unaddressed_and_a_mention_is_stripped(fake, connected):
    _, events = connected
    fake.user(BOB, "Bob")
    fake.say(ADA, "talking among ourselves")
    chatter = await events.next_message()
    assert chatter.place == Place("discord", str(fake.channel_id)) and not chatter.place.direct
    assert chatter.addressed is False and chatter.sender.id == f"discord:{ADA}"
    fake.say(ADA, f"please ask <@{BOB}> about   it", mention=True)
    mentioned = await events.next_message()
    assert mentioned.addressed is True
    assert mentioned.text == "please ask @Bob about it"  # the bot's mention gone, Bob's readable
    assert str(fake.bot_id) not in mentioned.text


async def test_a_reply_to_the_bot_is_addressed_a_reply_to_someone_else_is_not(fake, connected):
    platform, events = connected
    sent = await platform.send(Place("discord", str(fake.channel_id)), "I said this")
    someone = fake.say(BOB, "I said that")
    await events.next_message()
    fake.say(ADA, "about what you said", reply_to=int(sent))
    to_bot = await events.next_message()
    assert to_bot.addressed is True and to_bot.text == "about what you said"
    fake.say(ADA, "and you, Bob?", reply_to=int(someone["id"]))
    assert (await events.next_message()).addressed is False


async def test_a_thread_is_its_own_conversation_under_its_channel(fake, connected):
    _, events = connected
    fake.say(ADA, "in the thread that existed", channel_id=fake.thread_id, mention=True)
    first = await events.next_message()
    assert first.place == Place("discord", str(fake.channel_id), str(fake.thread_id))
    announced = fake.new_thread("bugs", ADA)
    fake.say(ADA, "a new thread", channel_id=announced, mention=True)
    assert (await events.next_message()).place.thread == str(announced)
    # A thread the bot was never told about is looked up once through the API.
    unseen = fake.new_thread("made while away", ADA, announce=False)
    fake.say(ADA, "hello?", channel_id=unseen, mention=True)
    found = await events.next_message()
    assert found.place == Place("discord", str(fake.channel_id), str(unseen))
    assert ("GET", f"/channels/{unseen}") in fake.requests
    assert len({first.place.key, found.place.key, f"discord:{fake.channel_id}:0"}) == 3


async def test_the_bots_own_messages_are_never_delivered(fake, connected):
    _, events = connected
    fake.say(fake.bot_id, "an echo of myself", mention=True)
    fake.dm(ADA, "after the echo")
    assert (await events.next_message()).text == "after the echo"
    assert events.messages.empty()


async def test_an_attachment_downloads_its_bytes_when_fetched(fake, connected):
    _, events = connected
    dm = fake.dm_channel(ADA)
    data = b"name,score\nada,10\n"
    fake.dm(ADA, "here is the file", attachments=[fake.attachment(dm, "scores.csv", data, "text/csv; charset=utf-8")])
    incoming = await events.next_message()
    [attachment] = incoming.attachments
    assert (attachment.name, attachment.mime, attachment.size, attachment.voice) == ("scores.csv", "text/csv", len(data), False)
    assert await attachment.fetch() == data


async def test_a_voice_message_is_marked_voice(fake, connected):
    _, events = connected
    dm = fake.dm_channel(ADA)
    audio = b"OggS\x00\x02fake-opus-voice-note"
    fake.dm(ADA, "", attachments=[fake.attachment(dm, "voice-message.ogg", audio, "audio/ogg", voice=True)], voice=True)
    [note] = (await events.next_message()).attachments
    assert note.voice is True and note.mime == "audio/ogg"
    assert await note.fetch() == audio


# -- sending --------------------------------------------------------------------------------


async def test_send_and_edit_with_buttons_in_discords_shapes(fake, connected):
    platform, _ = connected
    place = Place("discord", str(fake.channel_id))
    message_id = await platform.send(place, "🔐 Run `ls`? @everyone", buttons=CHOICES)
    [sent] = fake.sent(fake.channel_id)
    assert sent["id"] == message_id and sent["content"] == "🔐 Run `ls`? @everyone"
    assert sent["allowed_mentions"] == {"parse": []}  # nobody is pinged by what the model writes
    assert sent["components"] == [
        {
            "type": 1,
            "components": [
                {"type": 2, "style": 1, "label": "Allow once", "custom_id": "ap|7f3a|o"},
                {"type": 2, "style": 1, "label": "Allow always", "custom_id": "ap|7f3a|a"},
                {"type": 2, "style": 1, "label": "Deny", "custom_id": "ap|7f3a|d"},
            ],
        }
    ]
    await platform.edit(place, message_id, "🔐 Run `ls`? — Allowed once")
    [edited] = fake.sent(fake.channel_id)
    assert edited["content"] == "🔐 Run `ls`? — Allowed once" and edited["components"] == [] and edited["edits"] == 1


async def test_many_buttons_go_in_rows_of_five(fake, connected):
    platform, _ = connected
    buttons = [Button(f"Option {i}", f"opt|{i}") for i in range(7)]
    await platform.send(Place("discord", str(fake.channel_id)), "pick one", buttons=buttons)
    rows = fake.sent(fake.channel_id)[0]["components"]
    assert [len(row["components"]) for row in rows] == [5, 2]
    assert [b["custom_id"] for row in rows for b in row["components"]] == [b.data for b in buttons]


async def test_a_direct_place_opens_the_dm_on_first_use(fake, connected):
    platform, _ = connected
    place = platform.direct_place(str(BOB))
    assert place == Place("discord", f"@{BOB}", None, direct=True)
    assert platform.place_for(f"@{BOB}") == place  # a stored key comes back the same
    await platform.send(place, "an approval for the owner")
    await platform.send(place, "and another")
    assert [m["content"] for m in fake.sent_to(BOB)] == ["an approval for the owner", "and another"]
    assert fake.requests.count(("POST", "/users/@me/channels")) == 1


async def test_sending_to_a_thread_posts_in_the_thread(fake, connected):
    platform, _ = connected
    await platform.send(platform.place_for(str(fake.channel_id), str(fake.thread_id)), "in the thread")
    assert [m["content"] for m in fake.sent(fake.thread_id)] == ["in the thread"]
    assert fake.sent(fake.channel_id) == []


async def test_streaming_edits_keep_the_edit_interval(fake):
    platform = DiscordPlatform(settings(fake, edit_interval=0.4))
    await platform.start(Recorder())
    try:
        place = Place("discord", str(fake.channel_id))
        message_id = await platform.draft(place, None, "Thinking")
        started = time.monotonic()
        for text in ("Thinking about", "Thinking about it", "Thinking about it: done"):
            assert await platform.draft(place, message_id, text) == message_id
        elapsed = time.monotonic() - started
        [sent] = fake.sent(fake.channel_id)
        assert sent["history"] == ["Thinking", "Thinking about", "Thinking about it", "Thinking about it: done"]
        assert elapsed >= 0.8  # three edits of one message, at least two intervals between them
    finally:
        await platform.stop()


async def test_markdown_is_rendered_for_discord(fake, connected):
    platform, _ = connected
    markdown = "#### Steps\n__bold__ and `__kept__`\n\n| a | b |\n|---|---|\n| 1 | 2 |\n\n```python\nprint('streaming')"
    await platform.send(Place("discord", str(fake.channel_id)), markdown)
    content = fake.sent(fake.channel_id)[0]["content"]
    assert (
        content == "**Steps**\n**bold** and `__kept__`\n\n```\n| a | b |\n|---|---|\n| 1 | 2 |\n```\n\n```python\nprint('streaming')\n```"
    )


def test_to_discord_leaves_what_discord_shows_alone():
    text = "# Title\n**bold** *it* ~~gone~~ [link](https://example.org)\n> quote\n- item\n```\n__not bold in code__\n```"
    assert to_discord(text) == text
    assert to_discord("~~~js\nx\n~~~") == "```js\nx\n```"
    assert to_discord("see ![diagram](https://x.org/d.png) and ![](https://x.org/e.png)") == (
        "see [diagram](https://x.org/d.png) and https://x.org/e.png"
    )
    assert to_discord("above\n---\nbelow") == "above\n───\nbelow"


async def test_a_text_too_long_is_cut_to_the_limit_rather_than_refused(fake, connected):
    platform, _ = connected
    await platform.send(Place("discord", str(fake.channel_id)), "x" * 2500)
    content = fake.sent(fake.channel_id)[0]["content"]
    assert len(content) == LIMIT and content.endswith("…")


async def test_split_chunks_each_fit_one_message_with_their_label(fake, connected):
    platform, _ = connected
    paragraph = "A __bold__ claim with `code` and words. " * 9
    long = "\n\n".join(f"{i}. {paragraph}" for i in range(30)) + "\n\n```python\n" + "print('x')\n" * 250 + "```"
    chunks = number_chunks(platform.split(long))
    assert len(chunks) >= 8
    place = Place("discord", str(fake.channel_id))
    for chunk in chunks:
        await platform.send(place, chunk)
    sent = [m["content"] for m in fake.sent(fake.channel_id)]
    total = len(chunks)
    assert all(len(text) <= LIMIT for text in sent)
    assert all(text.startswith(f"({i}/{total})") for i, text in enumerate(sent, 1))
    joined = "\n".join(sent)
    assert all(f"{i}. A **bold** claim" in joined for i in range(30))  # nothing dropped
    assert joined.count("print('x')") == 250
    assert all(text.count("```") % 2 == 0 for text in sent)  # each code block closed in its own message


async def test_send_file_uploads_multipart_with_a_caption(fake, connected):
    platform, _ = connected
    place = platform.direct_place(str(ADA))
    data = bytes(range(256)) * 40
    message_id = await platform.send_file(place, "export.bin", data, "application/octet-stream", caption="__Your__ export")
    [sent] = fake.sent_to(ADA)
    assert sent["id"] == message_id and sent["content"] == "**Your** export"
    [upload] = sent["files"]
    assert upload["filename"] == "export.bin" and upload["data"] == data
    assert sent["attachments"][0]["filename"] == "export.bin" and sent["attachments"][0]["size"] == len(data)


async def test_typing_is_shown_in_the_place(fake, connected):
    platform, _ = connected
    await platform.typing(Place("discord", str(fake.channel_id), str(fake.thread_id)))
    await platform.typing(platform.direct_place(str(ADA)))
    assert fake.typing == [fake.thread_id, fake.dm_channel(ADA)]


async def test_a_429_is_waited_out_and_the_message_still_arrives(fake, connected):
    platform, _ = connected
    fake.rate_limit(f"POST /channels/{fake.channel_id}/messages", 0.3)
    await platform.send(Place("discord", str(fake.channel_id)), "after the limit")
    assert [m["content"] for m in fake.sent(fake.channel_id)] == ["after the limit"]
    assert fake.requests.count(("POST", f"/channels/{fake.channel_id}/messages")) == 2


async def test_a_long_429_fails_at_once_saying_how_long(fake, connected):
    platform, _ = connected
    fake.rate_limit(f"POST /channels/{fake.channel_id}/messages", 120.0)
    with pytest.raises(DiscordError, match=r"rate-limits channel \d+ for 120s"):
        await asyncio.wait_for(platform.send(Place("discord", str(fake.channel_id)), "too soon"), 20)
    assert fake.sent(fake.channel_id) == []


async def test_an_unknown_channel_is_named_in_the_error(fake, connected):
    platform, _ = connected
    with pytest.raises(DiscordError, match=r"does not know channel 424242 \(404"):
        await platform.send(Place("discord", "424242"), "anyone?")


# -- button presses -------------------------------------------------------------------------


async def test_a_press_in_a_channel_becomes_a_press_and_its_alert_is_ephemeral(fake, connected):
    platform, events = connected
    message_id = await platform.send(Place("discord", str(fake.channel_id)), "Run it?", buttons=CHOICES)
    [sent] = fake.sent(fake.channel_id)
    interaction = fake.press(BOB, sent, "ap|7f3a|o", name="Bob")
    press = await events.next_press()
    assert press.data == "ap|7f3a|o" and press.message_id == message_id
    assert press.sender.id == f"discord:{BOB}" and press.sender.name == "Bob"
    assert press.place == Place("discord", str(fake.channel_id))
    await press.answer("Only the person who asked for this can answer it.", True)
    response = fake.response_for(interaction)
    assert response["type"] == 4 and response["data"]["flags"] == 64  # an ephemeral message: only Bob sees it
    assert response["data"]["content"] == "Only the person who asked for this can answer it."


async def test_a_quiet_answer_acknowledges_the_press_without_a_message(fake, connected):
    platform, events = connected
    await platform.send(platform.direct_place(str(ADA)), "Run it?", buttons=CHOICES)
    [sent] = fake.sent_to(ADA)
    interaction = fake.press(ADA, sent, "ap|7f3a|d")
    press = await events.next_press()
    assert press.place == Place("discord", f"@{ADA}", None, direct=True) and press.sender.id == f"discord:{ADA}"
    await press.answer("Denied", False)
    assert fake.response_for(interaction)["type"] == 6  # a deferred update: the press is acknowledged


async def test_a_press_in_a_thread_has_the_threads_place(fake, connected):
    platform, events = connected
    await platform.send(Place("discord", str(fake.channel_id), str(fake.thread_id)), "Run it?", buttons=CHOICES)
    [sent] = fake.sent(fake.thread_id)
    fake.press(ADA, sent, "ap|7f3a|a")
    assert (await events.next_press()).place == Place("discord", str(fake.channel_id), str(fake.thread_id))


async def test_a_press_left_unanswered_is_acknowledged_in_time_and_a_late_alert_follows(fake):
    release = asyncio.Event()

    async def slow(press: Press) -> None:
        await release.wait()

    events = Recorder(on_press=slow)
    platform = DiscordPlatform(settings(fake))
    await platform.start(events)
    try:
        await platform.send(Place("discord", str(fake.channel_id)), "Run it?", buttons=CHOICES)
        interaction = fake.press(BOB, fake.sent(fake.channel_id)[0], "ap|7f3a|o")
        response = await until(lambda: next((r for r in fake.interaction_responses if r["interaction_id"] == interaction), None), "an ack")
        assert response["type"] == 6  # acknowledged before Discord's 3 s deadline
        release.set()
        press = await events.next_press()
        await press.answer("You are not authorised to use this bot.", True)
        [followup] = fake.followups
        assert followup["content"] == "You are not authorised to use this bot." and followup["flags"] == 64
    finally:
        await platform.stop()


async def test_after_stop_receiving_only_presses_arrive_and_sending_still_works(fake, connected):
    platform, events = connected
    place = platform.direct_place(str(ADA))
    await platform.send(place, "Run it?", buttons=CHOICES)
    await platform.stop_receiving()
    fake.dm(ADA, "a new prompt during shutdown")
    fake.press(ADA, fake.sent_to(ADA)[0], "ap|7f3a|o")
    press = await events.next_press()  # an approval can still let the turn in flight finish
    assert press.data == "ap|7f3a|o"
    assert events.messages.empty()
    await platform.send(place, "the turn's last words")
    assert fake.sent_to(ADA)[-1]["content"] == "the turn's last words"
