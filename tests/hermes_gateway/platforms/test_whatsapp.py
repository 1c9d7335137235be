"""The WhatsApp adapter against the fake Cloud API: its real webhook listener, real HTTP both ways."""

from __future__ import annotations

import asyncio
import logging
import socket

import pytest

from core.config import Config
from hermes_gateway.platform import Button, Incoming, Place, PlatformConfigError, PlatformDown, Press
from hermes_gateway.platforms import build, configured
from hermes_gateway.platforms.whatsapp import WhatsAppAPIError, WhatsAppPlatform, to_whatsapp
from hermes_gateway.render import number_chunks
from tests.fakes.whatsapp_server import FakeWhatsApp, sign

ADA = "4915112345678"
BOB = "4917698765432"
PATH = "/hooks/whatsapp"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def whatsapp_config(fake: FakeWhatsApp, port: int, **overrides: object) -> Config:
    section: dict[str, object] = {
        "access_token": fake.token,
        "phone_number_id": fake.phone_number_id,
        "app_secret": fake.app_secret,
        "verify_token": fake.verify_token,
        "api_base_url": fake.base_url,
        "webhook_listen": "127.0.0.1",
        "webhook_port": port,
        "webhook_path": PATH,
    }
    section.update(overrides)
    return Config.model_validate({"whatsapp": {k: v for k, v in section.items() if v is not None}})


class Recorder:
    """The conversation layer's side: what the adapter delivered, in order."""

    def __init__(self) -> None:
        self.messages: asyncio.Queue[Incoming] = asyncio.Queue()
        self.presses: asyncio.Queue[Press] = asyncio.Queue()

    async def message(self, incoming: Incoming) -> None:
        await self.messages.put(incoming)

    async def press(self, press: Press) -> None:
        await self.presses.put(press)

    async def next_message(self) -> Incoming:
        return await asyncio.wait_for(self.messages.get(), 20)

    async def next_press(self) -> Press:
        return await asyncio.wait_for(self.presses.get(), 20)


@pytest.fixture
def fake():
    with FakeWhatsApp() as server:
        yield server


@pytest.fixture
async def connected(fake):
    port = free_port()
    platform = WhatsAppPlatform(whatsapp_config(fake, port))
    events = Recorder()
    await platform.start(events)
    fake.webhook_url = f"http://127.0.0.1:{port}{PATH}"
    yield platform, events
    await platform.stop()


async def deliver(fake: FakeWhatsApp, payload: dict, **kwargs: object) -> int:
    """Meta POSTs to the listener (from another thread: the adapter answers on this loop)."""
    return await asyncio.to_thread(fake.post, payload, **kwargs)


# -- configuration and connecting ---------------------------------------------------------


def test_the_registry_builds_it_when_the_section_has_its_credentials(fake):
    config = whatsapp_config(fake, free_port())
    assert "whatsapp" in configured(config)
    assert isinstance(build("whatsapp", config), WhatsAppPlatform)
    assert "whatsapp" not in configured(Config.model_validate({"whatsapp": {"app_secret": "x"}}))


def test_without_the_app_secret_it_refuses_to_start(fake):
    with pytest.raises(PlatformConfigError) as refused:
        WhatsAppPlatform(whatsapp_config(fake, free_port(), app_secret=None))
    assert "[whatsapp] app_secret is required" in str(refused.value) and "WHATSAPP_APP_SECRET" in str(refused.value)
    with pytest.raises(PlatformConfigError, match=r"webhook_path must start with"):
        WhatsAppPlatform(whatsapp_config(fake, free_port(), webhook_path="hooks"))


async def test_start_checks_the_number_and_names_the_account(fake, connected):
    platform, _ = connected
    assert platform.account == "Hermes Test"
    method, path, query = fake.calls[0]
    assert (method, path) == ("GET", f"/v26.0/{fake.phone_number_id}") and "verified_name" in query["fields"]
    assert platform.limits.text == 4096 and not platform.limits.edits and platform.limits.buttons


async def test_a_rejected_token_is_platform_down_without_the_token(fake):
    platform = WhatsAppPlatform(whatsapp_config(fake, free_port(), access_token="EAAG-wrong-token-9876543210"))
    with pytest.raises(PlatformDown) as down:
        await platform.start(Recorder())
    assert "access token is invalid or expired" in down.value.why and "code 190" in down.value.why
    assert "EAAG-wrong-token-9876543210" not in down.value.why
    assert down.value.retry_after == 300.0  # only a new token helps: retried slowly
    await platform.stop()


async def test_an_unreachable_api_is_platform_down(fake):
    closed = free_port()
    platform = WhatsAppPlatform(whatsapp_config(fake, free_port(), api_base_url=f"http://127.0.0.1:{closed}/v26.0"))
    with pytest.raises(PlatformDown, match=r"cannot reach the WhatsApp Cloud API at http://127.0.0.1:\d+/v26.0"):
        await platform.start(Recorder())


async def test_a_busy_webhook_port_is_platform_down_and_names_the_setting(fake):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        platform = WhatsAppPlatform(whatsapp_config(fake, port))
        with pytest.raises(PlatformDown, match=rf"cannot listen for WhatsApp webhooks on 127.0.0.1:{port}.*webhook_port"):
            await platform.start(Recorder())
    # It can start once the port is free (the gateway calls start again after a backoff).
    await platform.start(Recorder())
    await platform.stop()


async def test_stop_closes_the_listener_and_is_idempotent(fake):
    never_started = WhatsAppPlatform(whatsapp_config(fake, free_port()))
    await never_started.stop()
    port = free_port()
    platform = WhatsAppPlatform(whatsapp_config(fake, port))
    await platform.start(Recorder())
    await platform.stop()
    await platform.stop()
    with pytest.raises(OSError):
        await asyncio.open_connection("127.0.0.1", port)
    with pytest.raises(WhatsAppAPIError, match="not connected"):
        await platform.send(Place("whatsapp", ADA, direct=True), "hello")


# -- the webhook --------------------------------------------------------------------------


async def test_the_verification_handshake_needs_the_verify_token(fake, connected):
    assert await asyncio.to_thread(fake.verify) == (200, "1158201444")
    status, _ = await asyncio.to_thread(fake.verify, token="guessed")
    assert status == 403


async def test_without_a_verify_token_every_handshake_is_refused(fake):
    port = free_port()
    platform = WhatsAppPlatform(whatsapp_config(fake, port, verify_token=None))
    await platform.start(Recorder())
    try:
        status, _ = await asyncio.to_thread(fake.verify, token="", url=f"http://127.0.0.1:{port}{PATH}")
        assert status == 403
    finally:
        await platform.stop()


async def test_events_without_a_valid_signature_are_refused_and_dropped(fake, connected):
    _, events = connected
    forged = fake.text(BOB, "forged")
    assert await deliver(fake, forged, signature=None) == 401
    assert await deliver(fake, forged, signature=sign("another-secret", b"{}")) == 401
    assert await deliver(fake, forged, signature="sha256=" + "0" * 64) == 401
    body = b'{"object": "whatsapp_business_account"}'
    assert await deliver(fake, body + b" ", signature=sign(fake.app_secret, body)) == 401  # the body was changed
    assert await deliver(fake, fake.text(ADA, "genuine")) == 200
    first = await events.next_message()
    assert first.text == "genuine"  # nothing from the refused requests came before it


async def test_a_dm_becomes_an_addressed_incoming_in_a_direct_place(fake, connected):
    _, events = connected
    payload = fake.text(ADA, "/help me", name="Ada Lovelace")
    assert await deliver(fake, payload) == 200
    incoming = await events.next_message()
    assert incoming.place == Place("whatsapp", ADA, None, direct=True)
    assert incoming.place.key == f"whatsapp:{ADA}:0"
    assert incoming.sender.id == f"whatsapp:{ADA}" and incoming.sender.name == "Ada Lovelace" and not incoming.sender.is_bot
    assert incoming.text == "/help me" and incoming.addressed and incoming.verified
    assert incoming.message_id == payload["entry"][0]["changes"][0]["value"]["messages"][0]["id"]


async def test_a_repeated_delivery_is_handled_once(fake, connected):
    _, events = connected
    payload = fake.text(ADA, "once")
    assert await deliver(fake, payload) == 200
    assert await deliver(fake, payload) == 200  # Meta retries what it thinks failed
    assert await deliver(fake, fake.text(ADA, "next")) == 200
    assert [(await events.next_message()).text for _ in range(2)] == ["once", "next"]


async def test_one_chats_messages_arrive_in_order(fake, connected):
    _, events = connected
    for i in range(5):
        assert await deliver(fake, fake.text(ADA, f"message {i}")) == 200
    assert [(await events.next_message()).text for _ in range(5)] == [f"message {i}" for i in range(5)]


async def test_own_messages_other_numbers_statuses_and_reactions_are_not_delivered(fake, connected, caplog):
    _, events = connected
    assert await deliver(fake, fake.text(fake.wa_id, "my own echo")) == 200
    assert await deliver(fake, fake.text(BOB, "for another number", phone_number_id="999999999999")) == 200
    assert await deliver(fake, fake.status(ADA, "wamid.HBgLsent", "delivered")) == 200
    reaction = fake.envelope(
        messages=[
            {
                "from": ADA,
                "id": "wamid.reaction1",
                "timestamp": "1",
                "type": "reaction",
                "reaction": {"message_id": "wamid.x", "emoji": "👍"},
            }
        ]
    )
    assert await deliver(fake, reaction) == 200
    with caplog.at_level(logging.WARNING, logger="hermes_gateway.platforms.whatsapp"):
        failed = fake.status(ADA, "wamid.HBgLlate", "failed", error={"code": 131047, "title": "Re-engagement message"})
        assert await deliver(fake, failed) == 200
    assert "could not deliver message wamid.HBgLlate" in caplog.text and "24 hours" in caplog.text
    assert await deliver(fake, fake.text(ADA, "the only one")) == 200
    assert (await events.next_message()).text == "the only one"


# -- sending ------------------------------------------------------------------------------


def test_markdown_becomes_whatsapp_markup():
    markdown = (
        "# Title\n**bold** and *italic* and _also_ ~~gone~~ `x = 1`\n* item\n[docs](https://example.org/d)\n```python\n**not bold**\n```"
    )
    assert to_whatsapp(markdown) == (
        "*Title*\n*bold* and _italic_ and _also_ ~gone~ `x = 1`\n- item\ndocs (https://example.org/d)\n```\n**not bold**\n```"
    )
    assert to_whatsapp("snake_case_name and 2*3*4") == "snake_case_name and 2*3*4"


async def test_send_delivers_whatsapp_markup_as_a_text_message(fake, connected):
    platform, _ = connected
    message_id = await platform.send(Place("whatsapp", ADA, direct=True), "A **bold** claim with `code`.")
    [sent] = fake.sent(ADA)
    assert message_id == sent["id"] and message_id.startswith("wamid.")
    payload = sent["payload"]
    assert payload["messaging_product"] == "whatsapp" and payload["recipient_type"] == "individual"
    assert payload["type"] == "text" and payload["text"] == {"preview_url": False, "body": "A *bold* claim with `code`."}


async def test_a_long_reply_splits_into_numbered_messages_within_the_limit(fake, connected):
    platform, _ = connected
    paragraph = "A **bold** claim with `code` & <angle> brackets. " * 12
    reply = "\n\n".join(f"{i}. {paragraph}" for i in range(40)) + "\n\n```python\n" + "print('x')\n" * 300 + "```"
    chunks = number_chunks(platform.split(reply))
    assert len(chunks) >= 4
    for chunk in chunks:
        await platform.send(Place("whatsapp", ADA, direct=True), chunk)
    bodies = fake.texts(ADA)
    assert len(bodies) == len(chunks) and all(len(body) <= 4096 for body in bodies)
    assert all(body.startswith(f"({i}/{len(chunks)})") for i, body in enumerate(bodies, 1))
    joined = "\n".join(bodies)
    assert all(f"{i}. A *bold* claim" in joined for i in range(40)) and joined.count("print('x')") == 300


async def test_buttons_are_reply_buttons_and_a_press_comes_back_with_its_data(fake, connected):
    platform, events = connected
    buttons = [Button("Allow once", "ap|0123abcd|o"), Button("Allow always", "ap|0123abcd|a"), Button("Deny", "ap|0123abcd|d")]
    message_id = await platform.send(Place("whatsapp", ADA, direct=True), "**Approval needed**: write notes.txt", buttons=buttons)
    [asked] = fake.sent(ADA)
    assert asked["id"] == message_id and asked["type"] == "interactive"
    interactive = asked["interactive"]
    assert interactive["type"] == "button" and interactive["body"]["text"] == "*Approval needed*: write notes.txt"
    assert [b["reply"] for b in interactive["action"]["buttons"]] == [{"id": b.data, "title": b.label} for b in buttons]

    assert await deliver(fake, fake.press(BOB, asked, "ap|0123abcd|o", name="Bob")) == 200
    press = await events.next_press()
    assert press.data == "ap|0123abcd|o" and press.message_id == message_id
    assert press.sender.id == f"whatsapp:{BOB}" and press.sender.name == "Bob"
    assert press.place == Place("whatsapp", BOB, None, direct=True)
    await press.answer("Only the person who asked for this can answer it.", True)
    answer = fake.sent(BOB)[-1]
    assert answer["text"]["body"] == "⚠️ Only the person who asked for this can answer it."
    assert answer["context"] == {"message_id": message_id}  # quoting the question, in the presser's chat alone
    assert fake.sent(ADA) == [asked]


async def test_more_than_three_choices_become_a_list_and_long_labels_are_cut(fake, connected):
    platform, events = connected
    choices = [Button(f"Project number {i} with a long name", f"pj|{i}") for i in range(5)]
    await platform.send(Place("whatsapp", ADA, direct=True), "Which project?", buttons=choices)
    [asked] = fake.sent(ADA)
    assert asked["interactive"]["type"] == "list"
    rows = asked["interactive"]["action"]["sections"][0]["rows"]
    assert [r["id"] for r in rows] == [b.data for b in choices] and all(len(r["title"]) <= 24 for r in rows)
    assert await deliver(fake, fake.press(ADA, asked, "pj|3")) == 200
    assert (await events.next_press()).data == "pj|3"

    await platform.send(Place("whatsapp", ADA, direct=True), "Sure?", buttons=[Button("Yes, run the whole migration now", "y")])
    title = fake.sent(ADA)[-1]["interactive"]["action"]["buttons"][0]["reply"]["title"]
    assert title == "Yes, run the whole …" and len(title) == 20


async def test_a_question_longer_than_an_interactive_body_goes_first(fake, connected):
    platform, _ = connected
    question = "Run this command?\n\n```\n" + "echo step\n" * 200 + "```"
    message_id = await platform.send(Place("whatsapp", ADA, direct=True), question, buttons=[Button("Allow once", "ap|1|o")])
    text, choice = fake.sent(ADA)
    assert text["type"] == "text" and text["text"]["body"].count("echo step") == 200
    assert choice["type"] == "interactive" and choice["id"] == message_id


async def test_send_file_uploads_then_sends_by_media_id(fake, connected):
    platform, _ = connected
    place = Place("whatsapp", ADA, direct=True)
    await platform.send_file(place, "report.csv", b"a,b\n1,2\n", "text/csv", caption="The **numbers**")
    await platform.send_file(place, "chart.png", b"\x89PNG fake", "image/png")
    await platform.send_file(place, "reply.ogg", b"OggS fake", "audio/ogg; codecs=opus", caption="Spoken reply")
    csv, png, ogg = fake.uploads
    assert (csv["name"], csv["mime"], csv["type"], csv["data"]) == ("report.csv", "text/csv", "text/csv", b"a,b\n1,2\n")
    assert (png["mime"], ogg["mime"]) == ("image/png", "audio/ogg")
    document, image, audio, caption = fake.sent(ADA)
    assert document["document"] == {"id": csv["id"], "filename": "report.csv", "caption": "The *numbers*"}
    assert image["image"] == {"id": png["id"]}
    assert audio["audio"] == {"id": ogg["id"]}  # audio takes no caption: it follows as text
    assert caption["text"]["body"] == "Spoken reply"


async def test_an_attachment_is_fetched_only_when_asked(fake, connected):
    _, events = connected
    photo = b"\xff\xd8\xff JPEG bytes"
    assert await deliver(fake, fake.media(ADA, "image", photo, "image/jpeg", caption="what is this?")) == 200
    incoming = await events.next_message()
    assert incoming.text == "what is this?" and incoming.addressed
    [attachment] = incoming.attachments
    assert (
        attachment.mime == "image/jpeg"
        and attachment.name.startswith("photo-")
        and attachment.name.endswith(".jpg")
        and not attachment.voice
    )
    downloads = [c for c in fake.calls if c[0] == "GET" and c[1] != f"/v26.0/{fake.phone_number_id}"]
    assert downloads == []  # nothing fetched before fetch()
    assert await attachment.fetch() == photo

    assert await deliver(fake, fake.media(ADA, "document", b"line one\n", "text/plain", filename="notes.txt")) == 200
    document = (await events.next_message()).attachments[0]
    assert document.name == "notes.txt" and await document.fetch() == b"line one\n"


async def test_a_voice_note_is_marked_as_voice(fake, connected):
    _, events = connected
    assert await deliver(fake, fake.media(ADA, "audio", b"OggS voice", "audio/ogg; codecs=opus", voice=True)) == 200
    [note] = (await events.next_message()).attachments
    assert note.voice and note.mime == "audio/ogg" and note.name.endswith(".ogg") and await note.fetch() == b"OggS voice"
    assert await deliver(fake, fake.media(ADA, "audio", b"ID3 song", "audio/mpeg", voice=False)) == 200
    assert not (await events.next_message()).attachments[0].voice


async def test_the_token_is_not_sent_to_a_media_url_on_another_plain_http_host(fake, connected):
    _, events = connected
    fake.media_url_root = fake.root.replace("127.0.0.1", "localhost")
    assert await deliver(fake, fake.media(ADA, "image", b"jpeg", "image/jpeg")) == 200
    attachment = (await events.next_message()).attachments[0]
    with pytest.raises(WhatsAppAPIError, match="will not send the token"):
        await attachment.fetch()


async def test_typing_marks_the_newest_message_read_with_the_indicator(fake, connected):
    platform, events = connected
    place = Place("whatsapp", ADA, direct=True)
    await platform.typing(place)
    assert fake.reads == []  # nothing received from this chat yet: nothing to show it on
    payload = fake.text(ADA, "hi")
    assert await deliver(fake, payload) == 200
    await events.next_message()
    await platform.typing(place)
    await platform.typing(place)  # still showing: not sent again
    message_id = payload["entry"][0]["changes"][0]["value"]["messages"][0]["id"]
    assert fake.reads == [
        {"messaging_product": "whatsapp", "status": "read", "message_id": message_id, "typing_indicator": {"type": "text"}}
    ]
    await platform.send(place, "a question")  # a message ends the indicator ...
    await platform.typing(place)  # ... so it is shown again
    assert len(fake.reads) == 2


async def test_a_throttled_send_is_retried_once_after_retry_after(fake, connected):
    platform, _ = connected
    place = Place("whatsapp", ADA, direct=True)
    fake.throttle = 1
    await platform.send(place, "after a pause")
    assert fake.texts(ADA) == ["after a pause"]
    assert len([c for c in fake.calls if c[1].endswith("/messages")]) == 2
    fake.throttle = 2
    with pytest.raises(WhatsAppAPIError, match=r"Rate limit hit.*HTTP 429, code 130429"):
        await platform.send(place, "refused twice")


async def test_a_refused_send_says_why_without_the_secrets(fake, connected):
    platform, _ = connected
    with pytest.raises(WhatsAppAPIError) as refused:
        await platform.send(Place("whatsapp", "not-a-number", direct=True), "hello")
    text = str(refused.value)
    assert "WhatsApp refused a message" in text and "to must be a phone number" in text and "code 131009" in text
    assert fake.token not in text and fake.app_secret not in text
