"""web_fetch's checks below the editor: which addresses are this machine's or its network's, domain
lists, the client pinned to a checked address, and "always" remembered per host."""

from __future__ import annotations

import ipaddress

import httpx
import pytest

from core.config import WebConfig
from core.events import Decision
from core.policy.approvals import Action, ApprovalPolicy
from core.tools.context import ToolSettings
from core.tools.net import domain_listed, pinned_client, resolve, special_address
from tests.fakes.web_server import Page, WebServer
from tests.toolsets.helpers import Session

SPECIAL = {
    "127.0.0.1": "loopback",
    "127.8.9.10": "loopback",
    "10.1.2.3": "private",
    "172.16.0.1": "private",
    "192.168.1.1": "private",
    "169.254.169.254": "metadata",
    "169.254.10.1": "link-local",
    "100.64.0.1": "carrier-grade NAT",
    "0.0.0.0": "unspecified",
    "224.0.0.251": "multicast",
    "::1": "loopback",
    "::": "unspecified",
    "fe80::1": "link-local",
    "fc00::1": "private",
    "fd00::1": "private",
    "fd00:ec2::254": "metadata",
    "ff02::1": "multicast",
    "::ffff:127.0.0.1": "loopback",
    "::ffff:169.254.169.254": "metadata",
    "::ffff:10.0.0.1": "private",
    "64:ff9b::a9fe:a9fe": "metadata",  # NAT64 of 169.254.169.254
    "192.0.2.1": "not public",  # documentation range
}


@pytest.mark.parametrize("text", sorted(SPECIAL))
def test_addresses_of_this_machine_or_its_network_are_named(text):
    assert SPECIAL[text] in special_address(ipaddress.ip_address(text))


@pytest.mark.parametrize("text", ["8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111", "::ffff:8.8.8.8", "100.128.0.1"])
def test_public_addresses_are_not(text):
    assert special_address(ipaddress.ip_address(text)) == ""


def test_a_domain_entry_covers_the_names_under_it_and_nothing_else():
    domains = ["Example.com", "*.corp.test"]
    assert domain_listed("example.com", domains) == "Example.com"
    assert domain_listed("docs.EXAMPLE.com.", domains) == "Example.com"
    assert domain_listed("wiki.corp.test", domains) == "*.corp.test"
    assert domain_listed("badexample.com", domains) == ""
    assert domain_listed("example.com.evil.test", domains) == ""


async def test_an_address_literal_resolves_to_itself_and_localhost_to_loopback():
    assert await resolve("[::1]", 80) == [ipaddress.ip_address("::1")]
    assert all(special_address(a) for a in await resolve("localhost", 80))


async def test_the_pinned_client_connects_to_the_checked_address_whatever_the_name_resolves_to():
    with WebServer({"/x": Page("pinned", "text/plain")}) as web:
        # The name does not resolve at all: the connection can only have gone to the pinned address.
        async with pinned_client("pinned.invalid", ipaddress.ip_address("127.0.0.1"), timeout=10) as client:
            response = await client.get(f"http://pinned.invalid:{web.port}/x")
            assert response.text == "pinned"
            with pytest.raises(httpx.ConnectError):
                await client.get(f"http://other.invalid:{web.port}/x")
    assert web.requests[0]["headers"]["host"] == f"pinned.invalid:{web.port}", "the Host header keeps the name"
    assert len(web.requests) == 1


def test_always_is_scoped_to_the_host():
    policy = ApprovalPolicy(mode="auto", rules=[("web_fetch", "docs.python.org", "allow"), ("web_fetch", "evil.test", "deny")])

    def ruling(host: str):
        return policy.network_ruling(Action("web_fetch", "fetch", True, (), scope=host))

    assert ruling("docs.python.org").verdict == "allow"
    assert ruling("evil.test").verdict == "refuse"
    other = ruling("pypi.org")
    assert other.verdict == "ask" and other.offer_always, "a public host asks, even in auto mode, and may be always allowed"
    assert policy.rule_key(Action("web_fetch", "fetch", True, (), scope="pypi.org")) == ("web_fetch", "pypi.org")


async def test_always_allow_for_a_public_host_stops_asking_for_it_alone(tmp_path):
    session = Session(tmp_path, mode="auto")
    first = await session.run("web_fetch", {"url": "http://93.184.216.34/a"}, answer=Decision.ALLOW_ALWAYS)
    assert session.answered.offer_always and "93.184.216.34" in session.answered.title
    # Tests may not reach the internet: the fetch fails at connecting, after the question.
    assert first.failed and "Could not fetch" in first.result.content
    again = await session.run("web_fetch", {"url": "http://93.184.216.34/b"})  # would fail had it asked
    assert "Could not fetch" in again.result.content
    other = await session.run("web_fetch", {"url": "http://93.184.216.35/"}, answer=Decision.REJECT_ONCE)
    assert "declined" in other.result.content and "93.184.216.35" in session.answered.title


async def test_allow_domains_go_unasked_and_deny_domains_win(tmp_path):
    web = WebConfig(allow_domains=["93.184.216.34", "10.0.0.0"], deny_domains=["93.184.216.35"])
    session = Session(tmp_path, mode="ask", settings=ToolSettings(web=web))
    allowed = await session.run("web_fetch", {"url": "http://93.184.216.34/"})
    assert "Could not fetch" in allowed.result.content and not session.requests()
    denied = await session.run("web_fetch", {"url": "https://93.184.216.35/"})
    assert "deny_domains" in denied.result.content
    private = await session.run("web_fetch", {"url": "http://10.0.0.0/"}, answer=Decision.REJECT_ONCE)
    assert "private" in session.answered.title, "an allowed domain at a private address still asks"
    assert not session.answered.offer_always and "declined" in private.result.content


async def test_only_http_and_https(tmp_path):
    session = Session(tmp_path)
    for url in ("file:///etc/passwd", "ftp://example.com/x", "gopher://127.0.0.1:11211/"):
        result = await session.run("web_fetch", {"url": url})
        assert result.failed and "http and https URLs only" in result.result.content
