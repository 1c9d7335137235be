"""The Matrix adapter against a fake homeserver, through the real matrix-nio client."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from core.config import Config, MatrixConfig
from core.redaction import scrub
from hermes_gateway.platform import Button, Incoming, Place, PlatformConfigError, PlatformDown, Press
from hermes_gateway.platforms import ADAPTERS, build
from hermes_gateway.platforms.matrix import ENCRYPTION_NOTICE, LIMIT, MatrixError, MatrixPlatform, matrix_html
from tests.fakes.matrix_server import MAX_EVENT_BYTES, FakeMatrix

WAIT = 10.0
ADA = "@ada:hermes.test"
BOB = "@bob:hermes.test"
CHOICES = [Button("Allow once", "ap|7f3a|o"), Button("Allow always", "ap|7f3a|a"), Button("Deny", "ap|7f3a|d")]
KEYCAPS = ["1\ufe0f\u20e3", "2\ufe0f\u20e3", "3\ufe0f\u20e3"]


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


def settings(fake: FakeMatrix, **extra: Any) -> Config:
    values: dict[str, Any] = {
        "homeserver": "https://matrix.hermes.test",
        "api_base_url": fake.base_url,
        "user_id": fake.bot,
        "access_token": fake.token,
    }
    return Config(matrix=MatrixConfig(**{**values, **extra}))


async def wait(fake: FakeMatrix, predicate: Any, what: str) -> Any:
    """The fake's wait, off the event loop (the adapter runs on it)."""
    return await asyncio.to_thread(fake.wait_for, predicate, WAIT, what)


@pytest.fixture
def fake():
    with FakeMatrix() as server:
        server.max_wait = 1.0
        server.user(ADA, "Ada")
        server.user(BOB, "Bob")
        yield server


@pytest.fixture
async def connected(fake):
    platform = MatrixPlatform(settings(fake, allowed_users=[ADA]))
    events = Recorder()
    await platform.start(events)
    yield platform, events
    await platform.stop()


# -- connecting ---------------------------------------------------------------------------


async def test_start_with_an_access_token_checks_it_and_names_the_account(fake):
    assert ADAPTERS["matrix"] == "hermes_gateway.platforms.matrix:MatrixPlatform"
    platform = build("matrix", settings(fake))
    assert isinstance(platform, MatrixPlatform)
    await platform.start(Recorder())
    try:
        assert platform.account == fake.bot
        paths = [path for _, path in fake.calls]
        assert "/_matrix/client/v3/account/whoami" in paths and fake.logins == []
        assert any(path == "/_matrix/client/v3/sync" for path in paths)
        limits = platform.limits
        assert (limits.text, limits.edits, limits.buttons, limits.numbered_replies) == (LIMIT, True, False, True)
    finally:
        await platform.stop()


async def test_a_password_login_reuses_its_device_and_its_token_is_a_secret(fake):
    config = settings(fake, access_token=None, password=fake.password)
    first = MatrixPlatform(config)
    await first.start(Recorder())
    assert first._client is not None
    token = first._client.access_token
    await first.stop()
    again = MatrixPlatform(config)
    await again.start(Recorder())
    await again.stop()
    assert [login["identifier"]["user"] for login in fake.logins] == [fake.bot, fake.bot]
    assert "device_id" not in fake.logins[0]
    device = fake.tokens[token][1]
    assert fake.logins[1]["device_id"] == device  # one device on the account, not one per start
    assert token not in scrub(f"Authorization: Bearer {token}")


async def test_a_rejected_access_token_is_reported_without_the_token(fake):
    platform = MatrixPlatform(settings(fake, access_token="syt_not_the_right_token_0123456789"))
    with pytest.raises(PlatformDown) as caught:
        await platform.start(Recorder())
    why = caught.value.why
    assert "rejected the access token" in why and "M_UNKNOWN_TOKEN" in why and "MATRIX_ACCESS_TOKEN" in why
    assert "syt_not_the_right_token" not in why and caught.value.retry_after == 300
    await platform.stop()


async def test_a_wrong_password_is_reported_without_the_password(fake):
    platform = MatrixPlatform(settings(fake, access_token=None, password="hunter2-wrong-password"))
    with pytest.raises(PlatformDown) as caught:
        await platform.start(Recorder())
    assert "rejected the password" in caught.value.why and "M_FORBIDDEN" in caught.value.why
    assert "hunter2" not in caught.value.why
    await platform.stop()


async def test_an_unreachable_homeserver_is_platform_down():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = Config(
        matrix=MatrixConfig(homeserver=f"http://127.0.0.1:{port}", user_id="@hermes:hermes.test", access_token="syt_secret_value_1234")
    )
    platform = MatrixPlatform(config)
    with pytest.raises(PlatformDown) as caught:
        await platform.start(Recorder())
    assert f"cannot reach the Matrix homeserver at http://127.0.0.1:{port}" in caught.value.why
    assert "syt_secret" not in caught.value.why
    await platform.stop()


def test_a_section_that_cannot_work_names_the_key():
    with pytest.raises(PlatformConfigError, match="user_id must be the bot's full Matrix id"):
        MatrixPlatform(Config(matrix=MatrixConfig(homeserver="https://m.org", user_id="hermes", access_token="x")))
    with pytest.raises(PlatformConfigError, match="access_token .*MATRIX_ACCESS_TOKEN.*password"):
        MatrixPlatform(Config(matrix=MatrixConfig(homeserver="https://m.org", user_id="@h:m.org")))
    with pytest.raises(PlatformConfigError, match="homeserver is not set"):
        MatrixPlatform(Config(matrix=MatrixConfig(user_id="@h:m.org", access_token="x")))


async def test_stop_receiving_ends_new_messages_but_sending_still_works(fake, connected):
    platform, events = connected
    room = fake.dm(ADA)
    fake.say(room, ADA, "before")
    assert (await events.next_message()).text == "before"
    await platform.stop_receiving()
    syncs = sum(1 for _, path in fake.calls if path.endswith("/sync"))
    fake.say(room, ADA, "after")
    await platform.send(Place("matrix", room, None, True), "finishing the turn in flight")
    assert fake.texts(room) == ["finishing the turn in flight"]
    assert sum(1 for _, path in fake.calls if path.endswith("/sync")) == syncs and events.messages.empty()


async def test_stop_is_idempotent_and_safe_before_start(fake):
    platform = MatrixPlatform(settings(fake))
    await platform.stop()
    await platform.start(Recorder())
    await platform.stop()
    await platform.stop()
    assert platform._client is None


# -- receiving ------------------------------------------------------------------------------


async def test_history_from_before_the_start_is_not_answered(fake):
    room = fake.dm(ADA)
    fake.say(room, ADA, "said while the gateway was down")
    platform = MatrixPlatform(settings(fake))
    events = Recorder()
    await platform.start(events)
    try:
        fake.say(room, ADA, "and now")
        assert (await events.next_message()).text == "and now"
        assert events.messages.empty()
    finally:
        await platform.stop()


async def test_a_direct_message_is_addressed_with_the_senders_identity(fake, connected):
    platform, events = connected
    room = fake.dm(ADA)
    event_id = fake.say(room, ADA, "hello there")
    incoming = await events.next_message()
    assert incoming.place == Place("matrix", room, None, direct=True)
    assert incoming.sender.id == f"matrix:{ADA}" and incoming.sender.name == "Ada" and not incoming.sender.is_bot
    assert (incoming.text, incoming.addressed, incoming.message_id) == ("hello there", True, event_id)
    fake.say(room, ADA, "/new")
    assert (await events.next_message()).text == "/new"  # commands arrive as raw text


async def test_a_stranger_is_delivered_too_and_the_bots_own_messages_never(fake, connected):
    platform, events = connected
    stranger = fake.user("@eve:hermes.test", "Eve")
    room = fake.dm(stranger)
    await platform.send(Place("matrix", room, None, True), "my own words")
    fake.send_event(room, "@otherbot:hermes.test", "m.room.message", {"msgtype": "m.notice", "body": "a bot's notice"})
    fake.say(room, stranger, "let me in")
    incoming = await events.next_message()
    assert (incoming.sender.id, incoming.text) == ("matrix:@eve:hermes.test", "let me in")
    assert events.messages.empty()


async def test_group_chatter_is_not_addressed_a_mention_is_and_is_stripped(fake, connected):
    platform, events = connected
    room = fake.create_room(ADA, [ADA, BOB], name="team")
    fake.say(room, BOB, "lunch anyone?")
    chatter = await events.next_message()
    assert (chatter.addressed, chatter.place.direct, chatter.text) == (False, False, "lunch anyone?")
    fake.say(room, ADA, "what is in README.md?", mention_bot=True)
    mention = await events.next_message()
    assert (mention.addressed, mention.text) == (True, "what is in README.md?")
    fake.say(room, ADA, f"ping {fake.bot} please")  # a plain-text id, as older clients send it
    typed = await events.next_message()
    assert typed.addressed and typed.text == "ping  please"
    fake.say(room, BOB, "hermes, /help")  # the display name at the start
    named = await events.next_message()
    assert named.addressed and named.text == "/help"


async def test_a_reply_to_the_bot_is_addressed_and_loses_its_quote(fake, connected):
    platform, events = connected
    room = fake.create_room(ADA, [ADA, BOB])
    mine = await platform.send(Place("matrix", room), "which file?")
    fake.say(room, ADA, f"> <{fake.bot}> which file?\n\nthe config one", reply_to=mine)
    reply = await events.next_message()
    assert reply.addressed and reply.text == "the config one"
    other = fake.say(room, BOB, "some message")
    await events.next_message()
    fake.say(room, ADA, "agreed", reply_to=other)
    assert (await events.next_message()).addressed is False


async def test_a_reply_to_a_message_the_bot_sent_before_a_restart_is_looked_up(fake):
    room = fake.create_room(ADA, [ADA, BOB])
    earlier = fake.send_event(room, fake.bot, "m.room.message", {"msgtype": "m.text", "body": "from yesterday"})
    platform = MatrixPlatform(settings(fake))
    events = Recorder()
    await platform.start(events)
    try:
        fake.say(room, ADA, "about that", reply_to=earlier)
        assert (await events.next_message()).addressed
        assert ("GET", f"/_matrix/client/v3/rooms/{room}/event/{earlier}") in fake.calls
    finally:
        await platform.stop()


async def test_a_thread_is_its_own_conversation_and_replies_go_into_it(fake, connected):
    platform, events = connected
    room = fake.create_room(ADA, [ADA, BOB])
    root = fake.say(room, BOB, "deploy went wrong")
    assert (await events.next_message()).place.thread is None
    look = fake.say(room, ADA, "look at this", mention_bot=True, thread=root)
    asked = await events.next_message()
    assert asked.place == Place("matrix", room, root, direct=False) and asked.addressed
    assert asked.place.key == f"matrix:{room}:{root}"
    answer = await platform.send(asked.place, "on it")
    sent = fake.sent(room)[-1]
    assert sent["event_id"] == answer and sent["thread"] == root
    relation = sent["original"]["m.relates_to"]
    assert relation["rel_type"] == "m.thread" and relation["is_falling_back"] is True
    assert relation["m.in_reply_to"] == {"event_id": look}  # the fallback for clients without threads: the latest message
    fake.say(room, ADA, "and the logs?", thread=root)  # no mention: the bot takes part in this thread
    follow = await events.next_message()
    assert follow.addressed and follow.place.thread == root


async def test_a_users_edit_is_not_a_second_message(fake, connected):
    platform, events = connected
    room = fake.dm(ADA)
    first = fake.say(room, ADA, "helo")
    await events.next_message()
    fake.edit_message(room, ADA, first, "hello")
    fake.say(room, ADA, "next")
    assert (await events.next_message()).text == "next"


async def test_locations_and_verification_requests_are_not_for_the_agent(fake, connected):
    platform, events = connected
    room = fake.dm(ADA)
    fake.say(room, ADA, "Location: geo:51.5,0.1", msgtype="m.location", geo_uri="geo:51.5,0.1")
    fake.say(room, ADA, "Ada is requesting to verify your key", msgtype="m.key.verification.request", methods=["m.sas.v1"])
    fake.say(room, ADA, "/me waves", msgtype="m.emote")
    assert (await events.next_message()).text == "/me waves"
    assert events.messages.empty()


async def test_a_password_session_that_ended_logs_in_again_on_the_same_device(fake):
    platform = MatrixPlatform(settings(fake, access_token=None, password=fake.password))
    events = Recorder()
    await platform.start(events)
    try:
        room = fake.dm(ADA)
        assert platform._client is not None
        token = platform._client.access_token
        device = fake.tokens.pop(token)[1]  # signed out from another client
        await wait(fake, lambda: len(fake.logins) == 2, "a second login")
        assert fake.logins[1]["device_id"] == device
        fake.say(room, ADA, "still there?")
        assert (await events.next_message()).text == "still there?"
    finally:
        await platform.stop()


async def test_an_attachment_is_fetched_through_the_media_api(fake, connected):
    platform, events = connected
    room = fake.dm(ADA)
    fake.send_file(room, ADA, "notes.txt", b"line one\nline two\n", "text/plain", caption="read this")
    incoming = await events.next_message()
    assert incoming.text == "read this" and len(incoming.attachments) == 1
    attachment = incoming.attachments[0]
    assert (attachment.name, attachment.mime, attachment.size, attachment.voice) == ("notes.txt", "text/plain", 18, False)
    assert await attachment.fetch() == b"line one\nline two\n"
    assert any(path.startswith("/_matrix/client/v1/media/download/hermes.test/") for _, path in fake.calls)
    fake.send_file(room, ADA, "photo.png", b"\x89PNG fake", "image/png", msgtype="m.image")
    image = (await events.next_message()).attachments[0]
    assert (image.name, image.mime, await image.fetch()) == ("photo.png", "image/png", b"\x89PNG fake")


async def test_a_voice_message_is_marked_voice_and_other_audio_is_not(fake, connected):
    platform, events = connected
    room = fake.dm(ADA)
    fake.send_file(room, ADA, "Voice message.ogg", b"OggS voice", "audio/ogg", msgtype="m.audio", voice=True)
    voice = (await events.next_message()).attachments[0]
    assert voice.voice and voice.mime == "audio/ogg" and await voice.fetch() == b"OggS voice"
    fake.send_file(room, ADA, "song.mp3", b"ID3 music", "audio/mpeg", msgtype="m.audio")
    assert (await events.next_message()).attachments[0].voice is False


# -- invites ---------------------------------------------------------------------------------


async def test_invites_direct_from_anyone_groups_only_from_allowed_users(fake, connected):
    platform, events = connected
    stranger = fake.user("@eve:hermes.test", "Eve")
    dm = fake.dm(stranger, bot="invite")
    group_by_stranger = fake.create_room(stranger, [stranger], bot="invite", name="eve's")
    group_by_ada = fake.create_room(ADA, [ADA, BOB], bot="invite", name="ada's")
    await wait(fake, lambda: fake.rooms[dm].membership(fake.bot) == "join", "the direct invite accepted")
    await wait(fake, lambda: fake.rooms[group_by_ada].membership(fake.bot) == "join", "the allowed user's invite accepted")
    await wait(fake, lambda: fake.rooms[group_by_stranger].membership(fake.bot) == "leave", "the stranger's group invite declined")
    await wait(fake, lambda: dm in fake.account_data.get(fake.bot, {}).get("m.direct", (0, {}))[1].get(stranger, []), "m.direct")
    fake.say(dm, stranger, "hi")
    incoming = await events.next_message()
    assert incoming.place.direct and incoming.addressed and incoming.place.chat == dm


async def test_without_encryption_an_encrypted_room_gets_one_notice_and_nothing_is_read(fake, connected):
    platform, events = connected
    room = fake.create_room(ADA, [ADA], bot="invite", direct=True, encrypted=True)
    notice = await asyncio.to_thread(fake.wait_text, room, "end-to-end encrypted", WAIT)
    assert notice["content"]["msgtype"] == "m.notice" and notice["content"]["body"] == ENCRYPTION_NOTICE
    ciphertext = {
        "algorithm": "m.megolm.v1.aes-sha2",
        "ciphertext": "AwgAEnACgAkLmt6qF84IK++J7UDH2Za1YVchHyprqTqsg2yyOwAtHaZTwyNg37afzg8f3r9IsN9r4RNFg7MaZencUJe4qvELiDiopUjy5wYVDAtqdBzer5bWRD",
        "device_id": "RJYKSTBOIE",
        "sender_key": "IlRMeOPX2e0MurIyfWEucYBRVOEEUMrOHqn/8mLqMjA",
        "session_id": "X3lUlvLELLYxeTx4yOVu6UDpasGEVO0Jbu+QFnm0cKQ",
    }
    fake.send_event(room, ADA, "m.room.encrypted", ciphertext)
    fake.send_event(room, ADA, "m.room.encrypted", ciphertext)
    fake.say(room, ADA, "a plain message after")
    assert (await events.next_message()).text == "a plain message after"  # the encrypted ones never arrived
    assert [m["content"]["body"] for m in fake.sent(room)] == [ENCRYPTION_NOTICE]


# -- sending --------------------------------------------------------------------------------


async def test_send_renders_markdown_to_matrix_html_and_edit_replaces_it(fake, connected):
    platform, events = connected
    room = fake.dm(ADA)
    place = Place("matrix", room, None, True)
    event_id = await platform.send(place, "A **bold** claim with `code` & <tags>\n\nsecond line")
    original = fake.sent(room)[-1]["original"]
    assert original["msgtype"] == "m.text" and original["body"] == "A **bold** claim with `code` & <tags>\n\nsecond line"
    assert original["format"] == "org.matrix.custom.html"
    assert original["formatted_body"] == "A <b>bold</b> claim with <code>code</code> &amp; &lt;tags&gt;<br><br>second line"
    assert original["m.mentions"] == {}
    await platform.edit(place, event_id, "plain words now")
    edit = fake.events(room, sender=fake.bot)[-1]["content"]
    assert edit["m.relates_to"] == {"rel_type": "m.replace", "event_id": event_id}
    assert edit["body"] == "* plain words now" and edit["m.new_content"] == {
        "msgtype": "m.text",
        "body": "plain words now",
        "m.mentions": {},
    }
    record = fake.sent(room)[-1]
    assert record["content"]["body"] == "plain words now" and record["edits"] == 1


def test_matrix_html_keeps_lines_and_code_blocks():
    assert matrix_html("one\ntwo") == "one<br>two"
    assert matrix_html("see:\n```python\nx = 1\ny = 2\n```\ndone") == 'see:<pre><code class="language-python">x = 1\ny = 2</code></pre>done'
    assert matrix_html("> quoted\n> more\nafter") == "<blockquote>quoted<br>more</blockquote>after"


async def test_split_respects_the_limit_and_a_full_message_fits_the_event_cap(fake, connected):
    platform, events = connected
    room = fake.dm(ADA)
    text = "\n\n".join(f"{i}. " + "word " * 150 for i in range(60))
    chunks = platform.split(text)
    assert len(chunks) > 1 and all(len(chunk) <= platform.limits.text for chunk in chunks)
    wide = "\U0001f600" * (LIMIT - 100)  # four bytes each: with its HTML it would pass 65,536
    event_id = await platform.send(Place("matrix", room, None, True), f"**{wide}**")
    await platform.edit(Place("matrix", room, None, True), event_id, f"*{wide}*")
    record = fake.sent(room)[-1]
    assert record["content"]["body"] == f"*{wide}*" and record["edits"] == 1
    assert all(len(str(e["content"]).encode()) < MAX_EVENT_BYTES * 2 for e in fake.events(room, sender=fake.bot))


async def test_a_rate_limited_send_is_retried_once_after_the_servers_delay(fake, connected):
    platform, events = connected
    room = fake.dm(ADA)
    fake.rate_limit["send"] = 1
    await platform.send(Place("matrix", room, None, True), "after a pause")
    assert fake.texts(room) == ["after a pause"]
    sends = [path for method, path in fake.calls if method == "PUT" and "/send/" in path]
    assert len(sends) == 2 and sends[0] == sends[1]  # the same transaction: never sent twice
    fake.rate_limit["send"] = 2
    with pytest.raises(MatrixError, match="M_LIMIT_EXCEEDED"):
        await platform.send(Place("matrix", room, None, True), "not this one")


async def test_buttons_become_number_reactions_and_a_reaction_is_a_press(fake, connected):
    platform, events = connected
    room = fake.create_room(ADA, [ADA, BOB])
    place = Place("matrix", room)
    question = await platform.send(place, "Run `make deploy`?\n1. Allow once\n2. Allow always\n3. Deny", buttons=CHOICES)
    reactions = fake.events(room, sender=fake.bot, kind="m.reaction")
    assert [r["content"]["m.relates_to"] for r in reactions] == [
        {"rel_type": "m.annotation", "event_id": question, "key": key} for key in KEYCAPS
    ]
    assert fake.sent(room)[-1]["content"]["body"].count("Allow once") == 1  # the replies are not listed twice
    fake.react(room, BOB, question, KEYCAPS[1])
    press = await events.next_press()
    assert (press.data, press.sender.id, press.message_id, press.place) == ("ap|7f3a|a", f"matrix:{BOB}", question, place)
    await press.answer("Only the person who asked for this can answer it.", True)
    notice = fake.sent(room)[-1]["content"]
    assert notice["msgtype"] == "m.notice" and notice["body"] == "Bob: Only the person who asked for this can answer it."
    assert notice["m.mentions"] == {"user_ids": [BOB]} and notice["m.relates_to"] == {"m.in_reply_to": {"event_id": question}}
    fake.react(room, ADA, question, "3")  # a digit typed as the reaction counts too
    accepted = await events.next_press()
    assert accepted.data == "ap|7f3a|d"
    await accepted.answer("Denied", False)  # shows itself: the question is edited, nothing more is said
    assert len(fake.sent(room)) == 2
    await platform.edit(place, question, "Run `make deploy`? Denied.", buttons=None)
    redacted = {e["redacts"] for e in fake.events(room, sender=fake.bot, kind="m.room.redaction")}
    assert redacted == {r["event_id"] for r in reactions}
    fake.react(room, ADA, question, KEYCAPS[0])
    fake.say(room, ADA, "done?", mention_bot=True)
    await events.next_message()
    assert events.presses.empty()  # an answered question takes no more presses


async def test_reactions_follow_the_numbers_the_question_gives(fake, connected):
    platform, events = connected
    room = fake.dm(ADA)
    text = "🔐 Approval needed: Run `sleep 5`\n\nReply 4 — Allow once\nReply 5 — Deny"
    question = await platform.send(Place("matrix", room, None, True), text, buttons=[CHOICES[0], CHOICES[2]])
    keys = [r["content"]["m.relates_to"]["key"] for r in fake.events(room, sender=fake.bot, kind="m.reaction")]
    assert keys == ["4\ufe0f\u20e3", "5\ufe0f\u20e3"]
    fake.react(room, ADA, question, KEYCAPS[0])  # 1 is not one of this question's numbers
    fake.react(room, ADA, question, "5\ufe0f\u20e3")
    assert (await events.next_press()).data == "ap|7f3a|d"
    assert events.presses.empty()


async def test_send_file_uploads_then_sends_the_right_message_type(fake, connected):
    platform, events = connected
    room = fake.create_room(ADA, [ADA, BOB])
    root = fake.say(room, ADA, "root")
    await events.next_message()
    await platform.send_file(Place("matrix", room, root), "report.csv", b"a,b\n1,2\n", "text/csv", caption="the **numbers**")
    await platform.send_file(Place("matrix", room), "reply.ogg", b"OggS spoken", "audio/ogg")
    document, audio = fake.sent(room)[-2:]
    assert document["content"]["msgtype"] == "m.file" and document["content"]["filename"] == "report.csv"
    assert document["content"]["body"] == "the **numbers**" and document["content"]["formatted_body"] == "the <b>numbers</b>"
    assert document["content"]["info"] == {"mimetype": "text/csv", "size": 8} and document["thread"] == root
    media_id = document["content"]["url"].removeprefix("mxc://hermes.test/")
    assert fake.media[media_id] == (b"a,b\n1,2\n", "text/csv", "report.csv")
    assert audio["content"]["msgtype"] == "m.audio" and audio["content"]["body"] == "reply.ogg"


async def test_typing_is_shown_and_ended_by_the_reply(fake, connected):
    platform, events = connected
    room = fake.dm(ADA)
    await platform.typing(Place("matrix", room, None, True))
    await platform.send(Place("matrix", room, None, True), "done")
    await wait(fake, lambda: (room, fake.bot, False) in fake.typing, "typing to end")
    assert fake.typing[0] == (room, fake.bot, True)


async def test_direct_place_is_the_known_chat_or_one_opened_on_first_send(fake, connected):
    platform, events = connected
    room = fake.dm(ADA)
    fake.say(room, ADA, "hi")
    await events.next_message()
    assert platform.direct_place(ADA) == Place("matrix", room, None, direct=True)
    assert platform.direct_place("bob") is None
    place = platform.direct_place(BOB)
    assert place == Place("matrix", BOB, None, direct=True)
    first = await platform.send(place, "Approve a command?")
    await platform.send(place, "and a second message")
    created = [r for r in fake.rooms.values() if r.membership(BOB) == "invite" and r.membership(fake.bot) == "join"]
    assert len(created) == 1 and created[0].state[("m.room.member", BOB)]["content"]["is_direct"] is True
    assert [m["event_id"] for m in fake.sent(created[0].room_id)][0] == first
    assert fake.account_data[fake.bot]["m.direct"][1][BOB] == [created[0].room_id]
