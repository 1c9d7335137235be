"""Streamable HTTP: the SDK's app under uvicorn, behind a bearer-token gate, on loopback too.

Any local process or user can reach a loopback port, so the port alone proves nothing: every
request carries the token. The SDK checks Host and Origin (DNS rebinding) on loopback hosts.
Streams are resumable: see ``hermes_mcp.event_store``.
"""

# No `from __future__ import annotations`: the SDK reads the conformance tool's signature.
import hmac
import json
import logging
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core.tokens import McpToken

__all__ = ["CONFORMANCE_ENV", "BearerGate", "serve_http"]

log = logging.getLogger(__name__)

# Set to 1 to add the tool the official MCP conformance suite calls to test resumable streams.
CONFORMANCE_ENV = "HERMES_MCP_CONFORMANCE"


class BearerGate:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``."""

    def __init__(self, app: Any, token: str) -> None:
        self._app = app
        self._expected = token.encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._app(scope, receive, send)
            return
        if scope["type"] != "http":
            if scope["type"] == "websocket":  # not served, and never past the gate
                await send({"type": "websocket.close", "code": 1008})
            return
        given = next((value for key, value in scope.get("headers", []) if key == b"authorization"), b"")
        scheme, _, credential = given.partition(b" ")
        # compare_digest: the comparison takes as long whatever the first wrong byte is.
        if hmac.compare_digest(credential.strip(), self._expected) and scheme.lower() == b"bearer":
            await self._app(scope, receive, send)
            return
        body = json.dumps({"error": "unauthorized", "message": "send Authorization: Bearer <token>"}).encode()
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [
                    (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode()),
                    (b"www-authenticate", b'Bearer realm="hermes-mcp"'),
                ],
            }
        )
        await send({"type": "http.response.body", "body": body})


def add_conformance_tool(server: Any) -> None:
    """``test_reconnection``, which the conformance suite's server-sse-polling scenario calls (SEP-1699):
    it closes its own stream mid-call, and its result arrives on the stream the client resumes."""
    import anyio
    from mcp.server.mcpserver import Context

    async def test_reconnection(ctx: Context) -> str:
        """Close this call's SSE stream, then answer: the client gets the answer by resuming the stream."""
        await anyio.sleep(0.1)  # the priming event goes out first
        await ctx.close_sse_stream()
        await anyio.sleep(0.1)
        return "Reconnection test completed"

    server.add_tool(test_reconnection, structured_output=False)
    log.warning("%s is set: serving the conformance suite's test tool test_reconnection", CONFORMANCE_ENV)


async def serve_http(server: Any, host: str, port: int, token: "McpToken") -> None:
    """Serve until interrupted; the endpoint is ``http://HOST:PORT/mcp``."""
    import anyio
    import uvicorn

    from core.tokens import TOKEN_ENV
    from hermes_mcp.event_store import RETRY_MS, EventScope, ResumableEvents
    from hermes_mcp.resources import watch_skills

    if os.environ.get(CONFORMANCE_ENV) == "1":
        add_conformance_tool(server)
    events = ResumableEvents()
    # The SDK turns on DNS-rebinding protection (Host and Origin checks) for loopback hosts.
    inner = server.streamable_http_app(host=host, event_store=events, retry_interval=RETRY_MS)
    app: Any = BearerGate(EventScope(inner, events), token.value)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on", access_log=False)
    web = uvicorn.Server(config)

    async def announce() -> None:
        while not web.started:
            await anyio.sleep(0.02)
        bound = web.servers[0].sockets[0].getsockname() if web.servers else (host, port)
        shown = f"[{bound[0]}]" if ":" in str(bound[0]) else bound[0]
        where = f"from {TOKEN_ENV}" if token.source == "env" else f"kept in {token.path}"
        # stderr, for people and for tests that asked for port 0. The header line is the one
        # place the token is shown; logs say only that one is required (and redact it anyway).
        print(
            f"hermes-mcp: serving MCP at http://{shown}:{bound[1]}/mcp\n"
            f"hermes-mcp: every request needs this header (the token is {where}):\n"
            f"Authorization: Bearer {token.value}",
            file=sys.stderr,
            flush=True,
        )
        log.info("serving MCP at http://%s:%s/mcp; bearer token required (%s)", shown, bound[1], where)

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(watch_skills, server.runtime, server.notifier)
            group.start_soon(announce)
            await web.serve()
            group.cancel_scope.cancel()
    finally:
        await server.runtime.aclose()
