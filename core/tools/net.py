"""Addresses a tool may reach on the network: which ones are this machine's or its network's, an
HTTP client pinned to the address that was checked, and the one download that checks every hop.

A host name is resolved once; every address it gives is checked (:func:`special_address`), and
the connection goes to the checked address (:func:`pinned_client`), so a name that resolves to
a public address when checked and to a private one a moment later (DNS rebinding) cannot move
the request. TLS still names the host (SNI and certificate checks) and so does the Host header.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Protocol

import httpcore
import httpx

from core.config import WebConfig
from core.tools.errors import ToolError

__all__ = [
    "MAX_REDIRECTS",
    "Address",
    "Approve",
    "Download",
    "domain_listed",
    "download",
    "http_url",
    "normal_host",
    "pinned_client",
    "refuse_denied",
    "resolve",
    "special_address",
]

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

_CGNAT = ipaddress.ip_network("100.64.0.0/10")
_PRIVATE = [ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")]
_METADATA = {ipaddress.ip_address("169.254.169.254"), ipaddress.ip_address("fd00:ec2::254")}
# NAT64 (RFC 6052) carries an IPv4 address in its last 32 bits.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")


def special_address(address: Address) -> str:
    """What kind of non-public address ``address`` is, in words ("" for a public one).

    Loopback, private (RFC 1918, fc00::/7), link-local (169.254/16 with the cloud metadata
    address, fe80::/10), unspecified, multicast, shared (CGNAT 100.64/10) and every other range
    that is not globally routable; IPv4 addresses inside IPv6 (mapped, NAT64, 6to4) count as
    the IPv4 address they carry.
    """
    if isinstance(address, ipaddress.IPv6Address):
        inner = address.ipv4_mapped or (address.sixtofour if address.sixtofour is not None else None)
        if inner is None and address in _NAT64:
            inner = ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
        if inner is not None:
            found = special_address(inner)
            return f"{found}, inside an IPv6 address" if found else ""
    if address in _METADATA:
        return "the cloud metadata address"
    if address.is_loopback:
        return "a loopback address"
    if address.is_unspecified:
        return "the unspecified address"
    if address.is_link_local:
        return "a link-local address"
    if address.is_multicast:
        return "a multicast address"
    if isinstance(address, ipaddress.IPv4Address) and address in _CGNAT:
        return "a shared (carrier-grade NAT) address"
    if any(address in network for network in _PRIVATE):
        return "a private network address"
    if address.is_private or not address.is_global or address.is_reserved:
        return "an address that is not public"
    return ""


def normal_host(host: str) -> str:
    """A host name as compared and remembered: lower case, no trailing dot, IDNA (punycode)."""
    host = host.strip().rstrip(".").lower()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        return host.encode("idna").decode("ascii") if not host.isascii() else host
    except UnicodeError:
        return host


def domain_listed(host: str, domains: Iterable[str]) -> str:
    """The entry of ``domains`` that covers ``host`` ("" for none): the domain itself or any name
    under it ("example.com" covers "docs.example.com")."""
    host = normal_host(host)
    for entry in domains:
        domain = normal_host(entry).removeprefix("*.")
        if domain and (host == domain or host.endswith("." + domain)):
            return entry
    return ""


async def resolve(host: str, port: int) -> list[Address]:
    """Every address ``host`` resolves to (an address literal: itself), in the resolver's order;
    OSError when it resolves to none."""
    try:
        return [ipaddress.ip_address(normal_host(host))]
    except ValueError:
        pass
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    found: list[Address] = []
    for _family, _type, _proto, _name, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in found:
            found.append(address)
    if not found:
        raise OSError(f"{host} resolves to no address")
    return found


class _PinnedBackend(httpcore.AsyncNetworkBackend):
    """Opens every TCP connection to one address, whatever name the request carries; TLS is
    started by the pool with the request's host name, so SNI and certificate checks are the host's."""

    def __init__(self, host: str, address: Address) -> None:
        self._host = normal_host(host)
        self._address = str(address)
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        if normal_host(host) != self._host:
            raise httpcore.ConnectError(f"this connection is pinned to {self._host}, not {host}")
        return await self._inner.connect_tcp(
            self._address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
        )

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("unix sockets are not reachable through a pinned connection")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class _PinnedTransport(httpx.AsyncHTTPTransport):
    def __init__(self, host: str, address: Address) -> None:
        super().__init__(trust_env=False)
        # The pool httpx would build, with a network backend that connects to the checked address.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(trust_env=False),
            max_connections=4,
            network_backend=_PinnedBackend(host, address),
        )


def pinned_client(host: str, address: Address, *, timeout: float, headers: dict[str, str] | None = None) -> httpx.AsyncClient:
    """An HTTP client whose requests to ``host`` connect to ``address`` (and to no other host);
    it follows no redirects and ignores proxy variables, so every hop is the caller's to check."""
    return httpx.AsyncClient(
        transport=_PinnedTransport(host, address),
        timeout=httpx.Timeout(timeout),
        follow_redirects=False,
        trust_env=False,
        headers=headers,
    )


MAX_REDIRECTS = 5
_REDIRECTS = {301, 302, 303, 307, 308}


class Approve(Protocol):
    """Asks before a hop connects, as ``ToolContext.approve_network`` does; raises to refuse."""

    async def __call__(self, title: str, host: str, *, every_time: str = "") -> None: ...


@dataclass(frozen=True, slots=True)
class Download:
    """What a URL answered, after redirects."""

    url: httpx.URL  # where the body came from
    status: int
    reason: str
    content_type: str
    body: bytes  # at most the ``max_bytes`` asked for
    cut: bool  # the body was longer, and the rest was not read


def http_url(text: str, tool: str) -> httpx.URL:
    """``text`` as an http(s) URL with a host; a ToolError naming ``tool`` and what is wrong otherwise."""
    try:
        url = httpx.URL(text.strip())
    except (httpx.InvalidURL, ValueError) as exc:
        raise ToolError(f"{text!r} is not a valid URL ({exc}).") from None
    if url.scheme not in ("http", "https"):
        raise ToolError(f"{tool} reads http and https URLs only, not {url.scheme or 'a URL without a scheme'}: {text!r}.")
    if not url.host:
        raise ToolError(f"{text!r} has no host.")
    return url


def refuse_denied(url: httpx.URL, settings: WebConfig) -> None:
    """A ToolError when ``url``'s host is in ``[web] deny_domains``."""
    if entry := domain_listed(url.host, settings.deny_domains):
        raise ToolError(
            f"Not allowed: {url.host} is in [web] deny_domains ({entry!r}) in config.toml, so it is never fetched. "
            "Find the information elsewhere, or ask the user."
        )


async def download(start: httpx.URL, settings: WebConfig, approve: Approve, *, max_bytes: int, headers: dict[str, str]) -> Download:
    """GET ``start``, following up to MAX_REDIRECTS redirects. Each hop is checked before it
    connects: refused when its host is in ``[web] deny_domains``; resolved, and an address of this
    machine or its network asks every time (once per host and address in one download), naming
    the address; any other host asks once per download unless ``[web] allow_domains`` covers it.
    The connection goes to the checked address; each step (resolving, the request and its body)
    within ``[web] timeout``; the body read up to ``max_bytes``. ToolError for what fails."""
    url = start
    approved: set[str] = set()  # hosts (and "host address" for special addresses) approved during this download
    for hop in range(MAX_REDIRECTS + 1):
        refuse_denied(url, settings)
        host = normal_host(url.host)
        try:
            async with asyncio.timeout(settings.timeout):
                addresses = await resolve(host, url.port or (443 if url.scheme == "https" else 80))
        except (OSError, TimeoutError) as exc:
            raise ToolError(f"Could not resolve {host}: {exc or 'timed out'}.") from None
        verb = "Follow a redirect to" if hop else "Fetch"
        special = [(address, why) for address in addresses if (why := special_address(address))]
        if special:
            address, why = special[0]
            named = str(address) if host == str(address) else f"{host} ({address})"
            if f"{host} {address}" not in approved:  # a redirect within the same host and address was asked for
                await approve(
                    f"{verb} {url}: {named} is {why}",
                    host,
                    every_time=f"{address} is {why}: a request there reaches this machine or its network, so it asks every time",
                )
            approved.add(f"{host} {address}")
        else:
            address = addresses[0]
            if host not in approved and not domain_listed(host, settings.allow_domains):
                await approve(f"{verb} {url}", host)
            approved.add(host)
        try:
            async with pinned_client(host, address, timeout=settings.timeout, headers=headers) as client:
                async with asyncio.timeout(settings.timeout), client.stream("GET", url) as response:
                    location = response.headers.get("location")
                    if response.status_code in _REDIRECTS and location:
                        url = _next_hop(url, location)
                        continue
                    body, cut = await _read_capped(response, max_bytes)
                    content_type = response.headers.get("content-type", "")
                    return Download(url, response.status_code, response.reason_phrase, content_type, body, cut)
        except TimeoutError:
            raise ToolError(f"{url} did not answer within {settings.timeout:g} s ([web] timeout).") from None
        except httpx.HTTPError as exc:
            raise ToolError(f"Could not fetch {url}: {type(exc).__name__}: {exc}.") from None
    raise ToolError(f"{start} redirected more than {MAX_REDIRECTS} times; stopped at {url}.")


def _next_hop(url: httpx.URL, location: str) -> httpx.URL:
    try:
        target = url.join(location)
    except (httpx.InvalidURL, ValueError):
        raise ToolError(f"{url} redirected to {location!r}, which is not a valid URL.") from None
    if target.scheme not in ("http", "https") or not target.host:
        raise ToolError(f"{url} redirected to {location!r}; only http and https URLs are followed.")
    return target


async def _read_capped(response: httpx.Response, limit: int) -> tuple[bytes, bool]:
    """The body up to ``limit`` bytes (decompressed), and whether it was longer."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            return b"".join(chunks)[:limit], True
    return b"".join(chunks), False
