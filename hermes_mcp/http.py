"""Streamable HTTP: the SDK's app under uvicorn, behind a bearer-token gate, on loopback too.

Any local process or user can reach a loopback port, so the port alone proves nothing: every
request carries the token. The SDK checks Host and Origin (DNS rebinding) on loopback hosts.
"""

from __future__ import annotations

import hmac
import json
import logging
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from core.tokens import McpToken

__all__ = ["BearerGate", "serve_http"]

log = logging.getLogger(__name__)


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


async def serve_http(server: Any, host: str, port: int, token: McpToken) -> None:
    """Serve until interrupted; the endpoint is ``http://HOST:PORT/mcp``."""
    import anyio
    import uvicorn

    from core.tokens import TOKEN_ENV
    from hermes_mcp.resources import watch_skills

    # The SDK turns on DNS-rebinding protection (Host and Origin checks) for loopback hosts.
    app: Any = BearerGate(server.streamable_http_app(host=host), token.value)
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
