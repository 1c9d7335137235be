"""Email: a mailbox read over IMAP (with IDLE, through aioimaplib) and answered over SMTP (aiosmtplib).

What is peculiar about email, and what this adapter does about it:

- Anyone can write any ``From`` header. A sender counts as verified only on the receiving
  server's own verdict: the topmost ``Authentication-Results`` header whose authserv-id is
  ``[email] trusted_authserv_id`` (headers with any other id, or below it, can come from the
  sender and are ignored) must say ``dkim=pass`` with ``header.d`` aligned to the From domain, or
  ``spf=pass`` with ``smtp.mailfrom`` aligned to it. Aligned means the same domain or one a
  subdomain of the other (DMARC's relaxed alignment without the Public Suffix List). Anything else
  is delivered with ``verified=False`` and refused like a stranger.
- A conversation is a thread: the root Message-ID of the References chain (a reply to a message
  this adapter already knows joins that message's thread, even when a client trims References),
  else the message's own Message-ID, else its subject without Re:/Fwd: prefixes.
- Every email is one-to-one with its sender (``direct``, ``addressed``); there are no mentions.
- No edits and no buttons: a reply goes whole when the turn ends, and a question lists one-time
  codes that the person answers by replying. Quoted text (lines starting with ">", everything
  after an "On ... wrote:" line, a signature) is cut before the text is handed over, so a code
  in the quoted question is not taken for the answer.
- Only new mail is read: on first start the mailbox's current end is remembered (in
  ``<home>/gateway/email-<address>.json``, with the threads' subjects and references so that a
  reply after a restart stays in its thread); later, unseen messages past it are handled and
  marked \\Seen. Automatic mail (bounces, vacation replies, bulk) is marked and skipped, so two
  robots cannot answer each other forever.
- IDLE is re-issued every 25 minutes (RFC 2177 asks for less than 29); a dropped connection is
  reopened with backoff. A server without IDLE is polled every minute.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import email
import email.policy
import ipaddress
import logging
import mimetypes
import re
import ssl
import time
from collections.abc import Sequence
from dataclasses import dataclass
from email.message import EmailMessage, Message
from email.utils import format_datetime, formataddr, getaddresses, make_msgid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiosmtplib
from aioimaplib import aioimaplib  # type: ignore[import-untyped]

from core.config import home
from core.locked_json import locked_json
from hermes_gateway.platform import (
    Button,
    Events,
    Incoming,
    Limits,
    Place,
    Platform,
    PlatformConfigError,
    PlatformDown,
    Sender,
    identity,
)
from hermes_gateway.platforms.email_content import (
    SUBJECT_PREFIX,
    attachments_of,
    authenticated_sender,
    automatic,
    body_text,
    clean_subject,
    html_body,
    message_ids,
    new_subject,
    strip_quoted,
    thread_name,
)

if TYPE_CHECKING:
    from core.config import Config

__all__ = ["EmailPlatform"]

log = logging.getLogger(__name__)

IDLE_RENEW = 25 * 60.0  # seconds in one IDLE before it is re-issued
POLL_INTERVAL = 60.0  # seconds between checks on a server without IDLE
IMAP_TIMEOUT = 30.0  # seconds one IMAP command may take
SMTP_TIMEOUT = 60.0
SMTP_RETRY_DELAY = 2.0  # a transient refusal (4xx) is tried once more after this
BACKOFF_MAX = 300.0
_KEEP_THREADS = 500  # threads remembered in the state file
_KEEP_IDS = 5000  # Message-IDs remembered (each maps to its thread)
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain"}


def _loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


@dataclass(frozen=True, slots=True)
class _Settings:
    """``[email]`` checked: everything needed to connect, with the defaults applied."""

    address: str
    username: str
    password: str
    imap_host: str
    imap_port: int
    smtp_host: str
    smtp_port: int
    security: str
    smtp_security: str
    folder: str
    authserv_id: str

    @staticmethod
    def of(config: Config) -> _Settings:
        section = config.email
        missing = [k for k in ("address", "imap_host", "smtp_host") if not getattr(section, k)]
        if missing:
            raise PlatformConfigError(f"[email] {', '.join(missing)} not set: the bot needs its address and the IMAP and SMTP servers.")
        if section.password is None:
            raise PlatformConfigError("[email] password is not set: set it in config.toml or export EMAIL_PASSWORD (an app password).")
        if not section.trusted_authserv_id:
            raise PlatformConfigError(
                "[email] trusted_authserv_id is not set. Without it a forged From header cannot be told from a real "
                "sender. Set it to the authserv-id your receiving mail server writes first in the Authentication-Results "
                'header of mail you receive (e.g. "mx.google.com"; see README, Email).'
            )
        smtp_security = section.smtp_security or section.security
        for key, mode, host in (("security", section.security, section.imap_host), ("smtp_security", smtp_security, section.smtp_host)):
            if mode == "none" and not _loopback(str(host)):
                raise PlatformConfigError(
                    f'[email] {key} = "none" would send the password unencrypted to {host}; it is allowed only for a '
                    'server on this machine (127.0.0.1, localhost). Use "tls" or "starttls".'
                )
        address = str(section.address).strip().lower()
        if "@" not in address:
            raise PlatformConfigError(f"[email] address {section.address!r} is not an email address (name@example.org).")
        return _Settings(
            address=address,
            username=section.username or address,
            password=section.password.get_secret_value(),
            imap_host=str(section.imap_host),
            imap_port=section.imap_port,
            smtp_host=str(section.smtp_host),
            smtp_port=section.smtp_port,
            security=section.security,
            smtp_security=smtp_security,
            folder=section.folder,
            authserv_id=section.trusted_authserv_id.strip().lower(),
        )


class _Connection:
    """One logged-in IMAP connection with its mailbox selected."""

    def __init__(self, imap: Any, lost: asyncio.Event, idle: bool, uidvalidity: int | None, uidnext: int | None) -> None:
        self.imap = imap
        self.lost = lost
        self.idle = idle
        self.uidvalidity = uidvalidity
        self.uidnext = uidnext

    async def close(self) -> None:
        """Leave IDLE, log out (briefly), close the socket, and end the library's tasks."""
        imap = self.imap
        try:
            if not self.lost.is_set():
                if imap.has_pending_idle():
                    imap.idle_done()
                    await asyncio.sleep(0)
                await asyncio.wait_for(imap.logout(), 3.0)
        except Exception:
            pass
        transport = getattr(imap.protocol, "transport", None)
        if transport is not None:
            transport.close()
        for task in [imap._client_task, *imap.tasks, *imap.protocol.tasks]:
            if not task.done():
                task.cancel()


class EmailPlatform(Platform):
    """The bot's mailbox as a chat platform (see the module's docstring for the quirks)."""

    name = "email"
    limits = Limits(text=100_000, edit_interval=1.5, edits=False, buttons=False, numbered_replies=False)

    def __init__(self, config: Config) -> None:
        super().__init__()
        self._settings = _Settings.of(config)
        self._state_path = home() / "gateway" / f"email-{self._settings.address}.json"
        self._events: Events | None = None
        self._conn: _Connection | None = None
        self._task: asyncio.Task[None] | None = None
        self._tls: ssl.SSLContext | None = None
        self._last_uid = 0
        self._uidvalidity: int | None = None
        # Per correspondent (keys "<address> <thread>" and "<address> <Message-ID>"), so that
        # naming another person's Message-ID never joins, or reads, their thread.
        self._threads: dict[str, dict[str, Any]] = {}  # -> subject, refs, last (Message-IDs)
        self._ids: dict[str, str] = {}  # -> thread

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self, events: Events) -> None:
        # The library logs every byte at debug level, message bodies included.
        logging.getLogger("aioimaplib").setLevel(logging.INFO)
        await self.stop()
        self._events = events
        self._load_state()
        conn = await self._open()
        self._adopt(conn)
        self._conn = conn
        self.account = self._settings.address
        self._task = asyncio.create_task(self._run(conn), name="email-imap")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    # -- IMAP -----------------------------------------------------------------------------

    def _tls_context(self) -> ssl.SSLContext:
        if self._tls is None:
            self._tls = ssl.create_default_context()
        return self._tls

    async def _open(self) -> _Connection:
        """Connect, log in and select the folder; ``PlatformDown`` says which step failed."""
        s = self._settings
        where = f"the IMAP server {s.imap_host}:{s.imap_port}"
        lost = asyncio.Event()
        imap = aioimaplib.IMAP4(
            host=s.imap_host,
            port=s.imap_port,
            timeout=IMAP_TIMEOUT,
            conn_lost_cb=lambda exc: lost.set(),
            ssl_context=self._tls_context() if s.security == "tls" else None,
        )
        conn = _Connection(imap, lost, False, None, None)
        try:
            try:
                await imap.wait_hello_from_server()
            except (OSError, TimeoutError, aioimaplib.AioImapException) as exc:
                raise PlatformDown(f"cannot reach {where} ({_reason(exc)}); check [email] imap_host, imap_port and security") from None
            if s.security == "starttls":
                await self._starttls(imap, where)
            try:
                response = await imap.login(aioimaplib.quoted(s.username), s.password)
            except (OSError, TimeoutError, aioimaplib.AioImapException) as exc:
                raise PlatformDown(f"{where} did not answer the login ({_reason(exc)})") from None
            if response.result != "OK":
                said = _server_text(response.lines, s.password)
                raise PlatformDown(
                    f"{where} refused the login for {s.username} ({said}): check [email] username and password "
                    "(or EMAIL_PASSWORD); many providers want an app password here",
                    retry_after=BACKOFF_MAX,
                )
            response = await imap.select(aioimaplib.quoted(s.folder))
            if response.result != "OK":
                raise PlatformDown(
                    f"{where} cannot open the folder {s.folder!r} ({_server_text(response.lines, s.password)}); check [email] folder"
                )
            conn.idle = imap.has_capability("IDLE")
            conn.uidvalidity = _response_code(response.lines, "UIDVALIDITY")
            conn.uidnext = _response_code(response.lines, "UIDNEXT")
            if conn.uidnext is None:
                found = await imap.uid_search("ALL", charset=None)
                conn.uidnext = max(_uids(found.lines), default=0) + 1
        except BaseException:
            await conn.close()
            raise
        return conn

    async def _starttls(self, imap: Any, where: str) -> None:
        """RFC 3501 STARTTLS (aioimaplib has the command but no method for it): upgrade the
        socket in place, then ask for the capabilities again, as the RFC requires."""
        protocol = imap.protocol
        if "STARTTLS" not in protocol.capabilities:
            raise PlatformDown(f'{where} does not offer STARTTLS; set [email] security = "tls" with its TLS port (993)')
        response = await protocol.execute(aioimaplib.Command("STARTTLS", protocol.new_tag(), loop=protocol.loop))
        if response.result != "OK":
            raise PlatformDown(f"{where} refused STARTTLS ({_server_text(response.lines, '')})")
        loop = asyncio.get_running_loop()
        try:
            protocol.transport = await loop.start_tls(
                protocol.transport, protocol, self._tls_context(), server_hostname=self._settings.imap_host
            )
        except (OSError, ssl.SSLError) as exc:
            raise PlatformDown(f"the TLS handshake with {where} failed ({_reason(exc)})") from None
        await protocol.capability()

    def _adopt(self, conn: _Connection) -> None:
        """Where reading starts: the remembered UID, or this mailbox's end on first start (or when
        the server renumbered its UIDs: UIDVALIDITY changed)."""
        uidnext = conn.uidnext or 1
        if self._uidvalidity is None or conn.uidvalidity != self._uidvalidity:
            if self._uidvalidity is not None:
                log.warning("email: the mailbox's UIDVALIDITY changed; reading only mail that arrives from now on")
            self._uidvalidity = conn.uidvalidity
            self._last_uid = uidnext - 1
            self._save_state()

    async def _run(self, conn: _Connection | None) -> None:
        """Read mail until stopped; reconnect with backoff (1 s doubling to 5 minutes) when the
        connection fails."""
        delay = 1.0
        while True:
            try:
                if conn is None:
                    conn = await self._open()
                    self._adopt(conn)
                    self._conn = conn
                    log.info("email: connected to %s again", self._settings.imap_host)
                    delay = 1.0
                await self._watch(conn)
            except asyncio.CancelledError:
                raise
            except PlatformDown as exc:
                delay = max(delay, exc.retry_after or 0.0)  # a refused password: only a new one helps
                log.warning("email: %s; trying again in %.0f s", exc.why, delay)
            except Exception as exc:
                log.warning("email: the IMAP connection failed (%s); reconnecting in %.0f s", _reason(exc), delay)
            if conn is not None:
                self._conn = None
                await conn.close()
                conn = None
            await asyncio.sleep(delay)
            delay = min(delay * 2, BACKOFF_MAX)

    async def _watch(self, conn: _Connection) -> None:
        while True:
            await self._take_new(conn)
            if conn.idle:
                await self._idle(conn)
            else:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(conn.lost.wait(), POLL_INTERVAL)
                if conn.lost.is_set():
                    raise ConnectionError("the server closed the connection")
                await conn.imap.noop()

    async def _idle(self, conn: _Connection) -> None:
        """One IDLE: returns when new mail exists or after ``IDLE_RENEW``; raises when the
        connection drops."""
        imap = conn.imap
        idle = await imap.idle_start(timeout=IDLE_RENEW)
        try:
            while imap.has_pending_idle():
                push = asyncio.ensure_future(imap.wait_server_push(timeout=IDLE_RENEW + 60))
                lost = asyncio.ensure_future(conn.lost.wait())
                done, _ = await asyncio.wait({push, lost, idle}, return_when=asyncio.FIRST_COMPLETED)
                for waiter in (push, lost):
                    if not waiter.done():
                        waiter.cancel()
                if lost in done:
                    raise ConnectionError("the server closed the connection")
                if push not in done:
                    break  # the server ended IDLE by itself
                lines = push.result()
                if lines == aioimaplib.STOP_WAIT_SERVER_PUSH or any(
                    isinstance(line, bytes) and (line.endswith(b"EXISTS") or line.endswith(b"RECENT")) for line in lines
                ):
                    break
        finally:
            if imap.has_pending_idle() and not conn.lost.is_set():
                imap.idle_done()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(idle), IMAP_TIMEOUT)

    async def _take_new(self, conn: _Connection) -> None:
        """Handle each unseen message past the last one handled, oldest first; mark it \\Seen."""
        imap = conn.imap
        found = await imap.uid_search("UNSEEN", "UID", f"{self._last_uid + 1}:*", charset=None)
        if found.result != "OK":
            raise ConnectionError(f"UID SEARCH failed: {_server_text(found.lines, '')}")
        for uid in sorted(u for u in _uids(found.lines) if u > self._last_uid):
            fetched = await imap.uid("fetch", str(uid), "(BODY.PEEK[])")
            if fetched.result != "OK":
                raise ConnectionError(f"UID FETCH {uid} failed: {_server_text(fetched.lines, '')}")
            raw = b"".join(bytes(line) for line in fetched.lines if isinstance(line, bytearray))
            if raw:
                try:
                    await self._deliver(raw)
                except Exception:
                    log.exception("email: message %s could not be handled", uid)
            await imap.uid("store", str(uid), "+FLAGS", "(\\Seen)")
            self._last_uid = uid
            self._save_state()

    # -- reading a message ----------------------------------------------------------------

    async def _deliver(self, raw: bytes) -> None:
        message = email.message_from_bytes(raw, policy=email.policy.default)
        addresses = [a for _, a in getaddresses([str(v) for v in message.get_all("From") or []]) if "@" in a]
        if len(addresses) != 1:
            log.info("email: skipped a message without exactly one From address")
            return
        sender = addresses[0].strip().lower()
        if sender == self._settings.address:
            return  # our own (a copy, or mail we sent ourselves)
        if automatic(message):
            log.info("email: skipped automatic mail from %s (%s)", sender, str(message["Subject"] or "")[:60])
            return
        name = next((n for n, _ in getaddresses([str(message["From"])]) if n), "")
        subject = clean_subject(str(message["Subject"] or ""))
        own_id = str(message["Message-ID"] or "").strip() or None
        thread, is_reply = self._thread_of(message, sender, own_id, subject)
        self._remember(sender, thread, subject, own_id, references=message_ids(str(message["References"] or "")), received=True)
        text = strip_quoted(body_text(message))
        if not is_reply and subject and not text.startswith("/"):
            text = f"{subject}\n\n{text}".strip()  # a new thread's subject says what it is about
        assert self._events is not None
        await self._events.message(
            Incoming(
                place=Place(self.name, sender, thread, direct=True),
                sender=Sender(identity(self.name, sender), name),
                text=text,
                addressed=True,
                attachments=attachments_of(message),
                message_id=own_id,
                verified=authenticated_sender(message, sender, self._settings.authserv_id),
            )
        )

    def _thread_of(self, message: Message, sender: str, own_id: str | None, subject: str) -> tuple[str, bool]:
        """(thread, whether the message answers another): the thread of a message it refers to
        that we know, else the root of its References, else its own Message-ID, else its subject."""
        referred = message_ids(str(message["In-Reply-To"] or "")) + list(reversed(message_ids(str(message["References"] or ""))))
        for mid in referred:
            if (known := self._ids.get(f"{sender} {mid}")) is not None:
                return known, True
        references = message_ids(str(message["References"] or ""))
        root = references[0] if references else (referred[0] if referred else own_id)
        if root:
            return thread_name(root), bool(referred)
        return thread_name("subject:" + subject.lower()), bool(SUBJECT_PREFIX.match(str(message["Subject"] or "")))

    def _remember(
        self, chat: str, thread: str, subject: str, mid: str | None, *, references: Sequence[str] = (), received: bool = False
    ) -> None:
        key = f"{chat} {thread}"
        entry = self._threads.pop(key, None) or {"subject": subject, "refs": [], "last": None}
        if subject and not entry.get("subject"):
            entry["subject"] = subject
        refs: list[str] = entry["refs"]
        for ref in [*references, mid]:
            if ref and ref not in refs:
                refs.append(ref)
            if ref:
                self._ids.pop(f"{chat} {ref}", None)
                self._ids[f"{chat} {ref}"] = thread
        entry["refs"] = refs[:1] + refs[1:][-9:] if len(refs) > 10 else refs  # the root and the newest
        if received and mid:
            entry["last"] = mid
        self._threads[key] = entry  # newest last
        while len(self._threads) > _KEEP_THREADS:
            self._threads.pop(next(iter(self._threads)))
        while len(self._ids) > _KEEP_IDS:
            self._ids.pop(next(iter(self._ids)))
        self._save_state()

    # -- sending --------------------------------------------------------------------------

    async def send(self, place: Place, markdown: str, *, buttons: list[Button] | None = None) -> str:
        """One email (``buttons`` are not drawn: the text already lists the codes to reply with)."""
        message = self._compose(place, markdown)
        message.set_content(markdown + "\n")
        message.add_alternative(html_body(markdown), subtype="html")
        return await self._submit(place, message)

    async def send_file(self, place: Place, name: str, data: bytes, mime: str, caption: str = "") -> str:
        message = self._compose(place, caption or name)
        message.set_content((caption or f"Attached: {name}") + "\n")
        maintype, _, subtype = (mime or mimetypes.guess_type(name)[0] or "application/octet-stream").partition("/")
        message.add_attachment(data, maintype=maintype, subtype=subtype or "octet-stream", filename=Path(name).name)
        return await self._submit(place, message)

    def place_for(self, chat: str, thread: str | None = None) -> Place:
        return Place(self.name, chat.lower(), thread, direct=True)

    def direct_place(self, native_user_id: str) -> Place | None:
        return Place(self.name, native_user_id.strip().lower(), None, direct=True)

    def _compose(self, place: Place, text: str) -> EmailMessage:
        s = self._settings
        entry = self._threads.get(f"{place.chat} {place.thread}") if place.thread else None
        message = EmailMessage()
        message["From"] = formataddr(("Hermes", s.address))
        message["To"] = place.chat
        if entry is not None:
            subject = entry.get("subject") or "your message"
            message["Subject"] = f"Re: {subject}"
            refs: list[str] = entry.get("refs") or []
            if entry.get("last") or refs:
                message["In-Reply-To"] = entry.get("last") or refs[-1]
            if refs:
                message["References"] = " ".join(refs)
        else:
            message["Subject"] = new_subject(text)
        message["Date"] = format_datetime(_now())
        message["Message-ID"] = make_msgid(domain=s.address.rpartition("@")[2])
        # RFC 3834: vacation responders do not answer it, so no two robots talk forever.
        message["Auto-Submitted"] = "auto-replied"
        return message

    async def _submit(self, place: Place, message: EmailMessage) -> str:
        """Send by SMTP; a transient refusal (4xx) or a dropped connection is tried once more.
        Raises ``PlatformDown`` naming the server and what to check."""
        s = self._settings
        where = f"the SMTP server {s.smtp_host}:{s.smtp_port}"
        for attempt in (1, 2):
            try:
                await aiosmtplib.send(
                    message,
                    hostname=s.smtp_host,
                    port=s.smtp_port,
                    username=s.username,
                    password=s.password,
                    use_tls=s.smtp_security == "tls",
                    start_tls=s.smtp_security == "starttls",
                    tls_context=self._tls_context() if s.smtp_security != "none" else None,
                    local_hostname=s.address.rpartition("@")[2],
                    timeout=SMTP_TIMEOUT,
                )
                break
            except aiosmtplib.SMTPAuthenticationError as exc:
                raise PlatformDown(
                    f"{where} refused the login for {s.username} ({exc.code} {_scrub(exc.message, s.password)}): "
                    "check [email] username and password (or EMAIL_PASSWORD)"
                ) from None
            except aiosmtplib.SMTPResponseException as exc:
                if 400 <= exc.code < 500 and attempt == 1:
                    await asyncio.sleep(SMTP_RETRY_DELAY)
                    continue
                raise PlatformDown(f"{where} refused the message to {place.chat} ({exc.code} {_scrub(exc.message, s.password)})") from None
            except aiosmtplib.SMTPRecipientsRefused as exc:
                said = "; ".join(f"{r.code} {r.message}" for r in exc.recipients)
                raise PlatformDown(f"{where} refused the recipient {place.chat} ({said})") from None
            except (aiosmtplib.SMTPException, OSError, TimeoutError) as exc:
                if attempt == 1:
                    await asyncio.sleep(SMTP_RETRY_DELAY)
                    continue
                raise PlatformDown(
                    f"cannot send through {where} ({_reason(exc)}); check [email] smtp_host, smtp_port and smtp_security"
                ) from None
        mid = str(message["Message-ID"])
        thread = place.thread if place.thread and f"{place.chat} {place.thread}" in self._threads else thread_name(mid)
        subject = clean_subject(str(message["Subject"] or ""))
        self._remember(place.chat, thread, subject, mid)
        return mid

    # -- state ----------------------------------------------------------------------------

    def _load_state(self) -> None:
        with locked_json(self._state_path) as data:
            validity = data.get("uidvalidity")
            self._uidvalidity = validity if isinstance(validity, int) else None
            last = data.get("last_uid")
            self._last_uid = last if isinstance(last, int) else 0
            threads = data.get("threads")
            self._threads = {k: v for k, v in threads.items() if isinstance(v, dict)} if isinstance(threads, dict) else {}
            ids = data.get("ids")
            self._ids = {str(k): str(v) for k, v in ids.items()} if isinstance(ids, dict) else {}

    def _save_state(self) -> None:
        try:
            with locked_json(self._state_path) as data:
                data.update(uidvalidity=self._uidvalidity, last_uid=self._last_uid, threads=self._threads, ids=self._ids)
        except OSError as exc:
            log.warning("email: cannot write %s (%s); mail may be read again after a restart", self._state_path, exc.strerror)


# -- small helpers --------------------------------------------------------------------------


def _now() -> datetime.datetime:
    return datetime.datetime.fromtimestamp(time.time(), datetime.UTC)


def _uids(lines: list[Any]) -> list[int]:
    """UIDs from a SEARCH response (the untagged line, "* SEARCH" stripped by the library)."""
    if not lines or not isinstance(lines[0], bytes):
        return []
    return [int(word) for word in lines[0].split() if word.isdigit()]


def _response_code(lines: list[Any], name: str) -> int | None:
    """A number from a response code in a SELECT answer: ``OK [UIDNEXT 42]``."""
    pattern = re.compile(rb"\[" + name.encode() + rb" (\d+)\]")
    for line in lines:
        if isinstance(line, bytes) and (match := pattern.search(line)):
            return int(match.group(1))
    return None


def _server_text(lines: list[Any], secret: str) -> str:
    text = " ".join(bytes(line).decode("utf-8", errors="replace") for line in lines if isinstance(line, (bytes, bytearray)))
    return _scrub(text.strip()[:200], secret) or "no reason given"


def _scrub(text: str, secret: str) -> str:
    return text.replace(secret, "****") if secret else text


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or type(exc).__name__
