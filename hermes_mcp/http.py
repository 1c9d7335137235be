"""Streamable HTTP: the SDK's app under uvicorn, behind a bearer-token gate when a token is set."""

from __future__ import annotations

import hmac
import json
import logging
import sys
from typing import Any

__all__ = ["BearerGate", "serve_http"]

log = logging.getLogger(__name__)


class BearerGate:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``."""

    def __init__(self, app: Any, token: str) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)  # lifespan events pass through
            return
        given = next((value for key, value in scope.get("headers", []) if key == b"authorization"), b"")
        # compare_digest: the comparison takes as long whatever the first wrong byte is.
        if hmac.compare_digest(given, self._expected):
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


async def serve_http(server: Any, host: str, port: int, token: str | None) -> None:
    """Serve until interrupted; the endpoint is ``http://HOST:PORT/mcp``."""
    import anyio
    import uvicorn

    from hermes_mcp.resources import watch_skills

    # The SDK turns on DNS-rebinding protection (Host and Origin checks) for loopback hosts.
    app: Any = server.streamable_http_app(host=host)
    if token is not None:
        app = BearerGate(app, token)
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on", access_log=False)
    web = uvicorn.Server(config)

    async def announce() -> None:
        while not web.started:
            await anyio.sleep(0.02)
        bound = web.servers[0].sockets[0].getsockname() if web.servers else (host, port)
        shown = f"[{bound[0]}]" if ":" in str(bound[0]) else bound[0]
        # stderr, for people and for tests that asked for port 0; logs get it too.
        print(f"hermes-mcp: serving MCP at http://{shown}:{bound[1]}/mcp", file=sys.stderr, flush=True)
        log.info("serving MCP at http://%s:%s/mcp (token %s)", shown, bound[1], "required" if token else "off")

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(watch_skills, server.runtime, server.notifier)
            group.start_soon(announce)
            await web.serve()
            group.cancel_scope.cancel()
    finally:
        await server.runtime.aclose()
