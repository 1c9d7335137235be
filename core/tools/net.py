"""Addresses a tool may reach on the network: which ones are this machine's or its network's, and
an HTTP client pinned to the address that was checked.

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
from typing import Any

import httpcore
import httpx

__all__ = ["Address", "domain_listed", "normal_host", "pinned_client", "resolve", "special_address"]

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
