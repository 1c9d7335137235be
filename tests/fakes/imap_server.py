"""A small IMAP4rev1 server (RFC 3501, RFC 2177 IDLE) on 127.0.0.1, spoken to by the real aioimaplib.

One mailbox per server (any name SELECTs it), messages with UIDs and flags. It speaks what a
mail client needs to follow a mailbox: LOGIN, CAPABILITY (with IDLE, and STARTTLS when given a
TLS context for it), SELECT/EXAMINE (EXISTS, UIDVALIDITY, UIDNEXT), UID SEARCH (ALL, UNSEEN,
SEEN, UID set, CHARSET), UID FETCH (UID, FLAGS, RFC822.SIZE, RFC822, BODY[], BODY.PEEK[]), UID
STORE (+FLAGS, -FLAGS, FLAGS, .SILENT), IDLE with an untagged EXISTS pushed as soon as a message
is appended, DONE, NOOP, LOGOUT. Anything else is answered BAD, as a strict server would.

Runs on an event loop of its own (``start`` makes one in a thread unless a loop is given); the
test thread calls ``append`` and reads ``flags``, ``logins``, ``commands``.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import ssl
import threading
from dataclasses import dataclass, field
from typing import Any

__all__ = ["FakeIMAP", "StoredMessage"]


@dataclass
class StoredMessage:
    uid: int
    raw: bytes
    flags: set[str] = field(default_factory=set)


class FakeIMAP:
    """The mailbox and the server. ``user``/``password`` is the one login it accepts."""

    def __init__(
        self,
        user: str,
        password: str,
        *,
        idle: bool = True,
        uidvalidity: int = 1_700_000_000,
        ssl_context: ssl.SSLContext | None = None,
        starttls_context: ssl.SSLContext | None = None,
    ) -> None:
        self.user = user
        self.password = password
        self.idle = idle
        self.uidvalidity = uidvalidity
        self.ssl_context = ssl_context  # implicit TLS on connect (port 993 style)
        self.starttls_context = starttls_context  # offered through STARTTLS (port 143 style)
        self.messages: list[StoredMessage] = []
        self.logins: list[tuple[str, bool]] = []  # (user, accepted)
        self.commands: list[str] = []  # each command line as received, LOGIN's password masked
        self.idles = 0  # IDLE commands started
        self.port = 0
        self._uids = itertools.count(1)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._own_loop = False
        self._server: asyncio.AbstractServer | None = None
        self._sessions: set[_Session] = set()

    # -- lifecycle ------------------------------------------------------------------------

    def start(self, loop: asyncio.AbstractEventLoop | None = None) -> FakeIMAP:
        """Listen on 127.0.0.1 (a random port), on ``loop`` (running in another thread) or a new one."""
        if loop is None:
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, daemon=True, name="fake-imap").start()
            self._own_loop = True
        self._loop = loop
        self._server = asyncio.run_coroutine_threadsafe(self._listen(), loop).result(10)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def _listen(self) -> asyncio.AbstractServer:
        return await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.ssl_context)

    def close(self) -> None:
        if self._loop is None or self._server is None:
            return
        server, self._server = self._server, None

        async def shut() -> None:
            server.close()
            for session in list(self._sessions):
                session.abort()
            await server.wait_closed()

        asyncio.run_coroutine_threadsafe(shut(), self._loop).result(10)
        if self._own_loop:
            self._loop.call_soon_threadsafe(self._loop.stop)

    def __enter__(self) -> FakeIMAP:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- what tests do --------------------------------------------------------------------

    def append(self, raw: bytes, flags: tuple[str, ...] = ()) -> int:
        """Deliver a message to the mailbox (as the receiving server does); returns its UID.
        Clients in IDLE are told at once (``* N EXISTS``)."""
        with self._lock:
            uid = next(self._uids)
            self.messages.append(StoredMessage(uid, raw, set(flags)))
            self._changed.notify_all()
        if self._loop is not None:
            for session in list(self._sessions):
                self._loop.call_soon_threadsafe(session.wake.set)
        return uid

    def flags(self, uid: int) -> set[str]:
        with self._lock:
            return set(next(m for m in self.messages if m.uid == uid).flags)

    def wait_flag(self, uid: int, flag: str = "\\Seen", timeout: float = 20.0) -> None:
        """Block until message ``uid`` has ``flag`` (the client stored it)."""
        with self._changed:
            if not self._changed.wait_for(lambda: flag in next(m for m in self.messages if m.uid == uid).flags, timeout):
                raise AssertionError(f"message {uid} never got {flag}")

    def wait_idle(self, count: int = 1, timeout: float = 20.0) -> None:
        """Block until ``count`` IDLE commands have started in all."""
        with self._changed:
            if not self._changed.wait_for(lambda: self.idles >= count, timeout):
                raise AssertionError(f"the client did not IDLE ({self.idles} of {count})")

    def drop_connections(self) -> None:
        """Cut every client connection, as a server restart or a network failure does."""
        assert self._loop is not None
        for session in list(self._sessions):
            self._loop.call_soon_threadsafe(session.abort)

    @property
    def connections(self) -> int:
        return len(self._sessions)

    # -- the protocol ---------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        session = _Session(self, reader, writer)
        self._sessions.add(session)
        try:
            await session.run()
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            self._sessions.discard(session)
            writer.close()

    def _snapshot(self) -> list[StoredMessage]:
        with self._lock:
            return list(self.messages)

    def _note(self, line: str) -> None:
        with self._lock:
            self.commands.append(line)

    def _idle_started(self) -> None:
        with self._changed:
            self.idles += 1
            self._changed.notify_all()

    def _store(self, message: StoredMessage, mode: str, flags: set[str]) -> None:
        with self._changed:
            if mode == "+":
                message.flags |= flags
            elif mode == "-":
                message.flags -= flags
            else:
                message.flags = set(flags)
            self._changed.notify_all()


class _Session:
    """One client connection: its state (not authenticated, authenticated, selected) and commands."""

    def __init__(self, server: FakeIMAP, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.server = server
        self.reader = reader
        self.writer = writer
        self.state = "nonauth"
        self.tls = server.ssl_context is not None
        self.known = 0  # messages the client has been told exist
        self.wake = asyncio.Event()

    def abort(self) -> None:
        transport = self.writer.transport
        if transport is not None:
            transport.abort()

    def send(self, line: str | bytes) -> None:
        self.writer.write((line.encode() if isinstance(line, str) else line) + b"\r\n")

    def capabilities(self) -> str:
        caps = ["IMAP4rev1", "UIDPLUS", "AUTH=PLAIN"]
        if self.server.idle:
            caps.append("IDLE")
        if self.server.starttls_context is not None and not self.tls:
            caps.append("STARTTLS")
        return " ".join(caps)

    async def run(self) -> None:
        self.send(f"* OK [CAPABILITY {self.capabilities()}] fake IMAP4rev1 ready")
        await self.writer.drain()
        while True:
            raw = await self.reader.readline()
            if not raw:
                return
            line = raw.decode("utf-8", errors="replace").rstrip("\r\n")
            tag, _, rest = line.partition(" ")
            command, _, args = rest.partition(" ")
            command = command.upper()
            self.server._note(f"{tag} LOGIN {args.split(' ')[0]} ****" if command == "LOGIN" else line)
            if not tag or not command:
                self.send(f"{tag or '*'} BAD empty command")
            else:
                try:
                    done = await self.dispatch(tag, command, args)
                except _Bad as exc:
                    self.send(f"{tag} BAD {exc}")
                    done = False
                if done:
                    await self.writer.drain()
                    return
            await self.writer.drain()

    async def dispatch(self, tag: str, command: str, args: str) -> bool:
        """Answer one command; True when the connection is to close."""
        if command == "CAPABILITY":
            self.send(f"* CAPABILITY {self.capabilities()}")
            self.send(f"{tag} OK CAPABILITY completed")
        elif command == "NOOP":
            self.report_new()
            self.send(f"{tag} OK NOOP completed")
        elif command == "LOGOUT":
            self.send("* BYE logging out")
            self.send(f"{tag} OK LOGOUT completed")
            return True
        elif command == "STARTTLS":
            if self.server.starttls_context is None or self.tls or self.state != "nonauth":
                raise _Bad("STARTTLS not available")
            self.send(f"{tag} OK Begin TLS negotiation now")
            await self.writer.drain()
            await self.writer.start_tls(self.server.starttls_context)
            self.tls = True
        elif command == "LOGIN":
            if self.state != "nonauth":
                raise _Bad("already authenticated")
            words = _tokens(args)
            if len(words) != 2 or not all(isinstance(w, str) for w in words):
                raise _Bad("LOGIN needs a user name and a password")
            user, password = str(words[0]), str(words[1])
            accepted = user == self.server.user and password == self.server.password
            self.server.logins.append((user, accepted))
            if not accepted:
                self.send(f"{tag} NO [AUTHENTICATIONFAILED] Invalid credentials")
            else:
                self.state = "auth"
                self.send(f"{tag} OK [CAPABILITY {self.capabilities()}] LOGIN completed")
        elif command in ("SELECT", "EXAMINE"):
            if self.state == "nonauth":
                raise _Bad("log in first")
            messages = self.server._snapshot()
            self.state = "selected"
            self.known = len(messages)
            uidnext = (max((m.uid for m in messages), default=0)) + 1
            self.send("* FLAGS (\\Answered \\Flagged \\Deleted \\Seen \\Draft)")
            self.send(f"* {len(messages)} EXISTS")
            self.send("* 0 RECENT")
            self.send(f"* OK [UIDVALIDITY {self.server.uidvalidity}] UIDs valid")
            self.send(f"* OK [UIDNEXT {uidnext}] Predicted next UID")
            access = "READ-ONLY" if command == "EXAMINE" else "READ-WRITE"
            self.send(f"{tag} OK [{access}] {command} completed")
        elif command == "IDLE":
            if self.state != "selected" or not self.server.idle:
                raise _Bad("IDLE needs a selected mailbox")
            await self.run_idle(tag)
        elif command == "UID":
            if self.state != "selected":
                raise _Bad("select a mailbox first")
            sub, _, rest = args.partition(" ")
            sub = sub.upper()
            if sub == "SEARCH":
                self.uid_search(rest)
            elif sub == "FETCH":
                self.uid_fetch(rest)
            elif sub == "STORE":
                self.uid_store(rest)
            else:
                raise _Bad(f"UID {sub} not supported")
            self.send(f"{tag} OK UID {sub} completed")
        else:
            raise _Bad(f"unknown command {command}")
        return False

    def report_new(self) -> None:
        count = len(self.server._snapshot())
        if count != self.known:
            self.known = count
            self.send(f"* {count} EXISTS")

    async def run_idle(self, tag: str) -> None:
        self.server._idle_started()
        self.send("+ idling")
        await self.writer.drain()
        reading = asyncio.ensure_future(self.reader.readline())
        try:
            while True:
                self.report_new()
                await self.writer.drain()
                self.wake.clear()
                woken = asyncio.ensure_future(self.wake.wait())
                done, _ = await asyncio.wait({reading, woken}, return_when=asyncio.FIRST_COMPLETED)
                woken.cancel()
                if reading in done:
                    line = reading.result()
                    if not line:
                        raise ConnectionResetError("client went away while idling")
                    self.server._note(line.decode(errors="replace").rstrip("\r\n"))
                    if line.strip().upper() != b"DONE":
                        self.send(f"{tag} BAD expected DONE")
                        return
                    self.send(f"{tag} OK IDLE terminated")
                    return
        finally:
            if not reading.done():
                reading.cancel()

    def uid_search(self, args: str) -> None:
        words = _tokens(args)
        messages = self.server._snapshot()
        top = max((m.uid for m in messages), default=0)
        found = [m for m in messages if _matches(m, words, top)]
        self.send("* SEARCH" + "".join(f" {m.uid}" for m in found))

    def uid_fetch(self, args: str) -> None:
        words = _tokens(args)
        if len(words) != 2:
            raise _Bad("UID FETCH needs a UID set and items")
        uid_set, items = words
        wanted = [str(i).upper() for i in (items if isinstance(items, list) else [items])]
        messages = self.server._snapshot()
        top = max((m.uid for m in messages), default=0)
        for seq, message in enumerate(messages, 1):
            if not _in_set(message.uid, str(uid_set), top):
                continue
            parts = [f"UID {message.uid}"]
            body: bytes | None = None
            for item in wanted:
                if item == "UID":
                    continue
                if item == "FLAGS":
                    parts.append(f"FLAGS ({' '.join(sorted(message.flags))})")
                elif item == "RFC822.SIZE":
                    parts.append(f"RFC822.SIZE {len(message.raw)}")
                elif item in ("RFC822", "BODY[]", "BODY.PEEK[]"):
                    body = message.raw
                    if item != "BODY.PEEK[]":
                        self.server._store(message, "+", {"\\Seen"})
                    label = "RFC822" if item == "RFC822" else "BODY[]"
                    parts.append(f"{label} {{{len(message.raw)}}}")
                else:
                    raise _Bad(f"fetch item {item} not supported")
            head = f"* {seq} FETCH ({' '.join(parts)}"
            if body is None:
                self.send(head + ")")
            else:
                # The literal ends the line; the message follows, then the closing parenthesis.
                self.writer.write(head.encode() + b"\r\n" + body + b")\r\n")

    def uid_store(self, args: str) -> None:
        words = _tokens(args)
        if len(words) != 3 or not isinstance(words[2], list):
            raise _Bad("UID STORE needs a UID set, an action and a flag list")
        uid_set, action, flags = str(words[0]), str(words[1]).upper(), {str(f) for f in words[2]}
        match = re.fullmatch(r"([+-]?)FLAGS(\.SILENT)?", action)
        if not match:
            raise _Bad(f"STORE action {action} not supported")
        messages = self.server._snapshot()
        top = max((m.uid for m in messages), default=0)
        for seq, message in enumerate(messages, 1):
            if _in_set(message.uid, uid_set, top):
                self.server._store(message, match.group(1), flags)
                if not match.group(2):
                    self.send(f"* {seq} FETCH (UID {message.uid} FLAGS ({' '.join(sorted(message.flags))}))")


class _Bad(Exception):
    """A command the server cannot parse or does not support: answered BAD."""


def _matches(message: StoredMessage, words: list[Any], top: int) -> bool:
    """Whether ``message`` meets every search key (RFC 3501 6.4.4: keys are ANDed)."""
    i = 0
    while i < len(words):
        word = words[i]
        if isinstance(word, list):
            if not _matches(message, word, top):
                return False
            i += 1
            continue
        key = str(word).upper()
        if key == "CHARSET":
            i += 2
            continue
        if key == "ALL":
            pass
        elif key == "UNSEEN":
            if "\\Seen" in message.flags:
                return False
        elif key == "SEEN":
            if "\\Seen" not in message.flags:
                return False
        elif key == "UID":
            if i + 1 >= len(words) or not _in_set(message.uid, str(words[i + 1]), top):
                return False
            i += 1
        else:
            raise _Bad(f"search key {key} not supported")
        i += 1
    return True


def _in_set(uid: int, sequence_set: str, top: int) -> bool:
    """Whether ``uid`` is in an IMAP sequence set ("1:*", "3,5:7"); "*" is the highest UID."""
    for part in sequence_set.split(","):
        low, sep, high = part.partition(":")
        a = top if low == "*" else int(low)
        b = (top if high == "*" else int(high)) if sep else a
        if min(a, b) <= uid <= max(a, b):
            return True
    return False


def _tokens(text: str) -> list[Any]:
    """IMAP arguments: atoms, quoted strings (backslash escapes), parenthesised lists (nested);
    an atom may hold a bracketed section with spaces (BODY.PEEK[HEADER.FIELDS (FROM)])."""
    stack: list[list[Any]] = [[]]
    i = 0
    while i < len(text):
        c = text[i]
        if c == " ":
            i += 1
        elif c == "(":
            stack.append([])
            i += 1
        elif c == ")":
            if len(stack) == 1:
                raise _Bad("unbalanced parenthesis")
            inner = stack.pop()
            stack[-1].append(inner)
            i += 1
        elif c == '"':
            out = []
            i += 1
            while i < len(text) and text[i] != '"':
                if text[i] == "\\" and i + 1 < len(text):
                    i += 1
                out.append(text[i])
                i += 1
            if i >= len(text):
                raise _Bad("unterminated quoted string")
            stack[-1].append("".join(out))
            i += 1
        else:
            start = i
            depth = 0
            while i < len(text) and (depth or text[i] not in ' ()"'):
                if text[i] == "[":
                    depth += 1
                elif text[i] == "]":
                    depth -= 1
                i += 1
            stack[-1].append(text[start:i])
    if len(stack) != 1:
        raise _Bad("unbalanced parenthesis")
    return stack[0]
