"""A mail provider on 127.0.0.1: an SMTP submission server (aiosmtpd's) and an IMAP mailbox
(``tests.fakes.imap_server``), spoken to by the real aiosmtplib and aioimaplib.

What the bot sends by SMTP is recorded (``sent``), parsed. A test plays the people who write to
the bot with ``receive``: the fake acts as the bot's receiving server, which checks the message
and puts its verdict on top of the headers (``Authentication-Results: <authserv_id>; dkim=...;
spf=...``) before it lands in the mailbox, so the bot (in IDLE) hears of it at once. Forged
verdicts from elsewhere (``forged_results``) go below it, as they would arrive.

Optional TLS: ``security="tls"`` or ``"starttls"`` makes a throwaway CA and a certificate for
127.0.0.1; both servers then speak implicit TLS (IMAP 993 and SMTP 465 style) or require
STARTTLS before the login (IMAP 143 and SMTP 587 style), and ``ca_file`` is what a client trusts
(``SSL_CERT_FILE``).
"""

from __future__ import annotations

import asyncio
import datetime
import email
import email.policy
import ipaddress
import logging
import ssl
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass, field
from email.message import EmailMessage
from email.utils import format_datetime, formataddr, make_msgid
from pathlib import Path
from typing import Any

from aiosmtpd.smtp import SMTP, AuthResult, Envelope, LoginPassword, Session

from tests.fakes.imap_server import FakeIMAP

__all__ = ["FakeMail", "Received", "SentMail"]


@dataclass
class SentMail:
    """A message the bot submitted over SMTP."""

    mail_from: str
    rcpt_tos: list[str]
    raw: bytes
    message: EmailMessage = field(repr=False)

    @property
    def subject(self) -> str:
        return str(self.message["Subject"] or "")

    @property
    def message_id(self) -> str:
        return str(self.message["Message-ID"] or "")

    def header(self, name: str) -> str:
        return str(self.message[name] or "")

    @property
    def text(self) -> str:
        part = self.message.get_body(("plain",))
        return part.get_content().replace("\r\n", "\n") if part is not None else ""  # type: ignore[union-attr]

    @property
    def html(self) -> str | None:
        part = self.message.get_body(("html",))
        return part.get_content() if part is not None else None  # type: ignore[union-attr]

    @property
    def attachments(self) -> list[tuple[str, str, bytes]]:
        return [(p.get_filename() or "", p.get_content_type(), p.get_payload(decode=True)) for p in self.message.iter_attachments()]


@dataclass
class Received:
    """A message delivered to the bot's mailbox: its UID there and its Message-ID."""

    uid: int
    message_id: str
    message: EmailMessage = field(repr=False)


class _Recorder:
    """aiosmtpd's handler: keeps every message; answers 451 while ``fail`` counts down."""

    def __init__(self, fake: FakeMail) -> None:
        self.fake = fake

    async def handle_DATA(self, server: SMTP, session: Session, envelope: Envelope) -> str:
        with self.fake._cond:
            if self.fake.smtp_failures:
                self.fake.smtp_failures -= 1
                self.fake.smtp_refused += 1
                return "451 4.3.0 Temporary failure, try again later"
            if self.fake.smtp_reject:
                return self.fake.smtp_reject
            raw = envelope.original_content or b""
            parsed = email.message_from_bytes(raw, policy=email.policy.default)
            assert isinstance(parsed, EmailMessage)
            self.fake.sent.append(SentMail(str(envelope.mail_from), list(envelope.rcpt_tos), raw, parsed))
            self.fake._cond.notify_all()
        return "250 2.0.0 OK queued"


class FakeMail:
    """The bot's mail provider. ``address``/``password`` is its one account (IMAP and SMTP)."""

    def __init__(
        self,
        address: str = "hermes@bot.example",
        password: str = "app-password-not-real-42",
        *,
        authserv_id: str = "mx.bot.example",
        security: str = "none",
        idle: bool = True,
    ) -> None:
        self.address = address
        self.password = password
        self.authserv_id = authserv_id
        self.security = security
        self.sent: list[SentMail] = []
        self.smtp_logins: list[tuple[str, bool]] = []
        self.smtp_failures = 0  # the next N messages get 451 (a transient refusal)
        self.smtp_refused = 0
        self.smtp_reject: str | None = None  # e.g. "550 5.7.1 Relaying denied": every message refused
        self.ca_file: str | None = None
        self._cond = threading.Condition()
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        logging.getLogger("mail.log").setLevel(logging.ERROR)  # aiosmtpd's per-command log and its AUTH warning
        server_ctx = self._make_tls() if security != "none" else None
        implicit = server_ctx if security == "tls" else None
        self._starttls = server_ctx if security == "starttls" else None
        self.imap = FakeIMAP(address, password, idle=idle, ssl_context=implicit, starttls_context=self._starttls)
        self._server_ctx = implicit
        self._loop: asyncio.AbstractEventLoop | None = None
        self._smtp: asyncio.AbstractServer | None = None
        self.smtp_port = 0

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> FakeMail:
        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._loop.run_forever, daemon=True, name="fake-mail").start()
        self.imap.start(self._loop)
        self._smtp = asyncio.run_coroutine_threadsafe(self._listen_smtp(), self._loop).result(10)
        self.smtp_port = self._smtp.sockets[0].getsockname()[1]
        return self

    async def _listen_smtp(self) -> asyncio.AbstractServer:
        loop = asyncio.get_running_loop()
        recorder = _Recorder(self)

        def authenticator(server: SMTP, session: Session, envelope: Envelope, mechanism: str, data: Any) -> AuthResult:
            ok = isinstance(data, LoginPassword) and data.login.decode() == self.address and data.password.decode() == self.password
            login = data.login.decode() if isinstance(data, LoginPassword) else "?"
            self.smtp_logins.append((login, ok))
            return AuthResult(success=ok, handled=False)  # handled=False: aiosmtpd answers 235 or 535

        def protocol() -> SMTP:
            with warnings.catch_warnings():
                # AUTH without TLS: what security = "none" means, for a server on 127.0.0.1 only.
                warnings.simplefilter("ignore", UserWarning)
                return SMTP(
                    recorder,
                    hostname="smtp.bot.example",
                    authenticator=authenticator,
                    auth_required=True,
                    auth_require_tls=False,
                    tls_context=self._starttls,
                    require_starttls=self._starttls is not None,
                    loop=loop,
                )

        return await loop.create_server(protocol, "127.0.0.1", 0, ssl=self._server_ctx)

    def close(self) -> None:
        if self._loop is None:
            return
        loop, self._loop = self._loop, None
        self.imap.close()
        if self._smtp is not None:
            smtp = self._smtp

            async def shut() -> None:
                smtp.close()
                await smtp.wait_closed()

            try:
                asyncio.run_coroutine_threadsafe(shut(), loop).result(10)
            except TimeoutError:
                pass
        loop.call_soon_threadsafe(loop.stop)
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> FakeMail:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- configuration for the bot --------------------------------------------------------

    def settings(self, **overrides: Any) -> dict[str, Any]:
        """The ``[email]`` section (as a dict) that points the bot at this provider."""
        values: dict[str, Any] = {
            "address": self.address,
            "imap_host": "127.0.0.1",
            "imap_port": self.imap.port,
            "smtp_host": "127.0.0.1",
            "smtp_port": self.smtp_port,
            "password": self.password,
            "security": self.security,
            "trusted_authserv_id": self.authserv_id,
        }
        values.update(overrides)
        return {k: v for k, v in values.items() if v is not None}

    def section(self, **overrides: Any) -> str:
        """The same as TOML text, for a config.toml."""
        lines = ["[email]"]
        for key, value in self.settings(**overrides).items():
            if isinstance(value, bool):
                lines.append(f"{key} = {'true' if value else 'false'}")
            elif isinstance(value, (int, float)):
                lines.append(f"{key} = {value}")
            elif isinstance(value, list):
                lines.append(f"{key} = [{', '.join(_toml_str(v) for v in value)}]")
            else:
                lines.append(f"{key} = {_toml_str(str(value))}")
        return "\n".join(lines) + "\n"

    # -- what tests do --------------------------------------------------------------------

    def receive(
        self,
        sender: str,
        body: str = "",
        *,
        subject: str = "Hello",
        name: str = "",
        dkim: str | None = "pass",
        dkim_domain: str | None = None,
        spf: str | None = None,
        spf_domain: str | None = None,
        authserv_id: str | None = None,
        forged_results: tuple[str, ...] = (),
        in_reply_to: str | None = None,
        references: str | None = None,
        attachments: tuple[tuple[str, str, bytes], ...] = (),
        html: str | None = None,
        headers: dict[str, str] | None = None,
        message_id: str | None = None,
        results: str | None = None,
    ) -> Received:
        """A message from ``sender`` lands in the bot's mailbox, with the receiving server's
        verdict on top: DKIM signed by ``dkim_domain`` (default: the sender's domain) with result
        ``dkim``, SPF for ``spf_domain`` with result ``spf`` (None: not reported); or ``results``,
        the header's whole value."""
        message = EmailMessage()
        message["From"] = formataddr((name, sender)) if name else sender
        message["To"] = self.address
        message["Subject"] = subject
        message["Date"] = format_datetime(datetime.datetime.now(datetime.UTC))
        message["Message-ID"] = message_id or make_msgid(domain=sender.rpartition("@")[2] or "example.org")
        if in_reply_to:
            message["In-Reply-To"] = in_reply_to
        if references:
            message["References"] = references
        for key, value in (headers or {}).items():
            message[key] = value
        if html is not None and not body:
            message.set_content(html, subtype="html")  # an HTML-only message
        else:
            message.set_content(body)
            if html is not None:
                message.add_alternative(html, subtype="html")
        for filename, mime, data in attachments:
            maintype, _, subtype = mime.partition("/")
            message.add_attachment(data, maintype=maintype, subtype=subtype, filename=filename)
        domain = sender.rpartition("@")[2]
        verdicts = []
        if dkim is not None:
            verdicts.append(f"dkim={dkim} (signature verified) header.d={dkim_domain or domain} header.s=sel1 header.b=AbCdEf12")
        if spf is not None:
            verdicts.append(f"spf={spf} (sender IP is 192.0.2.7) smtp.mailfrom={spf_domain or domain}")
        result = f"{authserv_id or self.authserv_id};\r\n\t" + (";\r\n\t".join(verdicts) if verdicts else "none")
        if results is not None:
            result = results  # the whole header value, as a given provider writes it
        raw = message.as_bytes(policy=email.policy.SMTP)
        # The receiving server's trace goes on top, above whatever the sender put in.
        top = f"Authentication-Results: {result}\r\n".encode()
        top += f"Received: from mail.{domain} (mail.{domain} [192.0.2.7]) by {self.authserv_id}; {message['Date']}\r\n".encode()
        forged = b"".join(f"Authentication-Results: {f}\r\n".encode() for f in forged_results)
        raw = top + forged + raw
        uid = self.imap.append(raw)
        parsed = email.message_from_bytes(raw, policy=email.policy.default)
        assert isinstance(parsed, EmailMessage)
        return Received(uid, str(message["Message-ID"]), parsed)

    def reply(self, to: SentMail, sender: str, body: str, *, quote: bool = True, **kwargs: Any) -> Received:
        """``sender`` answers one of the bot's messages as a mail client does: "Re:" subject,
        In-Reply-To and References, the bot's text quoted below an "On ... wrote:" line."""
        references = " ".join(filter(None, [to.header("References"), to.message_id]))
        if quote:
            quoted = "\n".join("> " + line for line in to.text.splitlines())
            body = f"{body}\n\nOn Mon, 5 Jan 2026 at 10:00, Hermes <{self.address}> wrote:\n{quoted}\n"
        subject = to.subject if to.subject.lower().startswith("re:") else f"Re: {to.subject}"
        return self.receive(sender, body, subject=subject, in_reply_to=to.message_id, references=references, **kwargs)

    def sent_to(self, address: str) -> list[SentMail]:
        with self._cond:
            return [m for m in self.sent if address.lower() in (r.lower() for r in m.rcpt_tos)]

    def wait_sent(self, predicate: Any = None, timeout: float = 20.0, what: str = "a message from the bot") -> SentMail:
        """The first sent message meeting ``predicate`` (waiting for it)."""
        check = predicate or (lambda m: True)
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for message in self.sent:
                    if check(message):
                        return message
                left = deadline - time.monotonic()
                if left <= 0:
                    got = [(m.rcpt_tos, m.subject, m.text[:200]) for m in self.sent]
                    raise AssertionError(f"timed out waiting for {what}; sent so far: {got}")
                self._cond.wait(left)

    def wait_text(self, address: str, needle: str, timeout: float = 20.0) -> SentMail:
        """The first message to ``address`` whose text contains ``needle``."""
        return self.wait_sent(
            lambda m: address.lower() in (r.lower() for r in m.rcpt_tos) and needle in m.text, timeout, f"{needle!r} to {address}"
        )

    # -- TLS ------------------------------------------------------------------------------

    def _make_tls(self) -> ssl.SSLContext:
        """A CA and a server certificate for 127.0.0.1 and localhost, written to a temporary folder."""
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        self._tmp = tempfile.TemporaryDirectory(prefix="fake-mail-tls-")
        folder = Path(self._tmp.name)
        now = datetime.datetime.now(datetime.UTC)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "fake mail test CA")])
        ca = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=2))
            .add_extension(
                x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False,
            )
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                critical=False,
            )
            .sign(ca_key, hashes.SHA256())
        )
        pem = serialization.Encoding.PEM
        (folder / "ca.pem").write_bytes(ca.public_bytes(pem))
        (folder / "server.pem").write_bytes(cert.public_bytes(pem))
        (folder / "server.key").write_bytes(key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
        self.ca_file = str(folder / "ca.pem")
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(folder / "server.pem", folder / "server.key")
        return context


def _toml_str(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
