"""A fake Telegram Bot API server on 127.0.0.1, spoken to by the real python-telegram-bot.

Real HTTP (``ThreadingHTTPServer``): ``/bot<TOKEN>/<method>`` with form-encoded parameters,
as the library sends them. Tests inject updates (messages, button presses) and read what the
bot sent. Like Telegram it refuses texts over 4096 characters and HTML it cannot parse, and
answers a second concurrent ``getUpdates`` on one token with 409 Conflict. Failures can be
injected per chat, and per method (502 Bad Gateway, as Telegram answers when it is down); a
request for another token gets 401 Unauthorized. The server stops itself after ``lifetime`` seconds whatever happens.
"""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

__all__ = ["FakeTelegram"]

_ALLOWED_TAGS = {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "a", "code", "pre", "blockquote", "span", "tg-spoiler"}
_STRINGS = {"text", "parse_mode", "callback_query_id", "action", "file_id", "url", "secret_token", "webhook_url", "caption"}


class _HTMLCheck(HTMLParser):
    """Telegram's rules, roughly: only its tags, properly nested."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.error: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in _ALLOWED_TAGS:
            self.error = f'unsupported start tag "{tag}"'
        self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.error = f'unexpected end tag "{tag}"'
        else:
            self.stack.pop()


def html_error(text: str) -> str | None:
    check = _HTMLCheck()
    check.feed(text)
    check.close()
    if check.error is None and check.stack:
        return f'unclosed tag "{check.stack[-1]}"'
    return check.error


class FakeTelegram:
    """State of the fake API: updates to hand out, messages the bot sent, files, failures."""

    def __init__(self, token: str = "123456:TEST-token-not-real-abcdefghijklmnopqrstu", *, lifetime: float = 300.0) -> None:
        self.token = token
        self.bot_id = int(token.split(":")[0])
        self.username = "hermes_test_bot"
        self.lifetime = lifetime
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.messages: dict[tuple[int, int], dict[str, Any]] = {}  # (chat, message id) -> message
        self.callback_answers: list[dict[str, Any]] = []
        self.files: dict[str, bytes] = {}
        # Files the bot uploaded (sendVoice, sendAudio, sendDocument, sendPhoto): method, chat_id,
        # message_id, field, filename, mime, data, caption.
        self.uploads: list[dict[str, Any]] = []
        self.fail_chats: dict[int, int] = {}  # chat -> how many more sends fail
        self.reject_html = False  # refuse every HTML text, as Telegram does with markup it cannot parse
        self.fail_methods: dict[str, int] = {}  # method -> how many more calls answer 502 Bad Gateway
        # When each update was first handed out by getUpdates (``time.perf_counter()``), by update id.
        self.offered: dict[int, float] = {}
        # Called after each API call, in the server's thread: (method, params, status, payload, when).
        # Benchmarks time replies with it and send a user's next message as soon as a reply lands.
        self.observers: list[Callable[[str, dict[str, Any], int, dict[str, Any], float], None]] = []
        # File downloads the bot started (file ids, in order); while ``file_gate`` is an unset
        # Event, each download waits for it (a slow download a test releases when it chooses).
        self.file_requests: list[str] = []
        self.file_gate: threading.Event | None = None
        self._updates: list[dict[str, Any]] = []
        self._update_ids = itertools.count(1)
        self._message_ids = itertools.count(100)
        self._cond = threading.Condition()
        self._poll_generation = 0
        self._server: ThreadingHTTPServer | None = None
        self._timer: threading.Timer | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> FakeTelegram:
        fake = self

        class Handler(_Handler):
            api = fake

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        self._timer = threading.Timer(self.lifetime, self.close)
        self._timer.daemon = True
        self._timer.start()
        return self

    def close(self) -> None:
        if self._server is not None:
            server, self._server = self._server, None
            with self._cond:
                self._cond.notify_all()
            server.shutdown()
            server.server_close()
        if self._timer is not None:
            self._timer.cancel()

    def __enter__(self) -> FakeTelegram:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}/bot"

    # -- what tests do --------------------------------------------------------------------

    def user(self, user_id: int, first_name: str = "Ada") -> dict[str, Any]:
        return {"id": user_id, "is_bot": False, "first_name": first_name}

    def user_message(
        self, user_id: int, text: str, *, chat_id: int | None = None, chat_type: str = "private", **extra: Any
    ) -> dict[str, Any]:
        """A message from a user, as Telegram shapes it (not delivered). No text key when ``text`` is empty (photos, files)."""
        chat_id = user_id if chat_id is None else chat_id
        message = {
            "message_id": next(self._message_ids),
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": chat_type, **({"title": "group"} if chat_type != "private" else {"first_name": "Ada"})},
            "from": self.user(user_id),
            **({"text": text} if text else {}),
            **extra,
        }
        if text.startswith("/"):
            message["entities"] = [{"type": "bot_command", "offset": 0, "length": len(text.split(" ")[0])}]
        return message

    def send_user_message(
        self, user_id: int, text: str, *, chat_id: int | None = None, chat_type: str = "private", edited: bool = False, **extra: Any
    ) -> dict[str, Any]:
        """A user writes to the bot (in a private chat by default); the bot gets it from getUpdates."""
        message = self.user_message(user_id, text, chat_id=chat_id, chat_type=chat_type, **extra)
        self.push({"edited_message" if edited else "message": message})
        return message

    def send_voice_note(
        self, user_id: int, audio: bytes, *, duration: int, chat_id: int | None = None, chat_type: str = "private", **extra: Any
    ) -> dict[str, Any]:
        """A user sends a voice note (Ogg/Opus as Telegram records them); its file is served by getFile."""
        file_id = f"voice{next(self._update_ids)}"
        self.files[file_id] = audio
        voice = {
            "file_id": file_id,
            "file_unique_id": f"u{file_id}",
            "duration": duration,
            "mime_type": "audio/ogg",
            "file_size": len(audio),
        }
        return self.send_user_message(user_id, "", chat_id=chat_id, chat_type=chat_type, voice=voice, **extra)

    def new_update_id(self) -> int:
        return next(self._update_ids)

    @staticmethod
    def post_webhook(url: str, update: dict[str, Any], secret: str | None, timeout: float = 10.0) -> int:
        """POST an update to the bot's webhook listener as Telegram does; the HTTP status."""
        import urllib.error
        import urllib.request

        headers = {"Content-Type": "application/json"}
        if secret is not None:
            headers["X-Telegram-Bot-Api-Secret-Token"] = secret
        request = urllib.request.Request(url, data=json.dumps(update).encode(), headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                return response.status
        except urllib.error.HTTPError as exc:
            return exc.code

    def press(self, user_id: int, message: dict[str, Any], data: str) -> str:
        """A user presses an inline button on ``message`` (one the bot sent)."""
        query_id = f"q{next(self._update_ids)}"
        bot_message = {
            "message_id": message["message_id"],
            "date": int(time.time()),
            "chat": {"id": message["chat_id"], "type": "private" if message["chat_id"] > 0 else "group"},
            "from": {"id": self.bot_id, "is_bot": True, "first_name": "Hermes", "username": self.username},
            "text": message["text"],
        }
        self.push(
            {"callback_query": {"id": query_id, "from": self.user(user_id), "chat_instance": "ci", "message": bot_message, "data": data}}
        )
        return query_id

    def push(self, update: dict[str, Any]) -> int:
        """Queue an update for getUpdates; returns its update id."""
        with self._cond:
            update_id = next(self._update_ids)
            self._updates.append({"update_id": update_id, **update})
            self._cond.notify_all()
        return update_id

    def sent(self, chat_id: int | None = None) -> list[dict[str, Any]]:
        """Messages the bot sent (their latest text), oldest first."""
        with self._cond:
            found = [m for m in self.messages.values() if chat_id is None or m["chat_id"] == chat_id]
        return sorted(found, key=lambda m: m["message_id"])

    def wait_for(self, predicate, timeout: float = 20.0, what: str = "a message") -> Any:
        """Wait until ``predicate()`` returns something truthy; fail with what was sent so far.

        Checked again whenever the bot calls the API; at least every 50 ms too, for facts the
        bot does not report here (rows in the store, files).
        """
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            found = predicate()
            if found:
                return found
            with self._cond:
                self._cond.wait(min(0.05, left))
        texts = [m["text"][:200] for m in self.sent()]
        raise AssertionError(f"timed out waiting for {what}; the bot sent: {texts}")

    def wait_text(self, chat_id: int, needle: str, timeout: float = 20.0) -> dict[str, Any]:
        return self.wait_for(lambda: next((m for m in self.sent(chat_id) if needle in m["text"]), None), timeout, what=repr(needle))

    def answer_for(self, query_id: str, timeout: float = 20.0) -> dict[str, Any]:
        return self.wait_for(
            lambda: next((a for a in self.callback_answers if a["callback_query_id"] == query_id), None), timeout, "a callback answer"
        )

    # -- the API --------------------------------------------------------------------------

    def handle(self, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._cond:
            self.calls.append((method, params))
            if self.fail_methods.get(method, 0) > 0:
                self.fail_methods[method] -= 1
                return 502, {"ok": False, "error_code": 502, "description": "Bad Gateway"}
        if method == "getMe":
            return 200, _ok(
                {
                    "id": self.bot_id,
                    "is_bot": True,
                    "first_name": "Hermes",
                    "username": self.username,
                    "can_join_groups": True,
                    "can_read_all_group_messages": False,
                    "supports_inline_queries": False,
                }
            )
        if method == "getUpdates":
            return self._get_updates(params)
        if method in ("sendMessage", "editMessageText"):
            return self._text(method, params)
        if method == "editMessageReplyMarkup":
            key = (int(params["chat_id"]), int(params["message_id"]))
            with self._cond:
                if key in self.messages:
                    self.messages[key]["reply_markup"] = params.get("reply_markup")
            return 200, _ok(True)
        if method == "answerCallbackQuery":
            with self._cond:
                self.callback_answers.append(params)
            return 200, _ok(True)
        if method in _UPLOADS:
            return self._upload(method, params)
        if method == "getFile":
            file_id = params["file_id"]
            if file_id not in self.files:
                return 400, _err("Bad Request: invalid file_id")
            return 200, _ok(
                {"file_id": file_id, "file_unique_id": file_id, "file_size": len(self.files[file_id]), "file_path": f"documents/{file_id}"}
            )
        return 200, _ok(True)  # sendChatAction, deleteWebhook, setMyCommands ...

    def _get_updates(self, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        offset = int(params.get("offset") or 0)
        wait = min(float(params.get("timeout") or 0), 5.0)
        with self._cond:
            # Like Telegram: a new getUpdates terminates the one in flight, which gets 409 Conflict.
            self._poll_generation += 1
            mine = self._poll_generation
            self._cond.notify_all()
            self._updates = [u for u in self._updates if u["update_id"] >= offset]
            deadline = time.monotonic() + wait
            while not self._updates and self._server is not None and time.monotonic() < deadline:
                if self._poll_generation != mine:
                    return 409, _err("Conflict: terminated by other getUpdates request; make sure that only one bot instance is running")
                self._cond.wait(deadline - time.monotonic())
            if self._poll_generation != mine:
                return 409, _err("Conflict: terminated by other getUpdates request; make sure that only one bot instance is running")
            now = time.perf_counter()
            for update in self._updates:
                self.offered.setdefault(update["update_id"], now)
            return 200, _ok(list(self._updates))

    def _text(self, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        chat_id = int(params["chat_id"])
        text = str(params.get("text", ""))
        with self._cond:
            if self.fail_chats.get(chat_id, 0) > 0:
                self.fail_chats[chat_id] -= 1
                return 400, _err("Bad Request: chat not found")
        if len(text) > 4096:
            return 400, _err("Bad Request: message is too long")
        if params.get("parse_mode") == "HTML" and self.reject_html:
            return 400, _err('Bad Request: can\'t parse entities: unsupported start tag "b" at byte offset 0')
        if params.get("parse_mode") == "HTML" and (problem := html_error(text)):
            return 400, _err(f"Bad Request: can't parse entities: {problem}")
        with self._cond:
            if method == "sendMessage":
                message_id = next(self._message_ids)
                record = {"chat_id": chat_id, "message_id": message_id, "text": text, "edits": 0}
                self.messages[(chat_id, message_id)] = record
            else:
                record = self.messages.get((chat_id, int(params["message_id"])))
                if record is None:
                    return 400, _err("Bad Request: message to edit not found")
                if record["text"] == text and record.get("reply_markup") == params.get("reply_markup"):
                    return 400, _err("Bad Request: message is not modified")
                record["text"] = text
                record["edits"] += 1
            record["parse_mode"] = params.get("parse_mode")
            record["reply_markup"] = params.get("reply_markup")
            if method == "sendMessage":  # an edit keeps the message where it is
                record["thread_id"] = params.get("message_thread_id")
            message_id = record["message_id"]
        result = {
            "message_id": message_id,
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "private" if chat_id > 0 else "group"},
            "text": text,
            "from": {"id": self.bot_id, "is_bot": True, "first_name": "Hermes"},
        }
        return 200, _ok(result)

    def _upload(self, method: str, params: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        field = _UPLOADS[method]
        sent = params.get(field)
        if not isinstance(sent, _Part):
            return 400, _err(f"Bad Request: there is no {field} in the request")
        chat_id = int(params["chat_id"])
        with self._cond:
            message_id = next(self._message_ids)
            self.uploads.append(
                {
                    "method": method,
                    "chat_id": chat_id,
                    "message_id": message_id,
                    "field": field,
                    "filename": sent.filename,
                    "mime": sent.mime,
                    "data": sent.data,
                    "caption": params.get("caption"),
                }
            )
        media = {"file_id": f"sent{message_id}", "file_unique_id": f"usent{message_id}", "file_size": len(sent.data)}
        if field in ("voice", "audio"):
            media |= {"duration": 1, "mime_type": sent.mime}
        elif field == "document":
            media |= {"file_name": sent.filename, "mime_type": sent.mime}
        result = {
            "message_id": message_id,
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "private" if chat_id > 0 else "group"},
            "from": {"id": self.bot_id, "is_bot": True, "first_name": "Hermes"},
            field: [media | {"width": 1, "height": 1}] if field == "photo" else media,
            **({"caption": params["caption"]} if params.get("caption") else {}),
        }
        return 200, _ok(result)


# Methods that upload a file, and the form field that carries it.
_UPLOADS = {"sendVoice": "voice", "sendAudio": "audio", "sendDocument": "document", "sendPhoto": "photo"}


@dataclass(frozen=True)
class _Part:
    """A file in a multipart/form-data request."""

    filename: str
    mime: str
    data: bytes


def _multipart(content_type: str, raw: bytes) -> dict[str, Any]:
    """A multipart/form-data body's fields: files as ``_Part``, the rest as form values."""
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        b"Content-Type: " + content_type.encode() + b"\r\nMIME-Version: 1.0\r\n\r\n" + raw
    )
    params: dict[str, Any] = {}
    for part in message.iter_parts() if message.is_multipart() else []:
        name = part.get_param("name", header="content-disposition")
        payload = part.get_payload(decode=True)
        data = payload if isinstance(payload, bytes) else b""
        if not isinstance(name, str):
            continue
        if part.get_filename() is not None:
            params[name] = _Part(part.get_filename() or "", part.get_content_type(), data)
        else:
            value = data.decode("utf-8")
            params[name] = value if name in _STRINGS else _maybe_json(value)
    return params


def _ok(result: Any) -> dict[str, Any]:
    return {"ok": True, "result": result}


def _err(description: str) -> dict[str, Any]:
    code = 409 if description.startswith("Conflict") else 400
    return {"ok": False, "error_code": code, "description": description}


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that went away mid-poll (the gateway stopping) is normal


class _Handler(BaseHTTPRequestHandler):
    api: FakeTelegram
    protocol_version = "HTTP/1.1"
    # Answers go out as written: with Nagle's algorithm the body, written after the headers,
    # would wait for the client's delayed ACK (~40 ms), which Telegram does not make a bot wait.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        path = unquote(urlsplit(self.path).path)
        prefix = f"/file/bot{self.api.token}/documents/"
        if path.startswith(prefix) and path[len(prefix) :] in self.api.files:
            with self.api._cond:
                self.api.file_requests.append(path[len(prefix) :])
                self.api._cond.notify_all()
            if self.api.file_gate is not None:
                self.api.file_gate.wait(60)
            data = self.api.files[path[len(prefix) :]]
            self.send_response(200)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        self._reply(404, _err("Not Found"))

    def do_POST(self) -> None:
        path = urlsplit(self.path).path
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        multipart = (self.headers.get("Content-Type") or "").startswith("multipart/form-data")
        raw = "" if multipart else body.decode("utf-8")
        prefix = f"/bot{self.api.token}/"
        if not path.startswith(prefix):
            self._reply(401, {"ok": False, "error_code": 401, "description": "Unauthorized"})
            return
        params: dict[str, Any] = {}
        if multipart:
            params = _multipart(self.headers.get("Content-Type") or "", body)
        elif "json" in (self.headers.get("Content-Type") or "") and raw:
            params = json.loads(raw)
        else:
            for key, value in parse_qsl(raw, keep_blank_values=True):
                params[key] = value if key in _STRINGS else _maybe_json(value)
        method = path[len(prefix) :]
        status, payload = self.api.handle(method, params)
        when = time.perf_counter()
        for observer in self.api.observers:
            observer(method, params, status, payload, when)
        self._reply(status, payload)
        with self.api._cond:
            self.api._cond.notify_all()  # wakes wait_for: the bot did something

    def _reply(self, status: int, payload: dict[str, Any]) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _maybe_json(value: str) -> Any:
    try:
        return json.loads(value)
    except ValueError:
        return value
