"""web_fetch's answers for what is not a readable page: error statuses, redirect loops, binary
content, and a page served as JSON."""

from __future__ import annotations

from core.events import Decision
from tests.fakes.web_server import Page, WebServer
from tests.toolsets.helpers import Session


async def test_an_error_status_says_it_with_what_the_page_said(tmp_path):
    with WebServer({"/gone": Page("<html><body><main><p>This page moved to the archive.</p></main></body></html>", status=410)}) as web:
        result = await Session(tmp_path).run("web_fetch", {"url": web.url("/gone")}, answer=Decision.ALLOW_ONCE)
    assert result.failed
    assert f"{web.url('/gone')} answered 410 Gone. It said:" in result.result.content and "moved to the archive" in result.result.content


async def test_a_redirect_loop_stops_after_five_hops_and_the_same_host_and_address_asks_once(tmp_path):
    with WebServer() as web:
        web.routes["/loop"] = Page("", status=302, headers={"Location": "/loop"})
        session = Session(tmp_path)
        result = await session.run("web_fetch", {"url": web.url("/loop")}, answer=Decision.ALLOW_ONCE)
    assert result.failed and "redirected more than 5 times" in result.result.content
    assert len(web.requests) == 6, "the URL and five redirects, each requested once"
    assert session.answered.title.startswith("Fetch "), "the one question was the first hop's; redirects to the same address did not ask"


async def test_binary_content_is_refused_with_its_type(tmp_path):
    with WebServer({"/logo.png": Page(b"\x89PNG\r\n\x1a\n" + b"\0" * 64, "image/png")}) as web:
        result = await Session(tmp_path).run("web_fetch", {"url": web.url("/logo.png")}, answer=Decision.ALLOW_ONCE)
    assert result.failed and "image/png" in result.result.content and "HTML, PDF, JSON and text" in result.result.content


async def test_json_comes_as_it_is_indented_to_read(tmp_path):
    with WebServer({"/api": Page('{"name":"hermes","tags":["a","b"]}', "application/json")}) as web:
        result = await Session(tmp_path).run("web_fetch", {"url": web.url("/api")}, answer=Decision.ALLOW_ONCE)
    assert not result.failed
    assert 'Type: application/json\n\n{\n "name": "hermes",\n "tags": [\n  "a",\n  "b"\n ]\n}' in result.result.content
