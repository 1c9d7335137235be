"""Run the official MCP conformance suite (npm ``@modelcontextprotocol/conformance``) against hermes-mcp.

The suite speaks to a server URL and sends no bearer token, while ``hermes-mcp --http`` needs one on
loopback too. ``TokenProxy`` sits between them on 127.0.0.1: it adds ``Authorization: Bearer <token>``
and passes everything else through unchanged — method, path, query, the client's own Host and Origin
(so the server's DNS-rebinding check judges what the suite sent), session and Last-Event-ID headers,
request bodies as they arrive and responses (SSE streams included) chunk by chunk. A client that drops
its stream drops the proxy's upstream stream with it, so the server sees the disconnect.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import uvicorn

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = "@modelcontextprotocol/conformance"
SUITE = ROOT / "node_modules" / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
# Node 20 lacks fs.globSync, which the suite's build imports; this module hook supplies it.
GLOBSYNC = Path(__file__).with_name("node_globsync.mjs")

# Hop-by-hop headers belong to one connection (RFC 9110 §7.6.1): each side of the proxy frames its own.
HOP_BY_HOP = {
    b"connection",
    b"keep-alive",
    b"proxy-connection",
    b"transfer-encoding",
    b"te",
    b"trailer",
    b"upgrade",
}


def node() -> str:
    """The ``node`` binary; the suite needs it, so its absence fails the test (it does not skip)."""
    path = shutil.which("node")
    assert path, "node is not on PATH: the MCP conformance suite runs on Node.js (20 or newer); install it"
    return path


def suite() -> list[str]:
    """The command line that runs the suite, installing it from package.json on first use."""
    runtime = node()
    if not SUITE.exists():
        wanted = json.loads((ROOT / "package.json").read_text()).get("devDependencies", {})
        assert PACKAGE in wanted, f"{PACKAGE} is missing from package.json devDependencies"
        proc = subprocess.run(["npm", "install", "--no-audit", "--no-fund"], cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0 and SUITE.exists(), f"npm install did not install {PACKAGE}: {proc.stderr[-2000:]}"
    return [runtime, "--import", GLOBSYNC.as_uri(), str(SUITE)]


def server_scenarios() -> list[str]:
    """Every server scenario the installed suite knows (``conformance list --server``)."""
    proc = subprocess.run([*suite(), "list", "--server"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("  - ")]


def run_scenario(url: str, scenario: str, out: Path, timeout: float = 240) -> tuple[list[dict[str, Any]], str]:
    """Run one server scenario against ``url``; its checks (from checks.json) and its console output."""
    out.mkdir(parents=True, exist_ok=True)
    command = [*suite(), "server", "--url", url, "--scenario", scenario, "--output-dir", str(out)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=out, env=_node_env())
    output = proc.stdout + proc.stderr
    found = sorted(out.glob(f"server-{scenario}-*/checks.json"))
    assert found, f"conformance {scenario} wrote no checks.json (exit {proc.returncode}):\n{output[-4000:]}"
    checks: list[dict[str, Any]] = json.loads(found[-1].read_text())
    return checks, output


def _node_env() -> dict[str, str]:
    import os

    # No proxy from the developer's environment between the suite and 127.0.0.1, no colours in the output.
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "all_proxy", "no_proxy")}
    return {**env, "NO_COLOR": "1", "FORCE_COLOR": "0"}


def summary(checks: list[dict[str, Any]]) -> dict[str, int]:
    """The suite's own counting: passed, failed, warnings (INFO checks are records, not verdicts)."""
    statuses = [c.get("status") for c in checks]
    return {"passed": statuses.count("SUCCESS"), "failed": statuses.count("FAILURE"), "warnings": statuses.count("WARNING")}


def verdicts(checks: list[dict[str, Any]]) -> str:
    """The failed and warned checks, one per line with the suite's message, for an assertion's text."""
    lines = []
    for check in checks:
        if check.get("status") in ("FAILURE", "WARNING"):
            message = check.get("errorMessage") or json.dumps(check.get("details"), default=str)[:600]
            lines.append(f"{check['status']} {check.get('id')}: {check.get('description')} -- {message}")
    return "\n".join(lines)


class TokenProxy:
    """A loopback reverse proxy that adds the bearer token; ``url`` is the endpoint to give the suite."""

    def __init__(self, upstream: str, token: str) -> None:
        self.upstream = upstream.rstrip("/")
        self._origin = httpx.URL(self.upstream).copy_with(path="/", query=None)
        self._auth = f"Bearer {token}".encode()
        self.url = ""
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.requests: list[tuple[str, str, dict[str, str]]] = []  # (method, path, headers as sent upstream)

    def __enter__(self) -> TokenProxy:
        config = uvicorn.Config(
            self._app,
            host="127.0.0.1",
            port=0,
            log_level="warning",
            lifespan="off",
            interface="asgi3",
            access_log=False,
            server_header=False,  # the server's own Server and Date headers pass through instead
            date_header=False,
            proxy_headers=False,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, name="token-proxy", daemon=True)
        self._thread.start()
        while not self._server.started:
            assert self._thread.is_alive(), "the token proxy did not start"
            threading.Event().wait(0.02)
        port = self._server.servers[0].sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}{httpx.URL(self.upstream).raw_path.decode()}"
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server and self._thread
        self._server.should_exit = True
        self._thread.join(timeout=15)

    async def _app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        assert scope["type"] == "http", scope["type"]
        sent = scope["headers"]
        headers = [(k, v) for k, v in sent if k.lower() not in HOP_BY_HOP and k.lower() != b"authorization"]
        headers.append((b"authorization", self._auth))
        has_body = any(k in (b"content-length", b"transfer-encoding") for k, _ in sent)
        if has_body and not any(k == b"content-length" for k, _ in sent):
            headers.append((b"transfer-encoding", b"chunked"))  # this hop frames the streamed body itself
        target = self._origin.copy_with(raw_path=scope["raw_path"] + (b"?" + scope["query_string"] if scope["query_string"] else b""))
        self.requests.append((scope["method"], scope["path"], {k.decode(): v.decode() for k, v in headers}))
        body_done = asyncio.Event()

        async def body() -> AsyncIterator[bytes]:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise ConnectionResetError("the client went away while sending its request")
                if message.get("body"):
                    yield message["body"]
                if not message.get("more_body"):
                    break
            body_done.set()

        if not has_body:
            body_done.set()

        async def forward() -> None:
            # trust_env=False: no proxy from the environment; timeout=None: SSE streams stay open.
            async with httpx.AsyncClient(trust_env=False, timeout=None) as client:
                request = client.build_request(scope["method"], target, content=body() if has_body else None)
                request.headers = httpx.Headers(headers)  # exactly the client's headers (its Host too), not httpx's defaults
                response = await client.send(request, stream=True)
                try:
                    kept = [(k, v) for k, v in response.headers.raw if k.lower() not in HOP_BY_HOP]
                    await send({"type": "http.response.start", "status": response.status_code, "headers": kept})
                    async for chunk in response.aiter_raw():
                        await send({"type": "http.response.body", "body": chunk, "more_body": True})
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                finally:
                    await response.aclose()

        async def client_gone() -> None:
            await body_done.wait()
            while (await receive())["type"] != "http.disconnect":
                pass

        forwarding = asyncio.ensure_future(forward())
        watching = asyncio.ensure_future(client_gone())
        try:
            await asyncio.wait({forwarding, watching}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (forwarding, watching):
                task.cancel()
            for task in (forwarding, watching):
                with contextlib.suppress(asyncio.CancelledError, ConnectionResetError):
                    await task


@contextlib.contextmanager
def token_proxy(upstream: str, token: str) -> Iterator[TokenProxy]:
    with TokenProxy(upstream, token) as proxy:
        yield proxy
