"""Resumable streams over ``hermes-mcp --http``: event ids, priming events with ``retry``, ``Last-Event-ID``
replay, and a call that outlives its dropped connection, on the wire (httpx) and through the MCP SDK client.

Resumption belongs to the handshake era (2025-11-25 and before): the 2026-07-28 protocol has no sessions
and no resumable streams, so its requests are only checked to be served as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import JSONRPCNotification, JSONRPCResponse

from core.store import SessionStore
from hermes_mcp.event_store import MAX_BYTES, MAX_EVENTS, RETRY_MS, Refused, SessionEvents
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.hermes_mcp.harness import allow_projects, data, mcp_env
from tests.hermes_mcp.test_http import http_server

BOTH = "application/json, text/event-stream"
REPLY = "Finished, although the client had gone."


class HeldModel(ScriptedOpenAIServer):
    """A model that is still working when the client's connection drops: it answers once released."""

    def __init__(self) -> None:
        super().__init__(lambda body: {"text": REPLY})
        self.release = threading.Event()

    def respond(self, handler: Any, spec: dict, body: dict) -> None:
        self.release.wait(90)
        super().respond(handler, spec, body)

    async def asked(self) -> None:
        await asyncio.to_thread(self.wait_for, lambda: self.requests, 60, "the agent's request to the model")


async def frames(response: httpx.Response) -> AsyncIterator[dict[str, str]]:
    """The SSE events of a response, each as its own fields (an id is not inherited from the one before)."""
    buffer = ""
    async for text in response.aiter_text():
        buffer += text
        normal = buffer.replace("\r\n", "\n")
        *blocks, buffer = normal.split("\n\n")
        for block in blocks:
            fields: dict[str, str] = {}
            for line in block.split("\n"):
                if line and not line.startswith(":"):
                    name, _, value = line.partition(":")
                    fields[name] = value[1:] if value.startswith(" ") else value
            if fields:
                yield fields


def payload(frame: dict[str, str]) -> dict:
    return json.loads(frame["data"])


def priming(frame: dict[str, str]) -> bool:
    return bool(frame.get("id")) and frame.get("data") == ""


@dataclass
class Wire:
    """A client session spoken by hand: the raw requests and SSE events."""

    url: str
    token: str
    http: httpx.AsyncClient
    version: str = "2025-11-25"
    session: str = ""

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        headers = {"authorization": f"Bearer {self.token}", "accept": BOTH}
        if self.session:
            headers |= {"mcp-session-id": self.session, "mcp-protocol-version": self.version}
        return headers | (extra or {})

    @contextlib.asynccontextmanager
    async def stream(self, method: str, body: dict | None = None, headers: dict | None = None) -> AsyncIterator[httpx.Response]:
        async with self.http.stream(method, self.url, json=body, headers=self.headers(headers)) as response:
            yield response

    async def call(self, request_id: int, method: str, params: dict | None = None, headers: dict | None = None) -> list[dict]:
        """POST a request and read its stream to its end (the response ends it)."""
        body = {"jsonrpc": "2.0", "id": request_id, "method": method, **({"params": params} if params is not None else {})}
        async with self.stream("POST", body, headers) as response:
            assert response.status_code == 200, (await response.aread()).decode()
            got = [frame async for frame in frames(response)]
        if method == "initialize":
            self.session = response.headers["mcp-session-id"]
        return got

    async def open(self) -> list[dict]:
        params = {"protocolVersion": self.version, "capabilities": {}, "clientInfo": {"name": "wire", "version": "1"}}
        opened = await self.call(1, "initialize", params)
        async with self.stream("POST", {"jsonrpc": "2.0", "method": "notifications/initialized"}) as response:
            assert response.status_code == 202
        return opened

    async def resume(self, last_event_id: str) -> list[dict]:
        """GET with Last-Event-ID, read to the end of the stream."""
        async with self.stream("GET", headers={"accept": "text/event-stream", "last-event-id": last_event_id}) as response:
            assert response.status_code == 200, (await response.aread()).decode()
            return [frame async for frame in frames(response)]


@contextlib.asynccontextmanager
async def wire(url: str, token: str, version: str = "2025-11-25") -> AsyncIterator[Wire]:
    async with httpx.AsyncClient(timeout=httpx.Timeout(10, read=90)) as http:
        session = Wire(url, token, http, version)
        await session.open()
        yield session


@pytest.fixture
def project(tmp_path, hermes_home) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    allow_projects(hermes_home, root)
    return root


def _ask(project: Path) -> dict:
    return {"name": "ask", "arguments": {"prompt": "tidy the project", "cwd": str(project), "mode": "read-only"}}


@pytest.mark.parametrize("version, primed", [("2025-11-25", True), ("2025-06-18", False)])
async def test_every_event_has_an_id_and_streams_open_with_a_priming_event_from_2025_11_25(hermes_home, version, primed):
    """From 2025-11-25 a stream opens with an event of an id, empty data and `retry` (older clients
    cannot read empty data, so they get none); every message carries an id of its own."""
    with http_server(mcp_env(hermes_home)) as served:
        async with httpx.AsyncClient(timeout=30) as http:
            session = Wire(served.url, served.token, http, version)
            opened = await session.open()
            listed = await session.call(2, "tools/list")
            older = await session.call(3, "ping", headers={"mcp-protocol-version": "2025-03-26"})
            async with session.stream("GET", headers={"accept": "text/event-stream"}) as response:
                first = await anext(frames(response)) if primed else None
    for stream in (opened, listed, older):
        messages = [f for f in stream if f.get("data")]
        assert len(messages) == 1 and messages[0]["event"] == "message" and messages[0]["id"]
        if primed:
            # The session negotiated 2025-11-25, so a request naming an older version is primed too.
            assert len(stream) == 2 and priming(stream[0]) and stream[0]["retry"] == str(RETRY_MS)
        else:
            assert not [f for f in stream if priming(f) or "retry" in f]
    assert payload(opened[-1])["result"]["protocolVersion"] == version
    assert payload(listed[-1])["id"] == 2 and payload(older[-1]) == {"jsonrpc": "2.0", "id": 3, "result": {}}
    ids = [f["id"] for f in [*opened, *listed, *older]]
    assert len(set(ids)) == len(ids)
    if primed:
        assert first is not None and priming(first) and first["retry"] == str(RETRY_MS)  # the standalone GET stream too
        assert first["id"] not in ids


async def test_last_event_id_replays_what_followed_it_and_nothing_before(hermes_home):
    with http_server(mcp_env(hermes_home)) as served:
        async with wire(served.url, served.token) as session:
            primer, answer = await session.call(2, "tools/call", {"name": "sessions_search", "arguments": {"query": "flux"}})
            after_primer = await session.resume(primer["id"])
            after_answer = await session.resume(answer["id"])
            later = await session.call(3, "ping")
    assert priming(primer) and payload(answer)["id"] == 2
    assert after_primer == [answer], "the answer again, with its own id, and the stream ends"
    assert after_answer == [], "nothing follows the answer: the stream ends at once"
    assert payload(later[-1])["id"] == 3, "the session goes on"


@pytest.mark.parametrize("resumed", ["while the call still runs", "after the call has finished"])
async def test_a_call_whose_connection_drops_finishes_and_its_result_comes_on_the_resumed_stream(hermes_home, project, resumed):
    with HeldModel() as model, http_server(mcp_env(hermes_home, model.base_url)) as served:
        try:
            async with wire(served.url, served.token) as session:
                body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": _ask(project)}
                async with session.stream("POST", body) as response:
                    primer = await anext(frames(response))
                    await model.asked()
                # The connection is gone (the answer was not read to its end); the agent is still working.
                if resumed == "after the call has finished":
                    model.release.set()
                    await _replied(hermes_home)
                else:
                    asyncio.get_running_loop().call_later(0.5, model.release.set)
                got = await session.resume(primer["id"])
        finally:
            model.release.set()
    assert priming(primer)
    assert len(got) == 1 and got[0]["id"] and got[0]["id"] != primer["id"], got
    answer = payload(got[0])
    assert answer["id"] == 7, answer
    view = answer["result"]["structuredContent"]
    assert view["status"] == "done" and view["reply"] == REPLY


async def _replied(home: Path) -> None:
    """Until the agent's reply is in the store (the turn ended while nobody was connected)."""
    for _ in range(600):
        async with SessionStore.open(home / "state.db") as store:
            sessions = await store.list_sessions()
            if sessions and [m.message.kind for m in await store.messages(sessions[0].id)][-1:] == ["assistant"]:
                return
        await asyncio.sleep(0.05)
    raise AssertionError("the agent's reply never reached the store")


async def test_a_resume_that_cannot_be_served_is_refused_with_the_reason(hermes_home):
    """A session keeps its newest MAX_EVENTS events: an older id gets 410 and says so; an id that is
    not one of this session's gets 400."""
    with http_server(mcp_env(hermes_home)) as served:
        async with wire(served.url, served.token) as session, wire(served.url, served.token) as other:
            primer, _ = await session.call(2, "ping")
            elsewhere, _ = await other.call(2, "ping")
            for n in range(MAX_EVENTS // 2 + 1):  # two events each: a priming event and the answer
                await session.call(100 + n, "ping")
            headers = {"accept": "text/event-stream"}
            replies = {}
            for name, last in {"evicted": primer["id"], "other session": elsewhere["id"], "garbage": "12"}.items():
                async with session.stream("GET", headers=headers | {"last-event-id": last}) as response:
                    replies[name] = (response.status_code, json.loads(await response.aread()))
            recent = (await session.call(9999, "ping"))[0]
            assert await session.resume(recent["id"]) != [], "a recent id still resumes"
    status, body = replies["evicted"]
    assert status == 410 and f"newest {MAX_EVENTS} events" in body["error"]["message"]
    assert "repeat the request" in body["error"]["message"]
    for name in ("other session", "garbage"):
        status, body = replies[name]
        assert status == 400 and "not the id of an event sent in this session" in body["error"]["message"], name


async def test_a_notification_stream_resumed_after_its_events_were_evicted_starts_afresh(hermes_home):
    """What the standalone GET stream missed is gone, but the client keeps getting notifications: the
    resume is answered as a new stream (primed again) rather than refused."""
    with http_server(mcp_env(hermes_home)) as served:
        async with wire(served.url, served.token) as session:
            await session.call(2, "resources/list")
            async with session.stream("GET", headers={"accept": "text/event-stream"}) as response:
                events = frames(response)
                primer = await anext(events)
                _skill(hermes_home / "skills", "fresh", "Brand new")
                notice = await anext(events)
            for n in range(MAX_EVENTS // 2 + 1):
                await session.call(100 + n, "ping")
            headers = {"accept": "text/event-stream", "last-event-id": primer["id"]}
            async with session.stream("GET", headers=headers) as again:
                status = again.status_code
                fresh = await anext(frames(again))
    assert priming(primer) and payload(notice)["method"].endswith("/list_changed")
    assert status == 200 and priming(fresh) and fresh["id"] not in (primer["id"], notice["id"])
    assert "starts afresh" in (hermes_home / "logs" / "mcp.log").read_text()


def _skill(root: Path, name: str, description: str) -> None:
    path = root / name / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n\nDo the thing.\n")


async def test_closing_the_session_ends_a_resumed_stream(hermes_home, project):
    with HeldModel() as model, http_server(mcp_env(hermes_home, model.base_url)) as served:
        try:
            async with wire(served.url, served.token) as session:
                body = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": _ask(project)}
                async with session.stream("POST", body) as response:
                    primer = await anext(frames(response))
                    await model.asked()
                headers = {"accept": "text/event-stream", "last-event-id": primer["id"]}
                async with session.stream("GET", headers=headers) as resumed:
                    assert resumed.status_code == 200
                    async with session.stream("DELETE") as closed:
                        assert closed.status_code == 200
                    got = [frame async for frame in frames(resumed)]
        finally:
            model.release.set()
    assert [payload(f) for f in got if f.get("data")] == [], "nothing came, and the stream ended with the session"


class CuttableProxy:
    """A TCP relay on 127.0.0.1 in front of the server: ``cut()`` drops every connection open through it,
    as a network that fails does. It keeps what the client sent."""

    def __init__(self, target: str) -> None:
        self._target = httpx.URL(target)
        self._server: asyncio.Server | None = None
        self._open: list[asyncio.StreamWriter] = []
        self.sent = bytearray()

    @property
    def url(self) -> str:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        return str(self._target.copy_with(port=port))

    async def __aenter__(self) -> CuttableProxy:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.cut()
        assert self._server is not None
        self._server.close()

    def cut(self) -> None:
        for writer in self._open:
            writer.transport.abort()
        self._open.clear()

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(self._target.host, self._target.port)
        self._open += [writer, up_writer]

        async def pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter, keep: bool) -> None:
            with contextlib.suppress(OSError, asyncio.IncompleteReadError):
                while chunk := await source.read(65536):
                    if keep:
                        self.sent += chunk
                    sink.write(chunk)
                    await sink.drain()
            sink.transport.abort()

        await asyncio.gather(pump(reader, up_writer, True), pump(up_reader, writer, False))


async def test_the_sdk_client_resumes_a_dropped_call_and_gets_its_result(hermes_home, project):
    with HeldModel() as model, http_server(mcp_env(hermes_home, model.base_url)) as served:
        try:
            async with CuttableProxy(served.url) as proxy:
                async with httpx2.AsyncClient(headers={"authorization": f"Bearer {served.token}"}) as http:
                    async with Client(streamable_http_client(proxy.url, http_client=http), mode="legacy", cache=None) as client:
                        call = asyncio.create_task(client.call_tool("ask", _ask(project)["arguments"]))
                        await model.asked()
                        proxy.cut()
                        model.release.set()
                        view = data(await call)
                        after = await client.list_tools()
        finally:
            model.release.set()
    # The model answered only after every connection was cut: the answer came on a resumed stream.
    assert view["status"] == "done" and view["reply"] == REPLY
    assert b"last-event-id:" in bytes(proxy.sent).lower(), "the client came back with Last-Event-ID"
    assert "ask" in [t.name for t in after.tools], "the session goes on"


async def test_a_stream_the_server_closes_mid_call_is_resumed(hermes_home):
    """The conformance suite's tool (only with HERMES_MCP_CONFORMANCE=1) closes its own stream mid-call;
    the SDK client reconnects with Last-Event-ID after `retry` and gets the answer."""
    with http_server(mcp_env(hermes_home, extra={"HERMES_MCP_CONFORMANCE": "1"})) as served:
        async with httpx2.AsyncClient(headers={"authorization": f"Bearer {served.token}"}) as http:
            async with Client(streamable_http_client(served.url, http_client=http), mode="legacy", cache=None) as client:
                tools = [t.name for t in (await client.list_tools()).tools]
                result = await client.call_tool("test_reconnection", {})
        async with wire(served.url, served.token) as session:
            primer, *rest = await session.call(2, "tools/call", {"name": "test_reconnection", "arguments": {}})
            replayed = await session.resume(primer["id"])
    assert "test_reconnection" in tools
    assert not result.is_error and result.content[0].text == "Reconnection test completed"
    assert priming(primer) and rest == [], "the server closed the call's stream before answering"
    assert payload(replayed[-1])["result"]["content"][0]["text"] == "Reconnection test completed"
    assert "HERMES_MCP_CONFORMANCE is set" in served.stderr


async def test_the_2026_era_is_served_without_sessions_or_event_ids(hermes_home):
    with http_server(mcp_env(hermes_home)) as served:
        async with httpx2.AsyncClient(headers={"authorization": f"Bearer {served.token}"}) as http:
            async with Client(streamable_http_client(served.url, http_client=http), mode="2026-07-28", cache=None) as client:
                found = data(await client.call_tool("sessions_search", {"query": "anything"}))
                tools = [t.name for t in (await client.list_tools()).tools]
    assert found == {"hits": [], "next_cursor": None}
    assert "test_reconnection" not in tools, "the conformance suite's tool only with HERMES_MCP_CONFORMANCE=1"
    assert "outside any session" not in (hermes_home / "logs" / "mcp.log").read_text()


# The store itself: its bounds, and who serves a stream that is resumed twice.


def _note(n: int, size: int = 10) -> JSONRPCNotification:
    return JSONRPCNotification(jsonrpc="2.0", method="notifications/message", params={"n": n, "data": "x" * size})


async def _followed(events: SessionEvents, last_event_id: str) -> list[Any]:
    """What a client resuming from ``last_event_id`` of the notification stream gets of what is kept."""
    stream, seq = events.locate(last_event_id)
    got: list[Any] = []

    async def send(event: Any) -> None:
        got.append(event)

    task = asyncio.ensure_future(events.follow(stream, seq, send))
    await asyncio.sleep(0)  # it sends what is kept, then waits for more
    events.retire(stream.key)  # as a fresh GET would: it stops
    await asyncio.wait_for(task, 5)
    return got


@pytest.mark.parametrize("count, size, keeps", [(MAX_EVENTS + 5, 10, MAX_EVENTS), (5, MAX_BYTES // 3, 2)], ids=["by events", "by bytes"])
async def test_a_session_keeps_its_newest_events_within_both_bounds(count, size, keeps):
    events = SessionEvents()
    ids = [events.store("_GET_stream", _note(n, size)) for n in range(count)]
    kept = await _followed(events, ids[-keeps - 1])  # the newest evicted: all that followed it is kept
    assert [e.message.params["n"] for e in kept] == list(range(count))[-keeps:]
    assert [e.event_id for e in kept] == ids[-keeps:]
    assert sum(len(e.message.model_dump_json(by_alias=True, exclude_unset=True)) for e in kept) <= MAX_BYTES
    for gone in (ids[0], ids[-keeps - 2]):
        with pytest.raises(Refused) as refused:
            events.locate(gone)
        assert refused.value.status == 410 and refused.value.stream == "_GET_stream"
    huge = events.store("7", JSONRPCResponse(jsonrpc="2.0", id=7, result={"text": "y" * (MAX_BYTES + 1)}))
    assert events.locate(huge)[0].done, "the newest event is kept however large"
    with pytest.raises(Refused):
        events.locate(ids[-2])  # what followed it went to make room


async def test_a_stream_resumed_twice_is_served_by_the_newer_connection():
    events = SessionEvents()
    primer = events.store("7", None)
    first: list[Any] = []
    second: list[Any] = []

    async def to(into: list[Any]) -> Any:
        async def send(event: Any) -> None:
            into.append(event)

        return send

    stream, seq = events.locate(primer)
    older = asyncio.ensure_future(events.follow(stream, seq, await to(first)))
    await asyncio.sleep(0)
    newer = asyncio.ensure_future(events.follow(stream, seq, await to(second)))
    await asyncio.sleep(0)
    events.store("7", _note(1))
    await asyncio.wait_for(older, 5)  # the older connection stops serving the stream
    events.store("7", JSONRPCResponse(jsonrpc="2.0", id=7, result={}))
    await asyncio.wait_for(newer, 5)  # the answer ends the stream
    assert first == []
    assert [type(e.message).__name__ for e in second] == ["JSONRPCNotification", "JSONRPCResponse"]


async def test_a_request_id_used_again_after_its_answer_is_a_stream_of_its_own():
    """JSON-RPC ids need only be unique among requests in flight: a client may use 1 again once it
    has its answer, and resuming the second request waits for the second answer."""
    events = SessionEvents()
    events.store("1", None)
    events.store("1", JSONRPCResponse(jsonrpc="2.0", id=1, result={"n": 1}))
    again = events.store("1", None)
    stream, seq = events.locate(again)
    got: list[Any] = []

    async def send(event: Any) -> None:
        got.append(event)

    follower = asyncio.ensure_future(events.follow(stream, seq, send))
    await asyncio.sleep(0)
    assert not follower.done(), "the second request has no answer yet"
    events.store("1", JSONRPCResponse(jsonrpc="2.0", id=1, result={"n": 2}))
    await asyncio.wait_for(follower, 5)
    assert [e.message.result for e in got] == [{"n": 2}]
