"""The Signal adapter against a fake signal-cli daemon: JSON-RPC over HTTP and its SSE event stream."""

from __future__ import annotations

import asyncio
import socket
import threading
from typing import Any

import pytest

from core.config import Config, SignalConfig
from hermes_gateway.platform import Button, Incoming, PlatformConfigError, PlatformDown, Press
from hermes_gateway.platforms import ADAPTERS, build
from hermes_gateway.platforms.signal import SignalError, SignalPlatform, to_signal_text
from tests.fakes.signal_server import MENTION, FakeSignalCli

WAIT = 10.0
CHOICES = [Button("Allow once", "ap|7f3a|o"), Button("Allow always", "ap|7f3a|a"), Button("Deny", "ap|7f3a|d")]


class Recorder:
    """The conversation layer's side of the contract: what the adapter delivered, in order."""

    def __init__(self) -> None:
        self.messages: asyncio.Queue[Incoming] = asyncio.Queue()
        self.presses: asyncio.Queue[Press] = asyncio.Queue()

    async def message(self, incoming: Incoming) -> None:
        await self.messages.put(incoming)

    async def press(self, press: Press) -> None:
        await self.presses.put(press)

    async def next_message(self) -> Incoming:
        return await asyncio.wait_for(self.messages.get(), WAIT)

    async def next_press(self) -> Press:
        return await asyncio.wait_for(self.presses.get(), WAIT)


def settings(fake: FakeSignalCli | None = None, **extra: Any) -> Config:
    values: dict[str, Any] = {"account": fake.account if fake else "+15550100001"}
    if fake is not None:
        values["api_base_url"] = fake.base_url
    return Config(signal=SignalConfig(**{**values, **extra}))


@pytest.fixture
def fake():
    with FakeSignalCli() as server:
        yield server


@pytest.fixture
async def connected(fake):
    platform = SignalPlatform(settings(fake))
    events = Recorder()
    await platform.start(events)
    yield platform, events
    await platform.stop()


# -- connecting ---------------------------------------------------------------------------


async def test_start_connects_to_the_daemon_and_names_the_account(fake):
    assert ADAPTERS["signal"] == "hermes_gateway.platforms.signal:SignalPlatform"
    platform = build("signal", settings(fake))
    assert isinstance(platform, SignalPlatform)
    await platform.start(Recorder())
    try:
        assert platform.account == fake.account
        assert fake.event_connections == 1
        methods = [method for method, _ in fake.calls]
        assert methods == ["listAccounts"]  # a daemon started with -a answers -32601: one account, fine
        assert platform.limits.buttons is False and platform.limits.numbered_replies and platform.limits.edits is False
    finally:
        await platform.stop()


async def test_a_daemon_for_several_accounts_must_have_this_one():
    with FakeSignalCli(accounts=["+15550100009"]) as fake:
        platform = SignalPlatform(settings(fake))
        with pytest.raises(PlatformDown) as refused:
            await platform.start(Recorder())
        assert "has no account +15550100001" in refused.value.why and "register" in refused.value.why
        assert refused.value.retry_after and refused.value.retry_after >= 60
        assert fake.event_connections == 0
    with FakeSignalCli(account="+15550100009", accounts=["+15550100009", "+15550100010"]) as fake:
        platform = SignalPlatform(settings(fake))
        await platform.start(Recorder())
        try:
            assert platform.account == "+15550100009" and fake.event_connections == 1
        finally:
            await platform.stop()


async def test_an_unreachable_daemon_is_platform_down_with_what_to_do():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    platform = SignalPlatform(settings(None, api_base_url=f"http://127.0.0.1:{port}"))
    with pytest.raises(PlatformDown) as down:
        await platform.start(Recorder())
    assert f"127.0.0.1:{port} is not answering" in down.value.why
    assert "signal-cli -a +15550100001 daemon --http" in down.value.why
    await platform.stop()  # safe after a failed start, and twice
    await platform.stop()


def test_a_section_without_a_phone_number_is_refused():
    with pytest.raises(PlatformConfigError, match=r"\[signal\] account must be the bot's phone number"):
        SignalPlatform(Config(signal=SignalConfig(account="hermes-bot")))


async def test_stop_closes_the_event_stream_and_is_idempotent():
    with FakeSignalCli(keepalive=0.1) as fake:  # the daemon notices a closed stream when a keep-alive fails
        platform = SignalPlatform(settings(fake))
        await platform.stop()  # never started
        await platform.start(Recorder())
        assert fake.open_streams() == 1
        await platform.stop()
        await platform.stop()
        await asyncio.to_thread(fake.wait_for, lambda: fake.open_streams() == 0, WAIT, "the event stream to close")


async def test_stop_receiving_closes_the_event_stream_but_sending_still_works():
    with FakeSignalCli(keepalive=0.1) as fake:
        platform = SignalPlatform(settings(fake))
        await platform.start(Recorder())
        try:
            await platform.stop_receiving()
            await asyncio.to_thread(fake.wait_for, lambda: fake.open_streams() == 0, WAIT, "the event stream to close")
            ada = fake.user("Ada")
            await platform.send(platform.place_for(ada.uuid), "the reply in flight")
            assert [m["text"] for m in fake.sent(ada.uuid)] == ["the reply in flight"]
        finally:
            await platform.stop()


async def test_a_dropped_event_stream_is_opened_again(connected, fake):
    platform, events = connected
    ada = fake.user("Ada")
    fake.drop_streams()
    await asyncio.to_thread(fake.wait_for, lambda: fake.event_connections == 2, WAIT, "a second event connection")
    fake.message(ada, "still there?")
    assert (await events.next_message()).text == "still there?"


# -- receiving ----------------------------------------------------------------------------


async def test_a_direct_message_is_an_addressed_incoming_from_the_uuid(connected, fake):
    platform, events = connected
    ada = fake.user("Ada")
    sent_at = fake.message(ada, "hello there")
    incoming = await events.next_message()
    assert incoming.text == "hello there" and incoming.addressed
    assert incoming.place.direct and incoming.place.chat == ada.uuid and incoming.place.thread is None
    assert incoming.place.key == f"signal:{ada.uuid}:0"
    assert incoming.sender.id == f"signal:{ada.uuid}" and incoming.sender.name == "Ada" and not incoming.sender.is_bot
    assert incoming.message_id == str(sent_at)
    assert platform.place_for(ada.uuid) == incoming.place


async def test_a_sender_known_only_by_number_is_identified_by_it(connected, fake):
    platform, events = connected
    envelope = {
        "source": "+15550209999",
        "sourceNumber": "+15550209999",
        "sourceUuid": None,
        "sourceName": "Old client",
        "sourceDevice": 1,
        "timestamp": 1,
        "dataMessage": {"timestamp": 1, "message": "hi", "expiresInSeconds": 0, "viewOnce": False},
    }
    fake.push({"envelope": envelope, "account": fake.account})
    incoming = await events.next_message()
    assert incoming.sender.id == "signal:+15550209999" and incoming.place.chat == "+15550209999"


async def test_group_chatter_without_a_mention_is_not_addressed(connected, fake):
    _, events = connected
    ada, group = fake.user("Ada"), fake.new_group_id()
    fake.message(ada, "lunch anyone?", group=group)
    incoming = await events.next_message()
    assert not incoming.addressed and incoming.text == "lunch anyone?"
    assert incoming.place.chat == f"group.{group}" and not incoming.place.direct
    assert incoming.sender.id == f"signal:{ada.uuid}"


async def test_a_mention_addresses_the_bot_and_is_removed_from_the_text(connected, fake):
    _, events = connected
    ada, bob, group = fake.user("Ada"), fake.user("Bob"), fake.new_group_id()
    fake.message(ada, "ask 😀 about", group=group, mention_bot=True, mention=[bob])
    incoming = await events.next_message()
    assert incoming.addressed
    assert MENTION not in incoming.text
    assert incoming.text == f"ask 😀 about @{bob.number}"  # UTF-16 positions after an emoji still land right


async def test_a_reply_to_the_bot_and_a_command_address_it_in_a_group(connected, fake):
    platform, events = connected
    ada, group = fake.user("Ada"), fake.new_group_id()
    place = platform.place_for(f"group.{group}")
    await platform.send(place, "I can help with that.")
    fake.message(ada, "go on then", group=group, quote=fake.sent()[-1])
    fake.message(ada, "/new", group=group)
    replied, command = await events.next_message(), await events.next_message()
    assert replied.addressed and replied.text == "go on then"
    assert command.addressed and command.text == "/new"


async def test_the_bots_own_messages_and_receipts_are_not_delivered(connected, fake):
    _, events = connected
    ada = fake.user("Ada")
    own = {"source": fake.account, "sourceNumber": fake.account, "sourceUuid": fake.bot_uuid, "timestamp": 5}
    fake.push({"envelope": {**own, "dataMessage": {"timestamp": 5, "message": "echo"}}, "account": fake.account})
    fake.push({"envelope": {"sourceUuid": ada.uuid, "timestamp": 6, "receiptMessage": {"isRead": True}}, "account": fake.account})
    fake.push({"envelope": {"sourceUuid": ada.uuid, "timestamp": 7, "typingMessage": {"action": "STARTED"}}, "account": fake.account})
    fake.message(ada, "the real one")
    assert (await events.next_message()).text == "the real one"
    assert events.messages.empty()


async def test_messages_of_one_chat_arrive_in_order(connected, fake):
    _, events = connected
    ada = fake.user("Ada")
    for n in range(8):
        fake.message(ada, f"message {n}")
    assert [(await events.next_message()).text for _ in range(8)] == [f"message {n}" for n in range(8)]


async def test_an_attachment_is_downloaded_when_fetched(connected, fake):
    _, events = connected
    ada, group = fake.user("Ada"), fake.new_group_id()
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    fake.message(ada, "look", attachments=[fake.add_attachment(png, "image/png", "shot.png")])
    fake.message(ada, "", group=group, mention_bot=True, attachments=[fake.add_attachment(b"a,b\n1,2\n", "text/csv", "data.csv")])
    direct, grouped = await events.next_message(), await events.next_message()
    [image] = direct.attachments
    assert (image.name, image.mime, image.size, image.voice) == ("shot.png", "image/png", len(png), False)
    assert await image.fetch() == png
    [table] = grouped.attachments
    assert table.name == "data.csv" and await table.fetch() == b"a,b\n1,2\n"
    fetched = [params for method, params in fake.calls if method == "getAttachment"]
    assert fetched[0]["recipient"] == ada.uuid and fetched[1]["groupId"] == group


async def test_a_voice_note_is_marked_voice_and_a_named_audio_file_is_not(connected, fake):
    _, events = connected
    ada = fake.user("Ada")
    fake.message(ada, "", attachments=[fake.add_attachment(b"\x00\x01aac", "audio/aac")])
    fake.message(ada, "a song", attachments=[fake.add_attachment(b"ID3", "audio/mpeg", "song.mp3")])
    [note], [song] = (await events.next_message()).attachments, (await events.next_message()).attachments
    assert note.voice and note.mime == "audio/aac" and note.name.startswith("voice-") and await note.fetch() == b"\x00\x01aac"
    assert not song.voice and song.name == "song.mp3"


# -- sending ------------------------------------------------------------------------------


async def test_markdown_is_sent_as_text_with_signal_styles(connected, fake):
    platform, _ = connected
    ada = fake.user("Ada")
    message_id = await platform.send(platform.place_for(ada.uuid), "**Done**: ran `ls` 😀 *twice*\n```\nfile.txt\n```")
    [sent] = fake.sent(ada.uuid)
    assert message_id == str(sent["timestamp"])
    assert sent["text"] == "Done: ran ls 😀 twice\nfile.txt"
    # Positions in UTF-16 units: the emoji counts two.
    assert sent["styles"] == ["0:4:BOLD", "10:2:MONOSPACE", "16:5:ITALIC", "22:8:MONOSPACE"]
    params = next(p for m, p in fake.calls if m == "send")
    assert params["recipient"] == [ada.uuid] and "groupId" not in params


async def test_styles_the_daemon_refuses_fall_back_to_plain_text(connected, fake):
    platform, _ = connected
    fake.reject_styles = True
    group = fake.new_group_id()
    await platform.send(platform.place_for(f"group.{group}"), "Some **markdown** here.")
    [sent] = fake.sent(f"group.{group}")
    assert sent["text"] == "Some **markdown** here." and sent["styles"] == []


async def test_a_rate_limit_is_waited_out_once_then_reported(connected, fake):
    platform, _ = connected
    ada = fake.user("Ada")
    place = platform.place_for(ada.uuid)
    fake.rate_limited, fake.retry_after = 1, 0
    await platform.send(place, "after the wait")
    assert [m["text"] for m in fake.sent(ada.uuid)] == ["after the wait"]
    assert [m for m, _ in fake.calls].count("send") == 2
    fake.rate_limited = 2
    with pytest.raises(SignalError, match="rate limiting"):
        await platform.send(place, "twice limited")
    assert [m["text"] for m in fake.sent(ada.uuid)] == ["after the wait"]


async def test_a_changed_safety_number_is_reported_with_how_to_trust_it(connected, fake):
    platform, _ = connected
    ada = fake.user("Ada")
    fake.untrusted.add(ada.uuid)
    with pytest.raises(SignalError) as failed:
        await platform.send(platform.place_for(ada.uuid), "hello")
    assert failed.value.code == -4 and "untrusted identities" in str(failed.value)
    assert f"signal-cli -a {fake.account} trust -a RECIPIENT" in str(failed.value) and '"trustAllKnownKeys": true' in str(failed.value)
    assert fake.sent() == []


async def test_questions_show_no_buttons_and_a_reaction_by_position_is_a_press(connected, fake):
    platform, events = connected
    ada = fake.user("Ada")
    place = platform.place_for(ada.uuid)
    question = await platform.send(place, "Run `make`? Reply 1, 2 or 3.", buttons=CHOICES)
    [sent] = fake.sent(ada.uuid)
    assert "Allow once" not in sent["text"]  # the text lists the replies; nothing is added
    for emoji, data in (("👎", "ap|7f3a|d"), ("2\ufe0f\u20e3", "ap|7f3a|a"), ("👍🏽", "ap|7f3a|o")):
        fake.react(ada, question, emoji)
        press = await events.next_press()
        assert press.data == data and press.message_id == question
        assert press.sender.id == f"signal:{ada.uuid}" and press.place == place
    await press.answer("Allowed once.", False)
    assert fake.sent(ada.uuid)[-1]["text"] == "Allowed once."


async def test_a_strangers_reaction_in_a_group_is_answered_privately(connected, fake):
    platform, events = connected
    ada, mallory, group = fake.user("Ada"), fake.user("Mallory", hide_number=True), fake.new_group_id()
    place = platform.place_for(f"group.{group}")
    question = await platform.send(place, "Allow? 1, 2 or 3", buttons=CHOICES)
    fake.react(mallory, question, "👍", group=group)
    press = await events.next_press()
    assert press.sender.id == f"signal:{mallory.uuid}" and press.place == place
    await press.answer("You are not authorised to use this bot.", True)
    assert fake.sent(mallory.uuid)[-1]["text"] == "⚠️ You are not authorised to use this bot."
    assert len(fake.sent(place.chat)) == 1  # nothing said in the group
    assert ada.uuid not in [m["to"] for m in fake.sent()]


async def test_a_reaction_that_overtakes_its_questions_send_still_answers_it(connected, fake):
    platform, events = connected
    ada = fake.user("Ada")
    fake.hold_answers = threading.Event()  # the daemon has sent the question but not yet said so
    sending = asyncio.create_task(platform.send(platform.place_for(ada.uuid), "Allow?", buttons=CHOICES))
    [question] = await asyncio.to_thread(fake.wait_for, lambda: fake.sent(ada.uuid), WAIT, "the question")
    fake.react(ada, question["timestamp"], "👎")
    await asyncio.to_thread(fake.wait_for, lambda: fake.event_deliveries >= 1, WAIT, "the reaction to reach the adapter")
    fake.hold_answers.set()
    assert await sending == str(question["timestamp"])
    assert (await events.next_press()).data == "ap|7f3a|d"


async def test_reactions_that_answer_nothing_are_not_presses(connected, fake):
    platform, events = connected
    ada = fake.user("Ada")
    place = platform.place_for(ada.uuid)
    plain = await platform.send(place, "just text")
    question = await platform.send(place, "Allow?", buttons=CHOICES)
    fake.react(ada, plain, "👍")  # no choices on that message
    fake.react(ada, question, "😂")  # stands for no choice
    fake.react(ada, question, "👍", remove=True)  # taking a reaction back
    fake.react(ada, question, "3\ufe0f\u20e3", group=fake.new_group_id())  # not where the question was asked
    fake.react(ada, question, "3\ufe0f\u20e3")
    assert (await events.next_press()).data == "ap|7f3a|d"
    assert events.presses.empty() and events.messages.empty()


async def test_edit_replaces_the_text_and_without_buttons_forgets_the_question(connected, fake):
    platform, events = connected
    ada = fake.user("Ada")
    place = platform.place_for(ada.uuid)
    question = await platform.send(place, "Allow?", buttons=CHOICES)
    await platform.edit(place, question, "Allowed **once**.", buttons=None)
    [sent] = fake.sent(ada.uuid)
    assert sent["text"] == "Allowed once." and sent["edits"] == 1 and sent["styles"] == ["8:4:BOLD"]
    fake.react(ada, question, "👍")
    fake.message(ada, "after")
    assert (await events.next_message()).text == "after" and events.presses.empty()


async def test_a_file_goes_as_a_named_attachment_and_audio_as_a_voice_note(connected, fake):
    platform, _ = connected
    ada, group = fake.user("Ada"), fake.new_group_id()
    await platform.send_file(platform.place_for(ada.uuid), "notes; é.txt", b"line one\n", "text/plain", caption="Your **notes**")
    await platform.send_file(platform.place_for(f"group.{group}"), "reply.ogg", b"OggS\x00", "audio/ogg")
    [document] = fake.sent(ada.uuid)
    assert document["attachments"] == [{"name": "notes; é.txt", "mime": "text/plain", "data": b"line one\n"}]
    assert document["text"] == "Your notes" and document["styles"] == ["5:5:BOLD"] and not document["voice_note"]
    [voice] = fake.sent(f"group.{group}")
    assert voice["attachments"][0]["mime"] == "audio/ogg" and voice["voice_note"] and voice["text"] == ""


async def test_typing_reaches_the_daemon(connected, fake):
    platform, _ = connected
    ada, group = fake.user("Ada"), fake.new_group_id()
    await platform.typing(platform.place_for(ada.uuid))
    await platform.typing(platform.place_for(f"group.{group}"))
    assert fake.typing == [{"to": ada.uuid, "stop": False}, {"to": f"group.{group}", "stop": False}]


def test_split_keeps_every_chunk_within_signals_length():
    platform = SignalPlatform(settings())
    paragraph = "A sentence with **bold** words and `code` in it. " * 9
    reply = "\n\n".join(f"{i}. {paragraph}" for i in range(30))
    chunks = platform.split(reply)
    assert len(chunks) >= 6 and all(len(c) <= platform.limits.text == 2000 for c in chunks)
    assert all(len(to_signal_text(c)[0]) <= 2000 for c in chunks)
    assert "".join(chunks).count("A sentence") == 270


def test_markdown_rendering_keeps_links_bullets_and_headings_readable():
    text, styles = to_signal_text("# Plan\n- read [the docs](https://example.org/a)\n- ~~skip~~ ||later||")
    assert text == "Plan\n• read the docs (https://example.org/a)\n• skip later"
    assert styles == ["0:4:BOLD", "47:4:STRIKETHROUGH", "52:5:SPOILER"]


async def test_an_envelope_of_an_unexpected_shape_does_not_stop_the_stream(connected, fake):
    _, events = connected
    ada = fake.user("Ada")
    broken = {"sourceUuid": ada.uuid, "timestamp": 3, "dataMessage": {"message": "x", "mentions": [{"start": "first"}]}}
    fake.push({"envelope": broken, "account": fake.account})
    fake.push({"not": "an envelope"})
    fake.message(ada, "next")
    assert (await events.next_message()).text == "next"
