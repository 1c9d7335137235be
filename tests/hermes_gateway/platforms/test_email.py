"""The email adapter against a local mail provider (SMTP by aiosmtpd, IMAP by tests.fakes.imap_server),
through the real aioimaplib and aiosmtplib: connecting, reading new mail in IDLE, threads, sender
authentication, replies, files, failures."""

from __future__ import annotations

import asyncio
import json

import pytest

from core.config import Config, home
from hermes_gateway.platform import Button, Incoming, PlatformConfigError, PlatformDown, Press
from hermes_gateway.platforms.email import EmailPlatform
from tests.fakes.email_server import FakeMail

ADA = "ada@example.org"


class Inbox:
    """What the conversation layer would get: every Incoming and Press, in order."""

    def __init__(self) -> None:
        self.messages: asyncio.Queue[Incoming] = asyncio.Queue()
        self.presses: list[Press] = []

    async def message(self, incoming: Incoming) -> None:
        await self.messages.put(incoming)

    async def press(self, press: Press) -> None:
        self.presses.append(press)

    async def next(self, timeout: float = 20.0) -> Incoming:
        return await asyncio.wait_for(self.messages.get(), timeout)


def platform_for(mail: FakeMail, **overrides) -> EmailPlatform:
    return EmailPlatform(Config.model_validate({"email": mail.settings(**overrides)}))


@pytest.fixture
def mail():
    with FakeMail() as fake:
        yield fake


@pytest.fixture
async def running(mail):
    """The adapter, started against ``mail``, and what it delivered."""
    platform = platform_for(mail)
    inbox = Inbox()
    await platform.start(inbox)
    yield platform, inbox
    await platform.stop()


async def test_a_new_email_becomes_a_direct_addressed_message_and_is_marked_seen(mail, running):
    platform, inbox = running
    assert platform.account == mail.address
    received = mail.receive(ADA, "Can you check the build?", subject="Build status", name="Ada Lovelace")
    incoming = await inbox.next()
    assert incoming.place.platform == "email" and incoming.place.chat == ADA and incoming.place.direct
    assert incoming.place.thread == received.message_id.strip("<>")
    assert incoming.sender.id == f"email:{ADA}" and incoming.sender.name == "Ada Lovelace"
    assert incoming.addressed and incoming.verified
    assert incoming.text == "Build status\n\nCan you check the build?"  # a new thread's subject leads
    assert incoming.message_id == received.message_id
    await asyncio.to_thread(mail.imap.wait_flag, received.uid)
    await asyncio.to_thread(mail.imap.wait_idle, 1)  # and waits in IDLE for the next one


async def test_the_address_is_lowercased_in_place_and_identity(mail, running):
    _, inbox = running
    mail.receive("Ada.L@Example.ORG", "hi")
    incoming = await inbox.next()
    assert incoming.place.chat == "ada.l@example.org" and incoming.sender.id == "email:ada.l@example.org"


async def test_a_reply_goes_back_in_the_thread_and_the_answer_to_it_stays_there(mail, running):
    platform, inbox = running
    first = mail.receive(ADA, "What is in the repo?", subject="Repo tour")
    incoming = await inbox.next()
    sent_id = await platform.send(incoming.place, "It holds **three** packages:\n\n- core\n- gateway", buttons=[Button("Deny", "ap|1|d")])
    sent = await asyncio.to_thread(mail.wait_sent)
    assert sent.mail_from == mail.address and sent.rcpt_tos == [ADA]
    assert sent.subject == "Re: Repo tour" and sent.message_id == sent_id
    assert sent.header("In-Reply-To") == first.message_id and first.message_id in sent.header("References")
    assert sent.header("Auto-Submitted") == "auto-replied"
    assert "It holds **three** packages:" in sent.text and "Deny" not in sent.text  # no buttons drawn
    assert "<b>three</b>" in (sent.html or "")
    # Ada answers from her mail client, quoting the bot's message (which held a code to ignore).
    mail.reply(sent, ADA, "And the tests?")
    answer = await inbox.next()
    assert answer.place == incoming.place
    assert answer.text == "And the tests?"


async def test_a_reply_whose_client_dropped_references_still_joins_its_thread(mail, running):
    platform, inbox = running
    mail.receive(ADA, "start", subject="Topic")
    incoming = await inbox.next()
    sent_id = await platform.send(incoming.place, "Question: reply with code K7Q2")
    mail.receive(ADA, "K7Q2", subject="Re: Topic", in_reply_to=sent_id)  # In-Reply-To only
    answer = await inbox.next()
    assert answer.place.key == incoming.place.key and answer.text == "K7Q2"


async def test_naming_another_persons_message_joins_nothing_of_theirs(mail, running):
    platform, inbox = running
    first = mail.receive(ADA, "private plans", subject="Secret project")
    ada = await inbox.next()
    await platform.send(ada.place, "noted")
    await asyncio.to_thread(mail.wait_sent)
    # Eve, copied on Ada's first message, replies to it.
    mail.receive("eve@example.com", "what is this about?", subject="Re: x", in_reply_to=first.message_id, references=first.message_id)
    eve = await inbox.next()
    assert eve.place.chat == "eve@example.com" and eve.place.key != ada.place.key  # her own conversation
    await platform.send(eve.place, "pairing code for you")
    to_eve = await asyncio.to_thread(mail.wait_sent, lambda m: m.rcpt_tos == ["eve@example.com"])
    assert "Secret project" not in str(to_eve.message) and to_eve.subject == "Re: x"
    # Ada's thread still answers Ada's latest message, not Eve's.
    await platform.send(ada.place, "more")
    to_ada = await asyncio.to_thread(mail.wait_sent, lambda m: m.rcpt_tos == [ADA] and m.text.startswith("more"))
    assert to_ada.subject == "Re: Secret project" and to_ada.header("In-Reply-To") == first.message_id


async def test_quoted_codes_and_signatures_are_not_handed_over(mail, running):
    _, inbox = running
    body = (
        "yes\n\n-- \nAda\nexample.org\n\n"
        "On Mon, 5 Jan 2026 at 10:00, Hermes <\nhermes@bot.example> wrote:\n> Reply with code ZZ99 to allow\n"
    )
    mail.receive(ADA, body, subject="Re: Approval needed", in_reply_to="<q1@bot.example>", references="<q1@bot.example>")
    incoming = await inbox.next()
    assert incoming.text == "yes"


async def test_sender_authentication_counts_only_the_trusted_servers_topmost_verdict(mail, running):
    _, inbox = running
    cases = [
        (dict(), True),  # dkim=pass, signed by the From domain
        (dict(dkim_domain="mail.example.org"), True),  # a subdomain of it: aligned
        (dict(dkim_domain="evil.example.net"), False),  # signed, but by someone else
        (dict(dkim="fail"), False),
        (dict(dkim=None, spf="pass"), True),  # SPF for the envelope sender's domain
        (dict(dkim=None, spf="pass", spf_domain="bulk-mailer.example.com"), False),
        (dict(dkim=None), False),  # no verdict at all
        (dict(authserv_id="mx.elsewhere.example"), False),  # a verdict, but not from our server
        # Our server said fail; a pass the sender wrote in lower down, with our server's name, is ignored.
        (dict(dkim="fail", forged_results=(f"{mail.authserv_id}; dkim=pass header.d=example.org",)), False),
    ]
    gmail = (
        "mx.bot.example;\r\n       dkim=pass header.i=@example.org header.s=20230601 header.b=Ab12;\r\n"
        "       spf=pass (google.com: domain of ada@example.org designates 192.0.2.7 as permitted sender) "
        "smtp.mailfrom=ada@example.org;\r\n       dmarc=pass (p=REJECT sp=REJECT dis=NONE) header.from=example.org"
    )
    microsoft = "spf=pass (sender IP is 192.0.2.7) smtp.mailfrom=example.org; dkim=pass (signature was verified) header.d=example.org"
    cases += [
        (dict(results=gmail), True),  # header.i=@domain, comments with ';' and ':' inside
        (dict(results="mx.bot.example; dkim=pass header.i=@evil.example.net (example.org)"), False),
        (dict(results=microsoft), False),  # no authserv-id at all: nobody we trust said it
        (dict(results="mx.bot.example; none"), False),
    ]
    for kwargs, _ in cases:
        mail.receive(ADA, "hello", **kwargs)
    verdicts = [(await inbox.next()).verified for _ in cases]
    assert verdicts == [expected for _, expected in cases]


async def test_only_mail_that_arrives_after_the_first_start_is_read(mail):
    old_unseen = mail.receive(ADA, "an old message from before the bot")
    inbox = Inbox()
    platform = platform_for(mail)
    await platform.start(inbox)
    state = json.loads((home() / "gateway" / f"email-{mail.address}.json").read_text())
    assert state["last_uid"] == old_unseen.uid
    mail.receive(ADA, "new one")
    assert (await inbox.next()).text.endswith("new one")
    await platform.stop()
    # Mail that arrives while the gateway is down is read when it starts again; nothing older.
    while_down = mail.receive(ADA, "sent while you were away")
    platform = platform_for(mail)
    await platform.start(inbox)
    try:
        assert (await inbox.next()).text.endswith("sent while you were away")
        await asyncio.to_thread(mail.imap.wait_flag, while_down.uid)
        assert "\\Seen" not in mail.imap.flags(old_unseen.uid)
        assert inbox.messages.empty()
    finally:
        await platform.stop()


async def test_the_bots_own_and_automatic_mail_are_skipped(mail, running):
    _, inbox = running
    own = mail.receive(mail.address, "a copy of what I sent")
    vacation = mail.receive("bob@example.org", "I am away", headers={"Auto-Submitted": "auto-replied"})
    bulk = mail.receive("news@example.org", "Weekly digest", headers={"Precedence": "bulk"})
    mail.receive(ADA, "a real one")
    incoming = await inbox.next()
    assert incoming.text.endswith("a real one")
    for skipped in (own, vacation, bulk):
        assert "\\Seen" in mail.imap.flags(skipped.uid)  # handled (skipped), not read again


async def test_attachments_are_fetched_and_audio_is_a_voice_note(mail, running):
    _, inbox = running
    mail.receive(
        ADA,
        "see attached",
        attachments=(("notes.txt", "text/plain", b"line one\nline two\n"), ("memo.ogg", "audio/ogg", b"OggS\x00fake")),
    )
    incoming = await inbox.next()
    by_name = {a.name: a for a in incoming.attachments}
    assert set(by_name) == {"notes.txt", "memo.ogg"}
    assert await by_name["notes.txt"].fetch() == b"line one\nline two\n" and not by_name["notes.txt"].voice
    memo = by_name["memo.ogg"]
    assert memo.voice and memo.mime == "audio/ogg" and memo.size == 9 and await memo.fetch() == b"OggS\x00fake"
    assert incoming.text.endswith("see attached")


async def test_an_html_only_message_is_read_without_its_quoted_part(mail, running):
    _, inbox = running
    html = "<html><body><p>Deploy <b>now</b>, please.</p><div class='gmail_quote'>On Monday Hermes wrote: code AB12</div></body></html>"
    mail.receive(ADA, "", html=html, subject="Re: deploy", in_reply_to="<x@bot.example>")
    incoming = await inbox.next()
    assert incoming.text == "Deploy now, please."


async def test_send_file_attaches_it_to_a_reply(mail, running):
    platform, inbox = running
    mail.receive(ADA, "export please", subject="Export")
    incoming = await inbox.next()
    await platform.send_file(incoming.place, "report.csv", b"a,b\n1,2\n", "text/csv", caption="Here it is")
    sent = await asyncio.to_thread(mail.wait_sent)
    assert sent.subject == "Re: Export" and "Here it is" in sent.text
    assert sent.attachments == [("report.csv", "text/csv", b"a,b\n1,2\n")]


async def test_a_new_thread_to_a_person_gets_a_subject_and_their_answer_joins_it(mail, running):
    platform, inbox = running
    place = platform.direct_place("Owner@Example.org")
    assert place is not None and place.direct
    sent_id = await platform.send(place, "## Approval needed\nRun `make deploy`? Reply with code QW12.")
    sent = await asyncio.to_thread(mail.wait_sent)
    assert sent.rcpt_tos == ["owner@example.org"] and sent.subject == "Approval needed" and sent.message_id == sent_id
    mail.reply(sent, "owner@example.org", "QW12")
    answer = await inbox.next()
    assert answer.text == "QW12" and answer.place.thread == sent_id.strip("<>")


async def test_a_thread_is_remembered_across_restarts(mail):
    inbox = Inbox()
    platform = platform_for(mail)
    await platform.start(inbox)
    first = mail.receive(ADA, "remember me", subject="Long running")
    incoming = await inbox.next()
    await platform.stop()
    # A cron delivery after a restart: the place comes back from its key.
    platform = platform_for(mail)
    await platform.start(inbox)
    try:
        place = platform.place_for(incoming.place.chat, incoming.place.thread)
        await platform.send(place, "⏰ the nightly report")
        sent = await asyncio.to_thread(mail.wait_sent)
        assert sent.subject == "Re: Long running" and sent.header("In-Reply-To") == first.message_id
    finally:
        await platform.stop()


async def test_a_transient_smtp_refusal_is_tried_once_more(mail, running):
    platform, inbox = running
    mail.smtp_failures = 1
    mail.receive(ADA, "hi")
    incoming = await inbox.next()
    await platform.send(incoming.place, "hello back")
    sent = await asyncio.to_thread(mail.wait_sent)
    assert sent.text.startswith("hello back") and mail.smtp_refused == 1


async def test_a_permanent_smtp_refusal_says_which_server_and_why(mail, running):
    platform, inbox = running
    mail.smtp_reject = "550 5.7.1 Relaying denied"
    mail.receive(ADA, "hi")
    incoming = await inbox.next()
    with pytest.raises(PlatformDown) as caught:
        await platform.send(incoming.place, "hello back")
    assert "SMTP server 127.0.0.1" in caught.value.why and "550" in caught.value.why and "Relaying denied" in caught.value.why


async def test_a_rejected_password_is_platform_down_without_the_password(mail):
    platform = platform_for(mail, password="wrong-password-xyz")
    with pytest.raises(PlatformDown) as caught:
        await platform.start(Inbox())
    why = caught.value.why
    assert "refused the login for hermes@bot.example" in why and "EMAIL_PASSWORD" in why
    assert "wrong-password-xyz" not in why and mail.password not in why
    assert caught.value.retry_after and caught.value.retry_after >= 60  # only a new password helps
    assert mail.imap.logins == [(mail.address, False)]
    await platform.stop()


async def test_an_unreachable_server_is_platform_down_naming_it(mail):
    platform = platform_for(mail, imap_port=1)  # nothing listens there
    with pytest.raises(PlatformDown) as caught:
        await platform.start(Inbox())
    assert "cannot reach the IMAP server 127.0.0.1:1" in caught.value.why and "imap_port" in caught.value.why


async def test_a_rejected_smtp_password_is_platform_down_without_it(mail, running):
    platform, inbox = running
    mail.receive(ADA, "hi")
    incoming = await inbox.next()
    mail.password = "rotated-on-the-server"  # SMTP now refuses the bot's password
    with pytest.raises(PlatformDown) as caught:
        await platform.send(incoming.place, "hello")
    assert "refused the login" in caught.value.why and "app-password-not-real-42" not in caught.value.why


async def test_it_reconnects_when_the_connection_drops(mail, running):
    _, inbox = running
    await asyncio.to_thread(mail.imap.wait_idle, 1)
    mail.imap.drop_connections()
    await asyncio.to_thread(mail.imap.wait_idle, 2)  # logged in again and idling
    mail.receive(ADA, "still there?")
    assert (await inbox.next()).text.endswith("still there?")


async def test_idle_is_issued_again_after_its_renewal_time(mail, monkeypatch):
    monkeypatch.setattr("hermes_gateway.platforms.email.IDLE_RENEW", 0.3)  # 25 minutes in real life
    inbox = Inbox()
    platform = platform_for(mail)
    await platform.start(inbox)
    try:
        await asyncio.to_thread(mail.imap.wait_idle, 3)
        assert mail.imap.commands.count("DONE") >= 2 and mail.imap.connections == 1  # on the same connection
        mail.receive(ADA, "after renewals")
        assert (await inbox.next()).text.endswith("after renewals")
    finally:
        await platform.stop()


async def test_a_server_without_idle_is_polled(monkeypatch):
    monkeypatch.setattr("hermes_gateway.platforms.email.POLL_INTERVAL", 0.2)
    with FakeMail(idle=False) as mail:
        inbox = Inbox()
        platform = platform_for(mail)
        await platform.start(inbox)
        try:
            mail.receive(ADA, "polled")
            assert (await inbox.next()).text.endswith("polled")
            assert not any(c.endswith(" IDLE") for c in mail.imap.commands)
        finally:
            await platform.stop()


async def test_implicit_tls_with_a_verified_certificate(monkeypatch):
    with FakeMail(security="tls") as mail:
        # Without trusting the server's CA, the handshake fails and says so.
        platform = platform_for(mail, security="tls")
        with pytest.raises(PlatformDown) as caught:
            await platform.start(Inbox())
        assert "cannot reach the IMAP server" in caught.value.why and "CERTIFICATE" in caught.value.why.upper()
        await platform.stop()
        monkeypatch.setenv("SSL_CERT_FILE", mail.ca_file)
        platform = platform_for(mail, security="tls")
        inbox = Inbox()
        await platform.start(inbox)
        try:
            mail.receive(ADA, "over TLS")
            incoming = await inbox.next()
            await platform.send(incoming.place, "answered over TLS")
            assert (await asyncio.to_thread(mail.wait_sent)).text.startswith("answered over TLS")
        finally:
            await platform.stop()


async def test_starttls_upgrades_both_connections_before_the_login(monkeypatch):
    with FakeMail(security="starttls") as mail:
        monkeypatch.setenv("SSL_CERT_FILE", mail.ca_file)
        platform = platform_for(mail)
        inbox = Inbox()
        await platform.start(inbox)
        try:
            assert mail.imap.commands[1].endswith("STARTTLS") and " LOGIN " in mail.imap.commands[3]
            mail.receive(ADA, "over STARTTLS")
            incoming = await inbox.next()
            # The SMTP server refuses AUTH before STARTTLS (require_starttls): this went encrypted.
            await platform.send(incoming.place, "answered after STARTTLS")
            assert (await asyncio.to_thread(mail.wait_sent)).text.startswith("answered after STARTTLS")
        finally:
            await platform.stop()


def test_stop_before_start_is_harmless():
    with FakeMail() as mail:
        asyncio.run(platform_for(mail).stop())


async def test_stop_closes_the_connection_and_can_be_called_twice(mail, running):
    platform, _ = running
    await asyncio.to_thread(mail.imap.wait_idle, 1)
    await platform.stop()
    await platform.stop()
    assert any(c.endswith("LOGOUT") for c in mail.imap.commands)


def test_limits_and_split_send_a_long_reply_as_one_email(mail):
    platform = platform_for(mail)
    assert not platform.limits.edits and not platform.limits.buttons and not platform.limits.numbered_replies
    long_reply = " ".join(["word"] * 10_000)
    assert platform.split(long_reply) == [long_reply]
    chunks = platform.split(("paragraph " * 100 + "\n\n") * 200)  # 200k characters
    assert len(chunks) >= 2 and all(len(c) <= platform.limits.text for c in chunks)


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        ({"trusted_authserv_id": None}, "trusted_authserv_id is not set"),
        (
            {"imap_host": "imap.example.org", "security": "none"},
            'security = "none" would send the password unencrypted to imap.example.org',
        ),
        ({"smtp_host": "smtp.example.org", "smtp_security": "none", "security": "tls"}, "smtp_security"),
        ({"address": "not-an-address"}, "is not an email address"),
    ],
)
def test_unusable_sections_are_refused_with_what_to_set(mail, overrides, needle):
    with pytest.raises(PlatformConfigError) as caught:
        platform_for(mail, **overrides)
    assert needle in str(caught.value)


@pytest.mark.parametrize(
    ("body", "kept"),
    [
        ("Sounds good.\n\nOn Tue, Jan 6, 2026 at 9:12 AM Hermes <hermes@bot.example> wrote:\n> code 1234\n", "Sounds good."),
        ("Ja.\n\nAm 06.01.2026 um 09:12 schrieb Hermes <hermes@bot.example>:\n> code 1234\n", "Ja."),
        ("ok\n\n-----Original Message-----\nFrom: Hermes\nSent: Tuesday\ncode 1234\n", "ok"),
        ("ok\n________________________________\nFrom: Hermes <hermes@bot.example>\nSent: Tuesday\ncode 1234\n", "ok"),
        ("first\n> quoted in between\nsecond", "first\nsecond"),
        ("/cron list", "/cron list"),
        ("On the other hand, I wrote this myself.", "On the other hand, I wrote this myself."),
    ],
)
def test_reply_text_keeps_only_what_was_written_new(body, kept):
    from hermes_gateway.platforms.email_content import strip_quoted

    assert strip_quoted(body) == kept


async def test_a_wildcard_authserv_id_trusts_each_inbound_host_of_the_provider():
    with FakeMail(authserv_id="mx4.mail.example.net") as mail:
        platform = platform_for(mail, trusted_authserv_id="*.mail.example.net")
        inbox = Inbox()
        await platform.start(inbox)
        try:
            mail.receive(ADA, "from mx4")
            mail.receive(ADA, "from elsewhere", authserv_id="mail.example.net.evil.example")
            assert [(await inbox.next()).verified for _ in range(2)] == [True, False]
        finally:
            await platform.stop()
