"""Early answers to a client's first listings, given while the MCP SDK is still loading.

Clients list tools, prompts and resources right after the handshake (or, in the 2026-07-28
era, as their first requests), and show the server as starting until they have the answers.
The SDK and the server take about half a second to load, so ``hermes-mcp`` reads on while
they load and answers those requests itself, with the bytes the SDK would send:

- answers that depend only on the installed code (``tools/list``, ``resources/templates/list``,
  ``server/discover``) are the SDK's own, kept from an earlier start in the state home's
  ``cache/mcp-listing.json`` under a key naming the code (this package's files, the SDK and
  pydantic, the version, the command-line options). The first start after an install or an
  upgrade lets the SDK answer and keeps its answer for the next;
- ``prompts/list`` and ``resources/list`` (skills, memory files, recent sessions) are built
  here from the same sources the server reads, in the SDK's wire form: keys in its order
  (alphabetical, ``_meta`` last), compact JSON, the 2026-07-28 era's ``resultType``,
  cache hints and ``serverInfo`` stamp.

Every line read early is handed to the SDK too, in order, as ``initialize`` is: its state is
as if it had answered, and its answers to the requests answered early are not sent but
compared. When one differs, the difference is logged; the kept answer is replaced by the
SDK's, and for prompts or resources a handshake-era client is told both lists changed, so it
lists again. A test compares both paths byte for byte.

The early path stops at the first message that it does not answer itself (a tool call, a
ping, a listing not kept yet, anything unusual) or once the SDK is ready; the SDK answers
from there on.

Standard library only at import; ``core.learning`` is imported when prompts or resources
are first listed.
"""

from __future__ import annotations

import io
import json
import logging
import os
import select
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from core.state_home import home_path
from hermes_mcp import handshake
from hermes_mcp.stdio import Lines, Writer

if TYPE_CHECKING:
    from pathlib import Path

__all__ = ["CACHE_FILE", "LISTINGS", "MODERN_VERSIONS", "Early", "EarlyInput", "EarlyLines", "EarlyWriter", "snapshot_path"]

log = logging.getLogger(__name__)

CACHE_FILE = "mcp-listing.json"
# Answers that depend only on the code: kept from the SDK's own answer at an earlier start.
KEPT = ("tools/list", "resources/templates/list", "server/discover")
# Answers built here from the home's skills, memory and sessions.
BUILT = ("prompts/list", "resources/list")
LISTINGS = KEPT + BUILT
# The SDK's mcp_types.version.MODERN_PROTOCOL_VERSIONS (a test keeps them equal).
MODERN_VERSIONS = ("2026-07-28",)
PROTOCOL_VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
CLIENT_INFO_KEY = "io.modelcontextprotocol/clientInfo"
CLIENT_CAPABILITIES_KEY = "io.modelcontextprotocol/clientCapabilities"
LOG_LEVEL_KEY = "io.modelcontextprotocol/logLevel"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
# What the 2026-07-28 era's listings carry besides the list (the SDK's defaults: no server-wide hint).
CACHE_HINTS = {"cacheScope": "private", "ttlMs": 0}
# Libraries whose installed files shape the SDK's answers.
LIBRARIES = ("mcp", "mcp_types", "pydantic", "pydantic_core")

# hermes_mcp.resources: what the server lists (the byte-identity test keeps these in step).
MARKDOWN = "text/markdown"
RECENT_SESSIONS = 20
SESSIONS_INDEX = {
    "description": "The most recent conversations from every surface",
    "mimeType": MARKDOWN,
    "name": "sessions",
    "title": "Recent sessions",
    "uri": "hermes://sessions",
}
SKILL_ARGUMENT = {"description": "what to apply the skill to", "name": "task", "required": False}

# Longest line the early path reads (its messages are small); a longer one is left to the SDK.
EARLY_LINE = 1024 * 1024
# Lines looked at after the early path stopped, for listings whose answers are not kept yet.
OBSERVED_LINES = 32
_CHANGED = {"prompts/list": "notifications/prompts/list_changed", "resources/list": "notifications/resources/list_changed"}


def snapshot_path() -> Path:
    """Where answers kept from an earlier start live: ``cache/mcp-listing.json`` in the state home."""
    from pathlib import Path

    return Path(home_path()) / "cache" / CACHE_FILE


def _stamp(path: str) -> list[Any]:
    try:
        info = os.stat(path)
    except OSError:
        return [path, None]
    return [path, info.st_mtime_ns, info.st_size]


def code_key(options: dict[str, bool]) -> str:
    """A name for the code that shapes the kept answers: change any of it and they are not used."""
    import hashlib
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    parts: list[Any] = [handshake.server_version(), sorted(options.items())]
    parts += [_stamp(os.path.join(here, name)) for name in sorted(os.listdir(here)) if name.endswith(".py")]
    for library in LIBRARIES:
        spec = importlib.util.find_spec(library)
        parts.append(_stamp(spec.origin) if spec is not None and spec.origin else [library, None])
    return hashlib.sha256(json.dumps(parts).encode()).hexdigest()


class Snapshot:
    """Answers kept from the SDK, by method and protocol version, for one version of the code."""

    def __init__(self, path: Path, key: str) -> None:
        self.path = path
        self.key = key
        self.answers: dict[str, dict[str, str]] = {}
        try:
            kept = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        if isinstance(kept, dict) and kept.get("key") == key and isinstance(kept.get("answers"), dict):
            self.answers = kept["answers"]

    def get(self, method: str, version: str) -> str | None:
        found = self.answers.get(method, {}).get(version)
        return found if isinstance(found, str) else None

    def keep(self, method: str, version: str, result: str) -> None:
        """Keep the SDK's answer (the result's JSON text) for the next start."""
        if self.get(method, version) == result:
            return
        self.answers.setdefault(method, {})[version] = result
        try:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            draft = self.path.with_name(f".{self.path.name}.{os.getpid()}")
            draft.write_text(json.dumps({"key": self.key, "answers": self.answers}, ensure_ascii=False), encoding="utf-8")
            os.replace(draft, self.path)
        except OSError:
            log.debug("could not keep the listing for the next start", exc_info=True)


def _envelope(request_id: Any) -> str:
    return '{"jsonrpc":"2.0","id":' + json.dumps(request_id, ensure_ascii=False) + ',"result":'


def response_line(request_id: Any, result: str) -> bytes:
    """The JSON-RPC response line the SDK writes for this result text."""
    return (_envelope(request_id) + result + "}\n").encode("utf-8")


def result_text(line: str, request_id: Any) -> str | None:
    """The result's JSON text in a response line the SDK wrote, or None when it is not one."""
    head = _envelope(request_id)
    if not (line.startswith(head) and line.endswith("}\n")):
        return None
    return line[len(head) : -2]


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _sorted(value[key]) for key in sorted(value)}
    if isinstance(value, list):
        return [_sorted(item) for item in value]
    return value


def _dump(result: dict[str, Any], version: str) -> str:
    """A result in the SDK's wire form for ``version``."""
    if version in MODERN_VERSIONS:
        body = _sorted({**result, **CACHE_HINTS, "resultType": "complete"})
        info = {"name": handshake.SERVER_NAME, "title": handshake.SERVER_TITLE, "version": handshake.server_version()}
        body["_meta"] = {SERVER_INFO_KEY: info}
    else:
        body = _sorted(result)
    return json.dumps(body, ensure_ascii=False, separators=(",", ":"))


def _iso(timestamp: float) -> str:
    """hermes_mcp.views.iso."""
    import datetime

    return datetime.datetime.fromtimestamp(timestamp, datetime.UTC).isoformat(timespec="seconds")


def _skills() -> list[Any]:
    from pathlib import Path

    from core.learning import skills

    return skills.discover([Path.cwd()])  # the projects a new server shows: its own cwd


def _sessions() -> list[tuple[str, str | None, str, str, float]]:
    """The most recently updated sessions, as the store lists them (read-only; none without a store)."""
    import sqlite3
    from pathlib import Path

    path = Path(home_path()) / "state.db"
    if not path.exists():
        return []
    conn = sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True, timeout=1.0)
    try:
        rows = conn.execute(
            "SELECT id, title, cwd, surface, updated_at FROM sessions ORDER BY updated_at DESC, id DESC LIMIT ?", (RECENT_SESSIONS,)
        ).fetchall()
    finally:
        conn.close()
    return [tuple(row) for row in rows]


def prompts_result() -> dict[str, Any]:
    """``prompts/list``: every skill as a prompt (hermes_mcp.resources.skill_prompts)."""
    return {
        "prompts": [
            {
                "arguments": [dict(SKILL_ARGUMENT)],
                "description": skill.description or f"Use the {skill.name} skill",
                "name": skill.name,
                "title": f"Skill: {skill.name}",
            }
            for skill in _skills()
        ]
    }


def resources_result() -> dict[str, Any]:
    """``resources/list``: the sessions index, then each skill, memory file and recent session
    (hermes_mcp.resources.dynamic_resources)."""
    from core.learning import memory

    out: list[dict[str, Any]] = [dict(SESSIONS_INDEX)]
    for skill in _skills():
        entry = {
            "mimeType": MARKDOWN,
            "name": f"skill-{skill.name}",
            "title": f"Skill: {skill.name}",
            "uri": f"hermes://skills/{skill.name}",
        }
        if skill.description:
            entry["description"] = skill.description
        out.append(entry)
    for kind, name in memory.FILES.items():
        out.append(
            {"mimeType": MARKDOWN, "name": f"memory-{kind}", "title": f"Memory: {memory.LABELS[kind]}", "uri": f"hermes://memory/{name}"}
        )
    for session_id, title, cwd, surface, updated in _sessions():
        out.append(
            {
                "description": f"{cwd} ({surface}, {_iso(updated)})",
                "mimeType": MARKDOWN,
                "name": f"session-{session_id[:8]}",
                "title": title or f"Session {session_id[:8]}",
                "uri": f"hermes://sessions/{session_id}",
            }
        )
    return {"resources": out}


_BUILDERS = {"prompts/list": prompts_result, "resources/list": resources_result}


class Early:
    """The early path over one stdio connection: which era it speaks, what it answered.

    ``take`` is given each line read before the SDK serves, and says what to write back (or
    nothing) and whether to read on. Whatever it is given is handed to the SDK afterwards.
    """

    def __init__(self, options: dict[str, bool]) -> None:
        self._options = options
        self._snapshot: Snapshot | None = None
        self.version: str | None = None  # the connection's protocol version, once known
        self.initialize_id: int | str | None = None
        # Requests answered early: id -> (method, version, the line written).
        self.answered: dict[Any, tuple[str, str, bytes]] = {}
        # A request for a kept answer the SDK answers this time: id -> (method, version).
        self.awaited: dict[Any, tuple[str, str]] = {}
        self._observed = 0
        self._seen: set[Any] = set()

    @property
    def snapshot(self) -> Snapshot:
        if self._snapshot is None:
            self._snapshot = Snapshot(snapshot_path(), code_key(self._options))
        return self._snapshot

    def take(self, line: bytes | bytearray) -> tuple[bytes | None, bool]:
        """(the answer to write, or None; whether to read on early)."""
        try:
            message = json.loads(line)
        except (ValueError, UnicodeDecodeError):
            return None, False
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            return None, False
        method = message.get("method")
        if "id" not in message:
            # A notification (notifications/initialized, ...): the SDK takes it in turn.
            return None, self.version is not None and isinstance(method, str)
        if self.version is None:
            return self._open(line, message)
        return self._listing(message)

    def _open(self, line: bytes | bytearray, message: dict[str, Any]) -> tuple[bytes | None, bool]:
        """The first request decides the era, as in the SDK."""
        if message.get("method") == "initialize":
            answer = handshake.initialize_answer(line)
            if answer is None:
                return None, False
            requested = message["params"]["protocolVersion"]
            self.version = requested if requested in handshake.HANDSHAKE_VERSIONS else handshake.LATEST_HANDSHAKE_VERSION
            self.initialize_id = handshake.initialize_request_id(line)
            return answer, True
        version = _modern_version(message.get("params"))
        if version is None:
            return None, False
        self.version = version
        return self._listing(message)

    def _eligible(self, message: dict[str, Any]) -> tuple[str, Any] | None:
        """(method, id) of a listing request in this connection's era, with a fresh id; else None."""
        method = message.get("method")
        request_id = message.get("id")
        version = self.version
        if version is None or method not in LISTINGS or isinstance(request_id, bool) or not isinstance(request_id, (int, str)):
            return None
        if request_id in self.answered or request_id in self.awaited or request_id == self.initialize_id:
            return None  # a reused id: the SDK's own answer to it must go out
        modern = version in MODERN_VERSIONS
        if not _plain_params(message.get("params"), modern) or (modern and _modern_version(message.get("params")) != version):
            return None
        if method == "server/discover" and not modern:
            return None
        return method, request_id

    def _listing(self, message: dict[str, Any]) -> tuple[bytes | None, bool]:
        eligible = self._eligible(message)
        if eligible is None:
            return None, False
        method, request_id = eligible
        version = self.version
        assert version is not None
        if method in KEPT:
            result = self.snapshot.get(method, version)
            if result is None:
                # The first start of this code: the SDK answers, and its answer is kept for the next.
                # Reading on could wait for the client's next message while it waits for this answer.
                self.awaited[request_id] = (method, version)
                return None, False
        else:
            try:
                result = _dump(_BUILDERS[method](), version)
            except Exception:
                log.debug("no early %s; the SDK answers it", method, exc_info=True)
                return None, False
        answer = response_line(request_id, result)
        self.answered[request_id] = (method, version, answer)
        return answer, True

    def observe(self, line: str) -> None:
        """A line the SDK is given after the early path stopped: its answer to a listing the
        early path has not kept yet is kept too (the first few lines only)."""
        self._observed += 1
        if self._observed > OBSERVED_LINES or self.version is None:
            return
        try:
            message = json.loads(line)
        except ValueError:
            return
        if not isinstance(message, dict) or "id" not in message:
            return
        if message["id"] in self._seen:
            self.awaited.pop(message["id"], None)  # a reused id: no telling which answer is which
            return
        self._seen.add(message["id"])
        eligible = self._eligible(message)
        if eligible is not None and eligible[0] in KEPT and self.snapshot.get(eligible[0], self.version) is None:
            self.awaited[eligible[1]] = (eligible[0], self.version)

    def keep(self, method: str, version: str, result: str) -> None:
        if method in KEPT:
            self.snapshot.keep(method, version, result)


def _modern_version(params: Any) -> str | None:
    """The 2026-07-28 era's protocol version from a well-formed request envelope, else None."""
    meta = params.get("_meta") if isinstance(params, dict) else None
    if not isinstance(meta, dict) or meta.get(PROTOCOL_VERSION_KEY) not in MODERN_VERSIONS:
        return None
    if not isinstance(meta.get(CLIENT_CAPABILITIES_KEY), dict):
        return None
    info = meta.get(CLIENT_INFO_KEY)
    if info is not None and not (isinstance(info, dict) and isinstance(info.get("name"), str) and isinstance(info.get("version"), str)):
        return None
    if LOG_LEVEL_KEY in meta and meta[LOG_LEVEL_KEY] not in LOG_LEVELS:
        return None
    known = {PROTOCOL_VERSION_KEY, CLIENT_INFO_KEY, CLIENT_CAPABILITIES_KEY, LOG_LEVEL_KEY}
    return str(meta[PROTOCOL_VERSION_KEY]) if set(meta) <= known else None


def _plain_params(params: Any, modern: bool) -> bool:
    """Params with nothing but the envelope (no cursor: the lists come in one page)."""
    if params is None:
        return not modern
    if not isinstance(params, dict) or set(params) - {"_meta"}:
        return False
    meta = params.get("_meta", {})
    if not isinstance(meta, dict):
        return False
    return modern or not any(key.startswith("io.modelcontextprotocol/") for key in meta)


class EarlyWriter(Writer):
    """The protocol's output once the SDK serves: its answers to requests answered early are
    compared and dropped, and its answers to kept listings it gave itself are kept."""

    def __init__(self, fd: int, early: Early) -> None:
        super().__init__(fd, early.initialize_id)
        self._early = early
        self._told = False
        self.mismatched: list[str] = []

    async def write(self, text: str) -> None:
        early = self._early
        if (early.answered or early.awaited) and text.startswith('{"jsonrpc":"2.0","id":'):
            try:
                message = json.loads(text)
            except ValueError:
                message = None
            request_id = message.get("id") if isinstance(message, dict) and {"result", "error"} & message.keys() else None
            if request_id is not None and request_id in early.answered:
                method, version, sent = early.answered.pop(request_id)
                # An error is no answer to compare: the SDK gives one when the client has left meanwhile.
                if "result" in message and text.encode("utf-8") != sent:
                    await self._differs(method, version, text, request_id)
                return
            if request_id is not None and request_id in early.awaited:
                method, version = early.awaited.pop(request_id)
                result = result_text(text, request_id)
                if result is not None:
                    early.keep(method, version, result)
        await super().write(text)

    async def _differs(self, method: str, version: str, text: str, request_id: Any) -> None:
        self.mismatched.append(method)
        log.debug("the SDK's %s answer: %s", method, text[:4000])
        result = result_text(text, request_id)
        if method in KEPT:
            log.warning("the early %s answer was not the SDK's; the SDK's is kept for the next start", method)
            if result is not None:
                self._early.keep(method, version, result)
            return
        if version in MODERN_VERSIONS:
            log.info("the early %s answer was not the SDK's (the list changed while the server loaded)", method)
            return
        log.info("the early %s answer was not the SDK's (the list changed while the server loaded); telling the client", method)
        if not self._told:
            # Both lists show the skills: a skill that came or went changed both.
            self._told = True
            for notice in _CHANGED.values():
                await self.write_message({"jsonrpc": "2.0", "method": notice})


class EarlyLines(Lines):
    """The protocol's input once the SDK serves, shown to the early path on its way (``Early.observe``)."""

    def __init__(self, early: Early, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._early = early

    def __aiter__(self) -> AsyncIterator[str]:
        return self._observed(super().__aiter__())

    async def _observed(self, lines: AsyncIterator[str]) -> AsyncIterator[str]:
        async for line in lines:
            self._early.observe(line)
            yield line


class EarlyInput:
    """The protocol's input while the SDK loads: whole lines, until the SDK is ready.

    Unlike a blocking read, waiting for the client's next line ends as soon as the SDK is
    ready (``wake`` becomes readable), so a client that has all its answers and waits (for a
    change notice, say) is not kept from the SDK. What was read but not taken as a line goes
    to the SDK first (``reader``).
    """

    def __init__(self, fd: int, wake: int) -> None:
        self._fd = fd
        self._wake = wake
        self._pending = bytearray()
        self._ended = False

    def next_line(self) -> bytes | None:
        """The next line (``b""`` at the end of input), or None once the SDK is ready to take
        over (or the line is longer than the early path reads)."""
        while True:
            end = self._pending.find(b"\n")
            if end >= 0:
                line = bytes(self._pending[: end + 1])
                del self._pending[: end + 1]
                return line
            if self._ended:
                line = bytes(self._pending)
                self._pending.clear()
                return line
            if len(self._pending) > EARLY_LINE:
                return None
            ready, _, _ = select.select([self._fd, self._wake], [], [])
            if self._fd not in ready:
                return None
            chunk = os.read(self._fd, 1 << 16)
            if chunk:
                self._pending += chunk
            else:
                self._ended = True

    def reader(self) -> io.BufferedReader:
        """The input for the SDK: what was read here and not taken, then the rest."""
        return io.BufferedReader(_Prefixed(self._fd, bytes(self._pending), self._ended))


class _Prefixed(io.RawIOBase):
    """A raw reader over ``fd`` that first gives ``prefix``."""

    def __init__(self, fd: int, prefix: bytes, ended: bool) -> None:
        self._fd = fd
        self._prefix = prefix
        self._ended = ended

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._prefix:
            size = min(len(buffer), len(self._prefix))
            buffer[:size] = self._prefix[:size]
            self._prefix = self._prefix[size:]
            return size
        if self._ended:
            return 0
        data = os.read(self._fd, len(buffer))
        buffer[: len(data)] = data
        return len(data)
