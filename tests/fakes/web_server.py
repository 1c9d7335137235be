"""Web servers on 127.0.0.1 for web_fetch and web_search: pages (HTML, PDF, JSON, text, redirects)
and the four search backends, each answering in its provider's real request and response shapes."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

__all__ = ["Page", "SearchServer", "WebServer", "pdf_bytes"]


@dataclass
class Page:
    body: bytes | str
    content_type: str = "text/html; charset=utf-8"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


Route = Page | Callable[[dict], Page]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _serve(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        request = {
            "method": self.command,
            "path": parts.path,
            "query": {k: v[0] for k, v in parse_qs(parts.query).items()},
            "headers": {k.lower(): v for k, v in self.headers.items()},
            "body": raw,
        }
        owner = self.server.owner
        with owner.lock:
            owner.requests.append(request)
        page = owner.answer(request)
        body = page.body.encode() if isinstance(page.body, str) else page.body
        self.send_response(page.status)
        self.send_header("Content-Type", page.content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in page.headers.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    do_GET = _serve
    do_POST = _serve


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    owner: WebServer


class WebServer:
    """Serves ``routes`` (path -> Page, or a function of the request) and records every request."""

    def __init__(self, routes: dict[str, Route] | None = None) -> None:
        self.routes: dict[str, Route] = dict(routes or {})
        self.requests: list[dict] = []
        self.lock = threading.Lock()
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.owner = self
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> WebServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}{path}"

    def paths(self) -> list[str]:
        with self.lock:
            return [r["path"] for r in self.requests]

    def answer(self, request: dict) -> Page:
        route = self.routes.get(request["path"])
        if route is None:
            return Page("<html><body><h1>Not found</h1></body></html>", status=404)
        return route(request) if callable(route) else route


class SearchServer(WebServer):
    """One search backend (``kind``: searxng, brave, tavily, exa) answering ``hits`` (title, url,
    snippet) in that provider's format, after checking the request as the provider would."""

    def __init__(self, kind: str, hits: list[tuple[str, str, str]], *, key: str = "") -> None:
        super().__init__()
        self.kind = kind
        self.hits = hits
        self.key = key

    def answer(self, request: dict) -> Page:
        handler = getattr(self, f"_{self.kind}")
        return handler(request)

    @staticmethod
    def _json(payload: object, status: int = 200) -> Page:
        return Page(json.dumps(payload), "application/json", status)

    def _searxng(self, request: dict) -> Page:
        if request["method"] != "GET" or request["path"] != "/search":
            return self._json({"error": "not found"}, 404)
        if request["query"].get("format") != "json":
            return Page("<html>results page</html>")  # SearXNG answers HTML without format=json
        query = request["query"].get("q", "")
        results = [
            {"url": u, "title": t, "content": s, "engine": "duckduckgo", "parsed_url": ["https", u], "score": 1.0, "category": "general"}
            for t, u, s in self.hits
        ]
        return self._json(
            {
                "query": query,
                "number_of_results": len(results),
                "results": results,
                "answers": [],
                "corrections": [],
                "infoboxes": [],
                "suggestions": [],
                "unresponsive_engines": [],
            }
        )

    def _brave(self, request: dict) -> Page:
        if request["method"] != "GET" or request["path"] != "/res/v1/web/search":
            return self._json({"type": "ErrorResponse", "error": {"code": "NOT_FOUND", "status": 404}}, 404)
        if request["headers"].get("x-subscription-token") != self.key:
            error = {
                "id": "x",
                "status": 422,
                "code": "SUBSCRIPTION_TOKEN_INVALID",
                "detail": "The provided subscription token is invalid.",
            }
            return self._json(
                {"type": "ErrorResponse", "error": error, "time": 0}, 422 if request["headers"].get("x-subscription-token") else 401
            )
        count = int(request["query"].get("count", 20))
        results = [
            {
                "type": "search_result",
                "title": t,
                "url": u,
                "description": s.replace(" ", " <strong>", 1) + "</strong>",
                "is_source_local": False,
            }
            for t, u, s in self.hits[:count]
        ]
        return self._json(
            {
                "type": "search",
                "query": {"original": request["query"].get("q", ""), "more_results_available": False},
                "mixed": {"type": "mixed", "main": [{"type": "web", "index": i, "all": False} for i in range(len(results))]},
                "web": {"type": "search", "results": results, "family_friendly": True},
            }
        )

    def _tavily(self, request: dict) -> Page:
        if request["method"] != "POST" or request["path"] != "/search":
            return self._json({"detail": {"error": "Not Found"}}, 404)
        if request["headers"].get("authorization") != f"Bearer {self.key}":
            return self._json({"detail": {"error": "Unauthorized: missing or invalid API key."}}, 401)
        body = json.loads(request["body"])
        count = int(body.get("max_results", 5))
        return self._json(
            {
                "query": body["query"],
                "follow_up_questions": None,
                "answer": None,
                "images": [],
                "results": [{"title": t, "url": u, "content": s, "score": 0.9, "raw_content": None} for t, u, s in self.hits[:count]],
                "response_time": 0.5,
            }
        )

    def _exa(self, request: dict) -> Page:
        if request["method"] != "POST" or request["path"] != "/search":
            return self._json({"error": "Not found"}, 404)
        if request["headers"].get("x-api-key") != self.key:
            return self._json({"requestId": "r1", "error": "Invalid API key", "tag": "INVALID_API_KEY"}, 401)
        body = json.loads(request["body"])
        count = int(body.get("numResults", 10))
        wants_text = bool((body.get("contents") or {}).get("text"))
        results = []
        for t, u, s in self.hits[:count]:
            result: dict[str, Any] = {"id": u, "title": t, "url": u, "publishedDate": "2026-01-01T00:00:00.000Z", "author": None}
            if wants_text:
                result["text"] = s
            results.append(result)
        return self._json({"requestId": "b5947044c4b78efa9552a7c89b306d95", "resolvedSearchType": "neural", "results": results})


def pdf_bytes(pages: list[str], title: str = "") -> bytes:
    """A small, valid PDF whose pages each show one line of text (Helvetica)."""
    objects: list[bytes] = []
    count = len(pages)
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(count))
    font = 3 + 2 * count
    info = font + 1
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {count} >>".encode())
    for i, text in enumerate(pages):
        page_obj = 3 + 2 * i
        escaped = text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
        stream = f"BT /F1 12 Tf 72 720 Td ({escaped}) Tj ET".encode()
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Resources << /Font << /F1 {font} 0 R >> >> "
            f"/Contents {page_obj + 1} 0 R >>".encode()
        )
        objects.append(b"<< /Length " + str(len(stream)).encode() + b" >>\nstream\n" + stream + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    objects.append(f"<< /Title ({title}) >>".encode())
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, obj in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + obj + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    for offset in offsets:
        out += f"{offset:010d} 00000 n \n".encode()
    out += f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R /Info {info} 0 R >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)
