"""The Slack adapter against the fake Slack: the real slack-bolt / slack-sdk over Socket Mode and the Web API."""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import pytest

from core.config import Config
from hermes_gateway.platform import Button, Incoming, Place, PlatformConfigError, PlatformDown, Press
from hermes_gateway.platforms import build, configured
from hermes_gateway.platforms.slack import SlackError, SlackPlatform, from_slack_text, to_mrkdwn
from hermes_gateway.render import number_chunks
from tests.fakes.slack_server import FakeSlack, sign

ADA = "U0000ADA"
BOB = "U0000BOB"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def slack_config(fake: FakeSlack, **overrides: object) -> Config:
    section: dict[str, object] = {
        "bot_token": fake.bot_token,
        "app_token": fake.app_token,
        "api_base_url": fake.base_url,
    }
    section.update(overrides)
    return Config.model_validate({"slack": section})


class Collected:
    """The Events the conversation layer would get."""

    def __init__(self) -> None:
        self.messages: list[Incoming] = []
        self.presses: list[Press] = []

    async def message(self, incoming: Incoming) -> None:
        self.messages.append(incoming)

    async def press(self, press: Press) -> None:
        self.presses.append(press)

    async def next_message(self, fake: FakeSlack, text: str) -> Incoming:
        return await fake.until(lambda: next((m for m in self.messages if m.text == text), None), what=f"the message {text!r}")


@pytest.fixture
def fake():
    with FakeSlack() as server:
        server.add_user(ADA, "ada")
        server.add_user(BOB, "bob")
        yield server


@pytest.fixture
async def slack(fake):
    platform = SlackPlatform(slack_config(fake))
    events = Collected()
    await platform.start(events)
    try:
        yield platform, events
    finally:
        await platform.stop()


# -- connecting --------------------------------------------------------------------------------------


async def test_start_connects_over_socket_mode_and_a_dm_arrives_as_a_direct_addressed_message(fake, slack):
    platform, events = slack
    assert platform.account == "@hermes"
    assert fake.connections_opened == 1

    sent = fake.dm(ADA, "hello there")
    incoming = await events.next_message(fake, "hello there")

    assert incoming.place == Place("slack", ADA, None, direct=True)
    assert incoming.place.key == f"slack:{ADA}:0"
    assert incoming.sender.id == f"slack:{ADA}"
    assert incoming.sender.name == "ada"
    assert incoming.addressed is True
    assert incoming.message_id == sent["ts"]
    # Every envelope is acknowledged, or Slack would send it again.
    await fake.until(lambda: len(fake.acks) >= 1, what="the ack")


async def test_a_rejected_bot_token_is_platform_down_naming_the_key_not_the_token(fake):
    platform = SlackPlatform(slack_config(fake, bot_token="xoxb-9999-wrong-secret-value"))
    with pytest.raises(PlatformDown) as caught:
        await platform.start(Collected())
    assert "bot_token" in caught.value.why and "invalid_auth" in caught.value.why
    assert "wrong-secret-value" not in caught.value.why
    assert caught.value.retry_after == 300.0
    await platform.stop()


async def test_a_rejected_app_token_is_platform_down_naming_the_app_token(fake):
    platform = SlackPlatform(slack_config(fake, app_token="xapp-1-A0APP-wrong-secret-value"))
    with pytest.raises(PlatformDown) as caught:
        await platform.start(Collected())
    assert "app_token" in caught.value.why and "invalid_auth" in caught.value.why
    assert "wrong-secret-value" not in caught.value.why
    await platform.stop()


async def test_an_unreachable_slack_is_platform_down_saying_where():
    port = free_port()
    config = Config.model_validate(
        {"slack": {"bot_token": "xoxb-1-secret-value", "app_token": "xapp-1-secret-value", "api_base_url": f"http://127.0.0.1:{port}/api/"}}
    )
    platform = SlackPlatform(config)
    with pytest.raises(PlatformDown) as caught:
        await platform.start(Collected())
    assert f"127.0.0.1:{port}" in caught.value.why and "api_base_url" in caught.value.why
    assert "secret-value" not in caught.value.why


def test_a_section_that_cannot_work_is_a_config_error_naming_the_key(fake):
    no_app_token = Config.model_validate({"slack": {"bot_token": fake.bot_token}})
    assert configured(no_app_token) == ["slack"]
    with pytest.raises(PlatformConfigError, match="app_token"):
        build("slack", no_app_token)
    events_without_secret = Config.model_validate({"slack": {"bot_token": fake.bot_token, "mode": "events"}})
    with pytest.raises(PlatformConfigError, match="signing_secret"):
        build("slack", events_without_secret)
    swapped = Config.model_validate({"slack": {"bot_token": fake.app_token, "app_token": fake.bot_token}})
    with pytest.raises(PlatformConfigError, match="app-level token"):
        build("slack", swapped)
    assert isinstance(build("slack", slack_config(fake)), SlackPlatform)


async def test_the_connection_is_opened_again_when_slack_asks(fake, slack):
    platform, events = slack
    fake.refresh()
    await fake.until(lambda: fake.connections_opened == 2, what="a second apps.connections.open")
    fake.dm(ADA, "still there?")
    await events.next_message(fake, "still there?")


async def test_stop_is_clean_and_can_be_called_again(fake):
    platform = SlackPlatform(slack_config(fake))
    await platform.stop()  # never started
    await platform.start(Collected())
    await fake.until(lambda: fake._sockets, what="the websocket")
    await platform.stop()
    await platform.stop()
    await fake.until(lambda: not fake._sockets, what="the websocket to close")


# -- receiving ------------------------------------------------------------------------------------------


async def test_channel_chatter_is_not_addressed_a_mention_is_delivered_once_stripped_and_threaded(fake, slack):
    platform, events = slack
    chatter = fake.channel_message(BOB, "lunch anyone?")
    incoming = await events.next_message(fake, "lunch anyone?")
    assert incoming.addressed is False
    assert incoming.place == Place("slack", "C0GENERAL", chatter["ts"])

    mention = fake.mention(ADA, "what's up with the build?")
    incoming = await events.next_message(fake, "what's up with the build?")
    assert incoming.addressed is True
    assert incoming.place.key == f"slack:C0GENERAL:{mention['ts']}"  # the reply goes in a thread under it
    assert incoming.place.direct is False

    # Slack sent the mention as a message and as an app_mention: one Incoming only.
    fake.dm(ADA, "sentinel")
    await events.next_message(fake, "sentinel")
    assert [m.text for m in events.messages].count("what's up with the build?") == 1


async def test_a_thread_the_bot_is_in_is_addressed_without_a_mention(fake, slack):
    platform, events = slack
    mention = fake.mention(ADA, "start")
    first = await events.next_message(fake, "start")
    await platform.send(first.place, "on it")

    fake.channel_message(ADA, "and then?", thread_ts=mention["ts"])
    follow = await events.next_message(fake, "and then?")
    assert follow.addressed is True
    assert follow.place.key == first.place.key

    other = fake.channel_message(BOB, "top")
    fake.channel_message(BOB, "reply elsewhere", thread_ts=other["ts"])
    elsewhere = await events.next_message(fake, "reply elsewhere")
    assert elsewhere.addressed is False

    # A thread under the bot's own message (its first message is the bot's) counts too.
    fake.channel_message(BOB, "about your post", thread_ts="1700000000.000001", parent_user=fake.bot_user)
    assert (await events.next_message(fake, "about your post")).addressed is True


async def test_the_bots_own_messages_and_edits_are_not_delivered(fake, slack):
    platform, events = slack
    dm = fake.dm_channel(ADA)
    fake.bot_echo(dm, "my own words")
    fake.edited(ADA, dm, "1700000000.000001", "edited text")
    fake.dm(ADA, "sentinel")
    await events.next_message(fake, "sentinel")
    assert [m.text for m in events.messages] == ["sentinel"]


async def test_a_slash_command_in_the_dm_is_a_command_and_in_a_channel_says_how(fake, slack):
    platform, events = slack
    fake.slash(ADA, "/hermes", "new")
    incoming = await events.next_message(fake, "/new")
    assert incoming.place == Place("slack", ADA, None, direct=True)
    assert incoming.addressed is True

    envelope = fake.slash(ADA, "/hermes", "whoami", channel="C0GENERAL")
    ack = await fake.until(lambda: fake.acks.get(envelope), what="the slash command's ack")
    assert "@hermes /whoami" in ack["payload"]["text"]
    assert not any(m.text == "/whoami" for m in events.messages)


async def test_an_attachment_is_downloaded_with_the_bot_token_and_an_audio_clip_is_a_voice_note(fake, slack):
    platform, events = slack
    report = fake.add_file("report.txt", b"line one\nline two\n", "text/plain", user=ADA)
    clip = fake.add_file("audio_message.webm", b"\x1aE\xdf\xa3 not really webm", "audio/webm", user=ADA, audio_clip=True)
    fake.dm(ADA, "", files=[report, clip])
    incoming = await fake.until(lambda: next((m for m in events.messages if m.attachments), None), what="the files")

    text_file, audio = incoming.attachments
    assert (text_file.name, text_file.mime, text_file.size, text_file.voice) == ("report.txt", "text/plain", 18, False)
    assert await text_file.fetch() == b"line one\nline two\n"
    assert audio.voice is True
    assert await audio.fetch() == b"\x1aE\xdf\xa3 not really webm"


async def test_a_file_on_another_host_is_not_fetched_with_the_token(fake, slack):
    platform, events = slack
    stray = dict(fake.add_file("x.txt", b"x", "text/plain"))
    stray["url_private_download"] = "https://files.example.org/x.txt"
    fake.dm(ADA, "look", files=[stray])
    incoming = await events.next_message(fake, "look")
    with pytest.raises(SlackError, match="not on Slack's servers"):
        await incoming.attachments[0].fetch()


# -- sending ---------------------------------------------------------------------------------------------


async def test_send_renders_mrkdwn_to_the_dm_and_into_a_thread(fake, slack):
    platform, events = slack
    dm_place = platform.direct_place(ADA)
    assert dm_place is not None
    ts = await platform.send(dm_place, "**Done**: see [the PR](https://example.org/pr?a=1&b=2) and `x < y`")
    message = fake.sent(fake.dm_channel(ADA))[0]
    assert message["ts"] == ts
    assert message["text"] == "*Done*: see <https://example.org/pr?a=1&amp;b=2|the PR> and `x &lt; y`"
    assert message["thread_ts"] is None
    assert len(fake.calls_to("conversations.open")) == 1
    await platform.send(dm_place, "again")
    assert len(fake.calls_to("conversations.open")) == 1  # the DM channel is remembered

    thread_place = platform.place_for("C0GENERAL", "1700000000.000100")
    await platform.send(thread_place, "in the thread")
    threaded = fake.text_in("C0GENERAL", "in the thread")
    assert threaded is not None and threaded["thread_ts"] == "1700000000.000100"


async def test_buttons_are_block_kit_buttons_and_an_edit_without_buttons_removes_them(fake, slack):
    platform, events = slack
    place = platform.direct_place(BOB)
    assert place is not None
    buttons = [Button("Allow once", "ap|7|o"), Button("Allow always", "ap|7|a"), Button("Deny", "ap|7|d")]
    ts = await platform.send(place, "Run `make deploy`?", buttons=buttons)
    message = fake.sent(fake.dm_channel(BOB))[0]
    assert fake.buttons(message) == [("Allow once", "ap|7|o"), ("Allow always", "ap|7|a"), ("Deny", "ap|7|d")]
    assert message["blocks"][0] == {"type": "section", "text": {"type": "mrkdwn", "text": "Run `make deploy`?"}}

    await platform.edit(place, ts, "Run `make deploy`? Allowed once.", buttons=None)
    await platform.edit(place, ts, "Run `make deploy`? Allowed once. Done.", buttons=None)
    message = fake.sent(fake.dm_channel(BOB))[0]
    assert message["edits"] == 2
    assert message["text"] == "Run `make deploy`? Allowed once. Done."
    assert fake.buttons(message) == [] and message["blocks"] == []


async def test_a_draft_too_long_once_rendered_keeps_its_newest_words(fake, slack):
    platform, events = slack
    place = platform.place_for("C0GENERAL", "1700000000.000400")
    tail = "& the newest words"
    ts = await platform.draft(place, None, "Tom & Jerry " * 340 + tail)  # 4,100 characters as mrkdwn
    first = fake.sent("C0GENERAL")[0]
    assert first["ts"] == ts and len(first["text"]) <= platform.limits.text
    assert first["text"].endswith("&amp; the newest words")
    assert await platform.draft(place, ts, "short now") == ts
    assert fake.sent("C0GENERAL")[0]["text"] == "short now"


async def test_a_press_becomes_a_press_whose_answer_only_the_presser_sees(fake, slack):
    platform, events = slack
    mention = fake.mention(ADA, "deploy")
    incoming = await events.next_message(fake, "deploy")
    await platform.send(incoming.place, "Run it?", buttons=[Button("Allow once", "ap|9|o"), Button("Deny", "ap|9|d")])
    question = fake.text_in("C0GENERAL", "Run it?")
    assert question is not None and question["thread_ts"] == mention["ts"]

    envelope = fake.press(BOB, question, "ap|9|o")
    press = await fake.until(lambda: events.presses[0] if events.presses else None, what="the press")
    assert press.data == "ap|9|o"
    assert press.sender.id == f"slack:{BOB}"
    assert press.place.key == incoming.place.key  # the same conversation as the question
    assert press.message_id == question["ts"]
    await fake.until(lambda: envelope in fake.acks, what="the press's ack")

    await press.answer("Only the person who asked for this can answer it.", True)
    ephemeral = fake.ephemeral[-1]
    assert ephemeral["user"] == BOB and ephemeral["channel"] == "C0GENERAL" and ephemeral["thread_ts"] == mention["ts"]
    assert "Only the person who asked for this can answer it." in ephemeral["text"]


async def test_a_press_in_the_dm_has_the_dm_place(fake, slack):
    platform, events = slack
    fake.dm(ADA, "hi")
    incoming = await events.next_message(fake, "hi")
    await platform.send(incoming.place, "Sure?", buttons=[Button("Yes", "y")])
    fake.press(ADA, fake.sent(fake.dm_channel(ADA))[0], "y")
    press = await fake.until(lambda: events.presses[0] if events.presses else None, what="the press")
    assert press.place == incoming.place


async def test_send_file_uploads_through_files_upload_v2(fake, slack):
    platform, events = slack
    place = platform.place_for("C0GENERAL", "1700000000.000200")
    file_id = await platform.send_file(place, "reply.ogg", b"OggS fake audio", "audio/ogg", caption="**spoken** reply")
    upload = fake.uploads[0]
    assert upload["file_id"] == file_id
    assert (upload["filename"], upload["data"], upload["channel"]) == ("reply.ogg", b"OggS fake audio", "C0GENERAL")
    assert upload["thread_ts"] == "1700000000.000200"
    assert upload["initial_comment"] == "*spoken* reply"


async def test_a_long_reply_splits_into_chunks_that_fit_once_rendered(fake, slack):
    platform, events = slack
    paragraph = "Tom & Jerry <3 [docs](https://example.org/a?b=1&c=2) " * 30
    markdown = "\n\n".join([paragraph] * 8)
    chunks = number_chunks(platform.split(markdown))
    assert len(chunks) > 2
    assert all(len(to_mrkdwn(chunk)) <= platform.limits.text for chunk in chunks)
    place = platform.place_for("C0GENERAL", "1700000000.000300")
    for chunk in chunks:
        await platform.send(place, chunk)  # the fake refuses texts over 4000
    assert [m["text"].split("\n", 1)[0] for m in fake.sent("C0GENERAL")] == [f"({i}/{len(chunks)})" for i in range(1, len(chunks) + 1)]


async def test_when_slack_refuses_the_markup_the_message_goes_as_plain_text(fake, slack):
    platform, events = slack
    fake.reject_mrkdwn_blocks = True
    place = platform.place_for("C0GENERAL", None)
    await platform.send(place, "**Allow** this?", buttons=[Button("Yes", "y")])
    message = fake.sent("C0GENERAL")[0]
    assert message["mrkdwn"] is False
    assert message["blocks"][0]["text"] == {"type": "plain_text", "text": "**Allow** this?"}
    assert fake.buttons(message) == [("Yes", "y")]


async def test_a_rate_limited_call_is_retried_once_after_retry_after(fake, slack):
    platform, events = slack
    fake.fail_methods["chat.postMessage"] = [1, "ratelimited", 1]
    await platform.send(platform.place_for("C0GENERAL"), "after the wait")
    assert len(fake.calls_to("chat.postMessage")) == 2
    assert fake.text_in("C0GENERAL", "after the wait") is not None

    fake.fail_methods["chat.postMessage"] = [2, "ratelimited", 1]
    with pytest.raises(SlackError, match="ratelimited"):
        await platform.send(platform.place_for("C0GENERAL"), "gives up after one retry")


async def test_a_refused_send_names_the_problem_and_the_fix(fake, slack):
    platform, events = slack
    with pytest.raises(SlackError) as caught:
        await platform.send(platform.place_for("C0NOWHERE"), "hello?")
    assert "chat.postMessage" in str(caught.value) and "channel_not_found" in str(caught.value)
    assert "/invite @hermes" in str(caught.value)
    assert fake.bot_token not in str(caught.value)


# -- the Events API ----------------------------------------------------------------------------------


async def test_events_api_mode_takes_signed_requests_and_refuses_the_rest(fake):
    port = free_port()
    config = slack_config(fake, mode="events", app_token=None, signing_secret=fake.signing_secret, events_port=port)
    platform = SlackPlatform(config)
    events = Collected()
    await platform.start(events)
    try:
        url = f"http://127.0.0.1:{port}/slack/events"
        dm = fake.dm_channel(ADA)

        def event(text: str) -> dict[str, Any]:
            ts = fake.new_ts()
            return {"type": "message", "text": text, "user": ADA, "ts": ts, "channel": dm, "event_ts": ts, "channel_type": "im"}

        assert await asyncio.to_thread(fake.post_event, url, event("forged"), secret="not-the-secret") == 401
        stale = time.time() - 600  # signed correctly, but ten minutes old: a replay
        assert await asyncio.to_thread(fake.post_event, url, event("replayed"), timestamp=stale) == 401
        assert await asyncio.to_thread(fake.post_event, url, event("genuine")) == 200
        incoming = await events.next_message(fake, "genuine")
        assert incoming.place == Place("slack", ADA, None, direct=True)
        assert [m.text for m in events.messages] == ["genuine"]
        assert fake.connections_opened == 0  # no websocket in this mode
    finally:
        await platform.stop()


def test_the_signature_is_slacks_v0_scheme():
    # The example from Slack's documentation on verifying requests.
    body = (
        b"token=xyzz0WbapA4vBCDEFasx0q6G&team_id=T1DC2JH3J&team_domain=testteamnow&channel_id=G8PSS9T3V&"
        b"channel_name=foobar&user_id=U2CERLKJA&user_name=roadrunner&command=%2Fwebhook-collect&text=&"
        b"response_url=https%3A%2F%2Fhooks.slack.com%2Fcommands%2FT1DC2JH3J%2F397700885554%2F96rGlfmibIGlgcZRskXaIFfN&"
        b"trigger_id=398738663015.47445629121.803a0bc887a14d10d2c447fce8b6703c"
    )
    expected = "v0=a2114d57b48eac39b9ad189dd8316235a7b4a8d21a10bd27519666489c69b503"
    assert sign("8f742231b10e8888abcd99yyyzzz85a5", "1531420618", body) == expected


# -- text ----------------------------------------------------------------------------------------------


def test_markdown_renders_to_mrkdwn():
    markdown = "# Title\n- **bold** and *it* and ~~gone~~\n> quoted\n```python\nif a < b && c:\n```"
    assert to_mrkdwn(markdown) == "*Title*\n• *bold* and _it_ and ~gone~\n> quoted\n```\nif a &lt; b &amp;&amp; c:\n```"


def test_slack_text_becomes_plain_text_without_the_bots_mention():
    import re

    mention = re.compile(r"[ \t]*<@U0BOT(?:\|[^>]*)?>[ \t]*")
    text = "<@U0BOT> ask <@U0000BOB|bob> in <#C0GENERAL|general> about <https://example.org/a?b=1&amp;c=2|the doc> &lt;3 <!here>"
    assert from_slack_text(text, mention) == "ask @bob in #general about the doc (https://example.org/a?b=1&c=2) <3 @here"
    assert from_slack_text("<@U0BOT> /new", mention) == "/new"
    assert from_slack_text("see <http://example.com|example.com>") == "see http://example.com"
